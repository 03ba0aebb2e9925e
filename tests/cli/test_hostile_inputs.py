"""Inputs built to break parsers: every one must end in exit 2 with one error line, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

DEEP_JSON = "[" * 100_000 + "]" * 100_000
HUGE_INT = "9" * 5000


def _assert_bad_input(result) -> None:
    assert result.exit_code == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()[0]) < 400


@pytest.mark.parametrize("content", [DEEP_JSON, f"[[{HUGE_INT}, 1], [1, 1]]"], ids=["deep", "huge-int"])
def test_eplb_statistics(cli, tmp_path: Path, content: str) -> None:
    stats = tmp_path / "stats.json"
    stats.write_text(content)
    _assert_bad_input(cli("eplb", "rebalance", stats, "--replicas", "4", "--gpus", "1", "--nodes", "1"))


def test_eplb_placement_file(cli, tmp_path: Path) -> None:
    stats = tmp_path / "stats.json"
    stats.write_text("[[1, 2], [3, 4]]")
    placement = tmp_path / "plan.json"
    placement.write_text(DEEP_JSON)
    _assert_bad_input(cli("eplb", "simulate", stats, placement))


@pytest.mark.parametrize("content", [DEEP_JSON, '{"schema": ' + HUGE_INT + "}"], ids=["deep", "huge-int"])
def test_topology_plan_json(cli, tmp_path: Path, content: str) -> None:
    plan = tmp_path / "plan"
    plan.mkdir()
    (plan / "plan.json").write_text(content)
    links = tmp_path / "links.csv"
    links.write_text("a_device,a_port,b_device,b_port\n")
    _assert_bad_input(cli("topology", "verify", plan, links))


def test_ibnetdiscover_port_with_thousands_of_digits(cli, tmp_path: Path) -> None:
    out = tmp_path / "plan"
    assert cli("topology", "plan", "--nodes", "4", "--out-dir", out).exit_code == 0
    observed = tmp_path / "fabric.txt"
    observed.write_text(f'Switch 64 "S-0001" # "p0-leaf01" base port 0 lid 1 lmc 0\n[{HUGE_INT}] "H-0002"[1] # "x"\n')
    _assert_bad_input(cli("topology", "verify", out, observed))


@pytest.mark.parametrize("content", ["x: " + "[" * 50_000 + "]" * 50_000, f"name: m\nnum_layers: {HUGE_INT}\n"],
                         ids=["deep", "huge-int"])
def test_profile_yaml(cli, tmp_path: Path, content: str) -> None:
    path = tmp_path / "models" / "m.yaml"
    path.parent.mkdir()
    path.write_text(content)
    _assert_bad_input(cli("profiles", "validate", path))


def test_launch_and_topology_size_limits(cli) -> None:
    _assert_bad_input(cli("launch", "--nodes", "100000000", "--", "t.py"))
    _assert_bad_input(cli("launch", "layout", "--nodes", "100000000"))
    _assert_bad_input(cli("topology", "plan", "--kind", "ft3", "--nodes", "3000000"))
