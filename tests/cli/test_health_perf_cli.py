"""dsctl health perf on the shipped examples and the real reports of tests/data/health: exit codes, the JSON shape,
the table naming hosts and NICs, one-line errors for files of neither kind, hostile text in names."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsctl.commands.examples import example_data_dir

Cli = Callable[..., Any]
PERF = example_data_dir() / "perf"
REAL = Path(__file__).resolve().parents[1] / "data" / "health" / "real"


def test_examples_one_nic_slow_exit_1_and_json(cli: Cli) -> None:
    r = cli("health", "perf", str(PERF / "all_reduce_h100_2nodes.txt"), str(PERF / "ib_write_bw_mlx5_0.txt"),
            str(PERF / "ib_write_bw_mlx5_3.txt"), "-f", "json")
    assert r.exit_code == 1, r.stderr
    data = r.json()
    assert data["counts"] == {"ok": 2, "slow": 1, "wrong": 0, "not_judged": 0}
    verdicts = {Path(x["file"]).name: (x["verdict"], x["node_profile"]) for x in data["results"]}
    assert verdicts == {"all_reduce_h100_2nodes.txt": ("ok", "h100-hgx"), "ib_write_bw_mlx5_0.txt": ("ok", "h800-hgx"),
                        "ib_write_bw_mlx5_3.txt": ("slow", "h800-hgx")}
    slow = next(x for x in data["results"] if x["verdict"] == "slow")
    # 21874.52 MiB/s against 400 Gb/s x 0.88
    assert slow["ratio"] == pytest.approx(21874.52 * 2 ** 20 / (400e9 / 8 * 0.88))
    assert slow["devices"] == ["mlx5_3"] and "LID 0x14" in slow["path"]


def test_table_names_the_hosts_and_the_basis(cli: Cli) -> None:
    r = cli("health", "perf", str(PERF / "all_reduce_h100_2nodes.txt"))
    assert r.exit_code == 0, r.stderr
    assert "h100-n01" in r.stdout and "8 NICs x 44 GB/s" in r.stdout and "h100-hgx" in r.stdout


def test_the_shipped_all_reduce_report_says_it_is_not_a_recording() -> None:
    # written by tests/data/examples/make_examples.py: no real report found under a licence that allows shipping it
    first = (PERF / "all_reduce_h100_2nodes.txt").read_text().splitlines()[0]
    assert first.startswith("# ") and first.endswith("not a recording")


def test_node_profile_option_wins_over_the_gpu_model(cli: Cli) -> None:
    r = cli("health", "perf", str(PERF / "all_reduce_h100_2nodes.txt"), "--node-profile", "h800-hgx", "-f", "json")
    (result,) = r.json()["results"]
    assert result["node_profile"] == "h800-hgx" and result["expected_bytes_per_s"] == \
        pytest.approx(160e9 * 8 / 7)


def test_real_reports_not_judged_exit_0(cli: Cli) -> None:
    r = cli("health", "perf", str(REAL / "nccl-1531-h800-8x8-alltoall-excerpt.txt"), "-f", "json")
    assert r.exit_code == 0, r.stderr
    (result,) = r.json()["results"]
    assert result["verdict"] == "not_judged" and result["nodes"] == ["GPU-NODE09", "GPU-NODE16"]
    assert result["path"] == "8 nodes x 8 GPUs (64 ranks, rank lines elided)"


def test_neither_kind_and_bad_fraction_are_one_line_exit_2(cli: Cli, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("all good\n")
    r = cli("health", "perf", str(notes))
    assert r.exit_code == 2 and "notes.txt: neither a perftest report" in r.stderr and "Traceback" not in r.stderr
    r = cli("health", "perf", str(PERF / "ib_write_bw_mlx5_0.txt"), "--fraction", "0")
    assert r.exit_code == 2 and "--fraction" in r.stderr
    r = cli("health", "perf", str(tmp_path / "missing.txt"))
    assert r.exit_code == 2 and "missing.txt" in r.stderr


def test_terminal_control_text_in_a_host_name_is_escaped(cli: Cli, tmp_path: Path) -> None:
    text = (REAL / "nccl-tests-309-h100-2x8-all-reduce.txt").read_text().replace("bm-h100-01",
                                                                               "evil\x1b]0;pwned\x07")
    path = tmp_path / "all_reduce.log"
    path.write_text(text)
    r = cli("health", "perf", str(path))
    assert r.exit_code == 0 and "\x1b]0;" not in r.stdout


HOSTILE_VALUES = st.one_of(st.sampled_from(["nan", "inf", "-1", "1e400", "9" * 4400, "0x10", "\x1b[31m", ""]),
                           st.text(max_size=12))


@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(fraction=HOSTILE_VALUES, cut=st.integers(min_value=0, max_value=6000), junk=st.binary(max_size=40),
       which=st.sampled_from(["all_reduce_h100_2nodes.txt", "ib_write_bw_mlx5_3.txt"]))
def test_hostile_fraction_and_mangled_reports_end_in_0_1_or_2(tmp_path: Path, fraction: str, cut: int, junk: bytes,
                                                                which: str) -> None:
    from tests.conftest import run_cli

    data = (PERF / which).read_bytes()
    path = tmp_path / which
    path.write_bytes(data[:cut] + junk + data[cut:][: len(data) // 2])
    for args in (("health", "perf", str(path)), ("health", "perf", str(PERF / which), "--fraction", fraction)):
        r = run_cli(*args)
        assert r.exit_code in (0, 1, 2), (args, r.exit_code, r.stderr[-400:])
        assert "Traceback" not in r.stderr
        if r.exit_code == 2:
            assert r.stderr.startswith("error: ") and len(r.stderr.strip().splitlines()) <= 2


def test_plan_sets_the_default_profile_and_a_missing_plan_is_exit_2(cli: Cli, tmp_path: Path) -> None:
    assert cli("topology", "plan", "-N", "16", "--out-dir", str(tmp_path / "p16")).exit_code == 0
    r = cli("health", "perf", str(PERF / "all_reduce_h100_2nodes.txt"), "--plan", str(tmp_path / "p16"), "-f", "json")
    (result,) = r.json()["results"]
    # the plan was made for h800-hgx: all_reduce on 2 nodes is NVLink-bound there, 160 GB/s x 8/7
    assert result["node_profile"] == "h800-hgx" and result["expected_bytes_per_s"] == pytest.approx(160e9 * 8 / 7)
    r = cli("health", "perf", str(PERF / "all_reduce_h100_2nodes.txt"), "--plan", str(tmp_path))
    assert r.exit_code == 2 and "has no plan.json" in r.stderr
