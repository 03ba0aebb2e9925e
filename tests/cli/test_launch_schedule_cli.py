"""dsctl launch schedule through the real entry point."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest


def test_json_worked_example(cli) -> None:
    result = cli("launch", "schedule", "--schedule", "dualpipe", "--pp", "4", "--micro-batches", "10",
                 "--fb-cost", "3", "--format", "json")
    assert result.exit_code == 0, result.stderr
    data = result.json()
    assert data["dsctl"]["command"] == "launch schedule"
    expected = ("F0.0 F0.1 F0.2 F1.0 I1.0 W1.0 F1.1 F0.3&B1.1 F1.2&B0.0 F0.4&B1.2 F1.3&B0.1 B1.3 "
                "F1.4&B0.2 B1.4 I0.3 W0.3 I0.4 W0.4")
    assert data["ops"][0] == expected.split()
    assert data["timeline"][0][0] == ["F0.0", 0.0, 1.0]
    assert data["makespan"] == 32.0
    assert data["bubble"] == data["formula_bubble"] == 2.0
    assert data["formula_exact"] is True
    assert data["peak_activations"] == 5
    assert data["num_ranks"] == 4


def test_readme_costs_pp8(cli) -> None:
    data = cli("launch", "schedule", "--pp", "8", "--micro-batches", "20", "--f-cost", "1", "--b-cost", "2",
               "--w-cost", "1", "--fb-cost", "2.5", "-f", "json").json()
    assert data["bubble"] == 4.5
    assert data["idle_per_rank"] == [3.5, 4.0, 4.5, 4.5, 4.5, 4.5, 4.0, 3.5]
    assert data["costs"]["fb"] == 2.5


def test_dualpipev_pp_counts_stages(cli) -> None:
    data = cli("launch", "schedule", "--schedule", "dualpipev", "--pp", "8", "--micro-batches", "10",
               "--format", "json").json()
    assert data["num_stages"] == 8 and data["num_ranks"] == 4 and len(data["ops"]) == 4
    assert data["peak_activations_per_rank"] == [9, 9, 9, 9]


@pytest.mark.parametrize("schedule", ["1f1b", "zb1p"])
def test_linear_schedules(cli, schedule: str) -> None:
    data = cli("launch", "schedule", "--schedule", schedule, "--pp", "8", "--micro-batches", "16",
               "--format", "yaml")
    assert data.exit_code == 0
    assert "bubble: 21.0" in data.stdout if schedule == "1f1b" else "bubble: 7.0" in data.stdout


def test_table_output_has_timeline_and_op_order(cli) -> None:
    result = cli("launch", "schedule", "--pp", "4", "--micro-batches", "10")
    assert result.exit_code == 0
    assert "README formula" in result.stdout
    assert "r0 FFFf" in result.stdout
    assert "F0.3&B1.1" in result.stdout


def test_batched_model(cli) -> None:
    data = cli("launch", "schedule", "--pp", "8", "--micro-batches", "20", "--f-cost", "2", "--b-cost", "2",
               "--w-cost", "1", "--fb-cost", "3", "--comm-model", "batched", "--format", "json").json()
    assert data["comm_model"] == "batched" and data["makespan"] == 79.0


def test_svg_file(cli, tmp_path: Path) -> None:
    target = tmp_path / "dualpipe.svg"
    result = cli("launch", "schedule", "--pp", "8", "--micro-batches", "20", "--svg", str(target),
                 "--format", "json")
    assert result.exit_code == 0
    root = ET.parse(target).getroot()
    assert root.tag.endswith("svg")
    assert result.json()["makespan"] == 66.0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--pp", "5", "--micro-batches", "20"], "even --pp"),
        (["--pp", "8", "--micro-batches", "10"], "--micro-batches >= 2 x --pp = 16"),
        (["--schedule", "dualpipev", "--pp", "8", "--micro-batches", "6"], "--micro-batches >= --pp"),
        (["--schedule", "gpipe"], "dualpipe, dualpipev, 1f1b, zb1p or interleaved"),
        (["--w-cost", "3"], "--w-cost 3.0 > --b-cost 2.0"),
        (["--schedule", "1f1b", "--comm-model", "batched"], "dualpipe and dualpipev only"),
        (["--comm-model", "nccl"], "--comm-model 'nccl'"),
        (["--schedule", "1f1b", "--fb-cost", "2.5"], "--fb-cost 2.5: 1f1b never overlaps"),
        (["--schedule", "interleaved", "--fb-cost", "2.5"], "applies to dualpipe and dualpipev only"),
        (["--schedule", "1f1b", "--w-cost", "0.5"], "--w-cost 0.5: 1f1b runs every backward whole"),
        (["--schedule", "interleaved", "--w-cost", "1"], "applies to dualpipe, dualpipev, zb1p"),
    ],
)
def test_bad_input_exits_2_with_one_line(cli, args: list[str], needle: str) -> None:
    result = cli("launch", "schedule", *args)
    assert result.exit_code == 2
    assert needle in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_bad_svg_folder_writes_nothing(cli, tmp_path: Path) -> None:
    result = cli("launch", "schedule", "--svg", str(tmp_path / "missing" / "x.svg"))
    assert result.exit_code == 2
    assert "does not exist" in result.stderr
    assert not (tmp_path / "missing").exists()


def test_bad_params_leave_no_svg(cli, tmp_path: Path) -> None:
    target = tmp_path / "x.svg"
    result = cli("launch", "schedule", "--pp", "3", "--svg", str(target))
    assert result.exit_code == 2 and not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_svg_pointing_at_a_folder(cli, tmp_path: Path) -> None:
    result = cli("launch", "schedule", "--svg", str(tmp_path))
    assert result.exit_code == 2 and "is a folder" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_svg_too_large_is_refused_before_simulating(cli, tmp_path: Path) -> None:
    target = tmp_path / "f.svg"
    result = cli("launch", "schedule", "--pp", "100", "--micro-batches", "10000", "--svg", str(target))
    assert result.exit_code == 2 and result.stdout == ""
    assert "--svg" in result.stderr and "at least 1,000,000 ops" in result.stderr and "20,000" in result.stderr
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_table_lists_op_order_only_for_small_schedules(cli) -> None:
    small = cli("launch", "schedule", "--pp", "8", "--micro-batches", "20")
    assert "op order per rank" in small.stdout and "F0.0" in small.stdout
    big = cli("launch", "schedule", "--pp", "8", "--micro-batches", "200")
    assert big.exit_code == 0
    assert "op order per rank: not shown for 1,722 ops" in big.stdout and "--format json" in big.stdout
    assert "F1.99" not in big.stdout
    data = cli("launch", "schedule", "--pp", "8", "--micro-batches", "200", "-f", "json").json()
    assert sum(len(ops) for ops in data["ops"]) == 1722
