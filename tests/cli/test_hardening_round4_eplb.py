"""Issue 33, eplb: hostile ``.pt`` files and very large eplb inputs through the CLI end in exit 2 with one line
naming the file or limit, nothing on stdout and no --out file (before: process memory in the loads, exit 4 or
139, minutes and GBs); ``--prove`` spends a bounded number of search nodes over all layers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from dsctl.eplb import exact
from tests.hostile_eplb import CASES
from tests.hostile_pickles import HOSTILE, build_on_storage, good_dump

#: the limit or rule each large input meets (a fragment of its one error line)
EPLB_REFUSALS = {
    "balanced_large": "needs about 268,435,456 units of planning work, above the limit of 48,000,000",
    "reference_hot_expert": "gives one expert 61,441 replicas: log2phy",
    "simulate_hot_placement": "would hold 251,662,336 entries, above the limit of 16,777,216",
    "previous_hot_placement": "gives one expert 61,441 replicas",
    "simulate_many_numbers": "more than 2,097,152 numbers",
    "budget_many_levels": "eplb budget over 3,841 slot counts with --algorithm balanced needs about",
    "replay_many_windows": "replay of 40 windows with --algorithm balanced needs about",
    "plan_slots": "3,906 layers x 4,096 slots = 15,998,976 slots is above the limit of 2,097,152",
    "replay_min_gain_nan": "--min-gain nan must be in [0, 1)",
}


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and stderr.startswith("error: "), stderr
    return lines[0]


def test_every_large_case_has_its_refusal() -> None:
    assert set(EPLB_REFUSALS) == set(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_large_eplb_input_is_refused_before_the_work(cli: Callable, tmp_path: Path, case: str) -> None:
    res = cli(*CASES[case][1](tmp_path))
    assert res.exit_code == 2, res.stderr
    assert EPLB_REFUSALS[case] in _one_error_line(res.stderr) and res.stdout == ""


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_pt_file_is_one_error_line_and_no_output(cli: Callable, tmp_path: Path, case: str) -> None:
    path = tmp_path / f"{case}.pt"
    path.write_bytes(HOSTILE[case][1]())
    out = tmp_path / "plan.json"
    res = cli("eplb", "rebalance", path, "--replicas", "4", "--gpus", "2", "--nodes", "1", "--out", out)
    assert res.exit_code == 2, res.stderr
    line = _one_error_line(res.stderr)
    assert str(path) in line and "\x1b" not in res.stderr and res.stdout == "" and not out.exists()


def test_build_exploit_no_longer_reads_process_memory(cli: Callable, tmp_path: Path) -> None:
    """Before: exit 0 and loads summing to ~3.5e18 from an all-zero storage, different each run."""
    path = tmp_path / "dump.pt"
    path.write_bytes(build_on_storage())
    res = cli("eplb", "rebalance", path, "--replicas", "57", "--gpus", "1", "--nodes", "1", "--format", "json")
    assert res.exit_code == 2 and "pickle opcode BUILD" in res.stderr
    assert res.json()["dsctl"]["exit_code"] == 2 and "metrics" not in res.json()  # an error envelope, no loads
    good = tmp_path / "good.pt"
    good.write_bytes(good_dump())
    res = cli("eplb", "rebalance", good, "--replicas", "3", "--gpus", "1", "--nodes", "1", "--format", "json")
    assert res.exit_code == 0, res.stderr


def test_prove_spends_one_node_budget_over_all_layers(cli: Callable, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Hard layers (24 experts, 48 slots, 8 GPUs: 300,000 nodes each do not prove them) under a run budget of
    6,000 nodes: the search spends at most that in all and marks the layers it could not finish."""
    spent = []
    original = exact._Budget.spend

    def counting(self: exact._Budget, amount: int = 1) -> bool:
        spent.append(amount)
        return original(self, amount)

    monkeypatch.setattr(exact._Budget, "spend", counting)
    monkeypatch.setattr("dsctl.eplb.rebalance.MAX_PROVE_NODES", 6_000)
    rng = np.random.default_rng(0)
    stats = tmp_path / "hard.npy"
    np.save(stats, rng.pareto(1.5, (12, 24)) * 100 + 1)
    res = cli("eplb", "rebalance", stats, "--replicas", "48", "--gpus", "8", "--nodes", "1", "--prove",
              "--format", "json")
    assert res.exit_code == 0, res.stderr
    assert sum(spent) <= 6_000 + 200  # a search unwinds past its share (50-120 nodes); later layers pay for it
    summary = res.json()["metrics"]["summary"]
    assert summary["layers_proved"] < 12


def test_solve_shares_the_total_budget_and_passes_on_what_a_layer_leaves() -> None:
    easy = np.array([[4.0, 3.0, 2.0, 1.0]] * 5)  # proved in a few nodes each
    result = exact.solve(easy, 4, 2, total_budget=50)
    assert result.proved.all()
    none_left = exact.solve(easy, 4, 2, total_budget=0)
    assert not none_left.proved.any()


@pytest.mark.parametrize("kind", ["statistics", "placement"])
def test_json_keys_with_line_breaks_stay_on_the_error_line(cli: Callable, tmp_path: Path, kind: str) -> None:
    forged = tmp_path / "f.json"
    forged.write_text('{"x\\nerror: all nodes drained\\u001b[2J": 1}')
    if kind == "statistics":
        res = cli("eplb", "rebalance", forged, "--replicas", "4", "--gpus", "2", "--nodes", "1")
    else:
        stats = tmp_path / "s.json"
        stats.write_text("[[1, 2, 3, 4]]")
        res = cli("eplb", "simulate", stats, forged, "--gpus", "2")
    assert res.exit_code == 2
    assert "'x\\nerror: all nodes drained\\x1b[2J'" in _one_error_line(res.stderr) and "\x1b" not in res.stderr
