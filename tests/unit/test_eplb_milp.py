"""The HiGHS MILP prover (dsctl.eplb.milp, `--prove-with`) against the branch and bound on small instances.

The solver tests skip without highspy (the `milp` extra; the `test` extra installs it, so CI runs them)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from eplb_asserts import assert_hierarchical, assert_valid

from dsctl.eplb import exact, milp
from dsctl.eplb.bounds import global_lower_bound
from dsctl.eplb.placement import gpu_loads, placement_from_phy2log

needs_highspy = pytest.mark.skipif(not milp.available(), reason="highspy (the dsctl[milp] extra) is not installed")
#: vllm-ascend#3042: 8 experts on 8 GPUs x 2 slots; optimum 560 / 3 + 10
ASCEND_3042 = np.array([[600.0, 560, 120, 120, 20, 10, 10, 10]])
README = [[90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86], [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27]]


def max_load(weight: np.ndarray, phy2log: np.ndarray, num_gpus: int) -> float:
    p = placement_from_phy2log(phy2log, weight.shape[1])
    return float(gpu_loads(weight, p.phy2log, p.logcnt, num_gpus).max())


def test_count_choices_keep_replicas_under_the_cap_and_leave_room_for_the_others() -> None:
    w = np.array([10.0, 4.0, 1.0])
    # cap 5: expert 0 needs >= 2 replicas, the others >= 1; 6 slots leave 2 spare
    assert milp.count_choices(w, 6, 5.0) == [(0, 2), (0, 3), (0, 4), (1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3)]
    assert milp.count_choices(w, 3, 5.0) is None  # expert 0 alone needs 2 of 3 slots, the others 2 more
    assert len(milp.count_choices(w, 4, float("inf")) or []) == 6  # 1 spare slot: counts 1-2 each
    assert milp.count_choices(np.ones(4096), 8192, float("inf")) == []  # 16.8 million pairs: counted, not built


@needs_highspy
@pytest.mark.parametrize("seed", range(4))
def test_milp_optimum_equals_the_search_on_small_global_instances(seed: int) -> None:
    rng = np.random.default_rng(seed)
    w = np.round(rng.lognormal(0, 1, (1, int(rng.integers(4, 7)))) * 100)
    searched = exact.solve(w, 8, 4)
    got = milp.solve(w, 8, 4, time_s=20)
    assert searched.proved[0] and got.proved[0]
    assert got.optimum[0] == pytest.approx(searched.optimum[0], rel=1e-9)
    assert got.lower[0] <= searched.optimum[0] * (1 + 1e-9)
    assert max_load(w, got.phy2log, 4) == pytest.approx(got.optimum[0], rel=1e-12)
    assert_valid(placement_from_phy2log(got.phy2log, w.shape[1]), w.shape[1], 8)


@needs_highspy
@pytest.mark.parametrize("seed", range(2))
def test_milp_optimum_equals_the_search_on_small_hierarchical_instances(seed: int) -> None:
    rng = np.random.default_rng(10 + seed)
    w = np.round(rng.lognormal(0, 1, (1, 8)) * 100)  # 8 experts in 4 groups on 2 nodes of 2 GPUs x 3 slots
    searched = exact.solve(w, 12, 4, 4, 2)
    got = milp.solve(w, 12, 4, 4, 2, time_s=20)
    assert searched.proved[0] and got.proved[0]
    assert got.optimum[0] == pytest.approx(searched.optimum[0], rel=1e-9)
    plan = placement_from_phy2log(got.phy2log, 8)
    assert_hierarchical(plan, 4, 2)
    assert max_load(w, got.phy2log, 4) == pytest.approx(got.optimum[0], rel=1e-12)


@needs_highspy
def test_milp_proves_a_start_optimal_and_beats_a_bad_one(capfd: pytest.CaptureFixture[str]) -> None:
    optimum = 590 / 3
    proved = milp.solve(ASCEND_3042, 16, 8, start=np.array([optimum]), time_s=30)
    assert proved.proved.tolist() == [True] and not proved.improved.any()
    assert proved.optimum[0] == pytest.approx(optimum) and proved.lower[0] == pytest.approx(optimum, rel=1e-6)
    better = milp.solve(ASCEND_3042, 16, 8, start=np.array([232.0]), time_s=30)  # DeepSeek EPLB's max load
    assert better.improved.tolist() == [True] and better.optimum[0] == pytest.approx(optimum)
    assert capfd.readouterr().out == ""  # the solver's banner would corrupt --format json


@needs_highspy
def test_out_of_time_leaves_a_valid_lower_bound_and_the_start() -> None:
    rng = np.random.default_rng(0)
    w = np.round(rng.lognormal(0, 1, (2, 16)) * 1000)
    start = np.array([1.2, 1.3]) * w.sum(axis=1) / 8
    got = milp.solve(w, 32, 8, start=start, time_s=0.0)  # no time: the combinatorial bound, nothing proved
    assert not got.proved.any() and np.array_equal(got.optimum, start)
    assert np.allclose(got.lower, global_lower_bound(w, 32, 8))


def write_readme(tmp_path: Path) -> Path:
    path = tmp_path / "stats.json"
    path.write_text(json.dumps({"load": README}))
    return path


@needs_highspy
@pytest.mark.parametrize("prover", ["milp", "auto"])
def test_cli_prove_with_milp_proves_the_readme_layers(cli: Callable, tmp_path: Path, prover: str) -> None:
    res = cli("eplb", "rebalance", write_readme(tmp_path), "-r", "16", "-g", "8", "-N", "2", "--groups", "4",
              "--prove", "--prove-with", prover, "--prove-time-s", "60", "--format", "json")
    assert res.exit_code == 0, res.stderr
    layers = res.json()["metrics"]["layers"]
    assert [layer["optimum"]["proved"] for layer in layers] == [True, True]
    # the search's optima (the reference's plans: 156 and 179.5)
    assert [layer["optimum"]["max_gpu_load"] for layer in layers] == pytest.approx([151.0, 179.5])


def test_cli_refuses_milp_without_highspy(cli: Callable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(milp, "available", lambda: False)
    res = cli("eplb", "rebalance", write_readme(tmp_path), "-r", "16", "-g", "8", "-N", "2", "--groups", "4",
              "--prove", "--prove-with", "milp")
    assert res.exit_code == 3 and "dsctl[milp]" in res.stderr


@pytest.mark.parametrize(("args", "message"), [
    (("--prove-with", "milp"), "apply with --prove"),
    (("--prove", "--prove-time-s", "5"), "MILP only"),
    (("--prove", "--prove-with", "cplex"), "search, milp or auto"),
    (("--prove", "--prove-with", "auto", "--prove-time-s", "0"), "must be in (0, 3600]"),
])
def test_cli_prove_option_errors(cli: Callable, tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    res = cli("eplb", "rebalance", write_readme(tmp_path), "-r", "16", "-g", "8", "-N", "2", "--groups", "4", *args)
    assert res.exit_code == 2 and message in res.stderr


@needs_highspy
def test_auto_hands_the_layers_the_search_left_open_to_the_milp(cli: Callable, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("dsctl.eplb.rebalance.MAX_PROVE_NODES", 0)  # the search proves nothing
    args = ("eplb", "rebalance", write_readme(tmp_path), "-r", "16", "-g", "8", "-N", "2", "--groups", "4",
            "--prove", "--format", "json")
    searched = cli(*args).json()["metrics"]["summary"]
    assert searched["layers_proved"] == 0
    res = cli(*args, "--prove-with", "auto")
    assert res.exit_code == 0, res.stderr
    data = res.json()["metrics"]
    assert data["summary"]["layers_proved"] == 2
    assert [layer["optimum"]["max_gpu_load"] for layer in data["layers"]] == pytest.approx([151.0, 179.5])
    assert "MILP" in data["summary"]["bound_kind"]
