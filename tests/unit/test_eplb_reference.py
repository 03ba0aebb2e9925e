"""dsctl.eplb.reference: DeepSeek's EPLB reproduced exactly (README example, golden outputs of the real reference)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dsctl.eplb.checks import check_layout
from dsctl.eplb.metrics import placement_metrics
from dsctl.eplb.placement import balancedness, gpu_loads
from dsctl.eplb.reference import pack_balanced, rebalance_reference, replicate_experts

README_WEIGHT = np.array([
    [90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
    [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27],
])
GOLDEN = json.loads((Path(__file__).parent / "data" / "eplb_golden.json").read_text())


def test_readme_example_phy2log_logcnt_log2phy() -> None:
    p = rebalance_reference(README_WEIGHT, 16, 4, 2, 8)
    assert p.phy2log.tolist() == [
        [5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1],
        [7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1],
    ]
    assert p.logcnt.tolist() == [[1, 2, 1, 1, 2, 2, 1, 1, 1, 1, 2, 1], [1, 2, 1, 1, 1, 2, 2, 1, 2, 1, 1, 1]]
    assert p.log2phy.shape == (2, 12, 2)
    # multi-replica experts, rank 0 first (creation order, not slot order)
    assert p.log2phy[0, 1].tolist() == [15, 13]
    assert p.log2phy[0, 4].tolist() == [7, 5]
    assert p.log2phy[0, 5].tolist() == [0, 2]
    assert p.log2phy[0, 10].tolist() == [8, 10]
    assert p.log2phy[1, 1].tolist() == [15, 11]
    assert p.log2phy[1, 5].tolist() == [10, 12]
    assert p.log2phy[1, 6].tolist() == [2, 4]
    assert p.log2phy[1, 8].tolist() == [6, 3]
    assert p.log2phy[0, 0].tolist() == [12, -1]
    assert p.phy2log.dtype == np.int64 and p.log2phy.dtype == np.int64 and p.logcnt.dtype == np.int64


def test_readme_example_balancedness() -> None:
    p = rebalance_reference(README_WEIGHT, 16, 4, 2, 8)
    loads = gpu_loads(README_WEIGHT, p.phy2log, p.logcnt, 8)
    assert loads.max(axis=1).tolist() == [156.0, 179.5]
    assert loads.mean(axis=1).tolist() == [129.125, 144.5]
    assert np.round(balancedness(loads), 4).tolist() == [0.8277, 0.8050]
    metrics = placement_metrics(README_WEIGHT, p, check_layout(2, 12, 16, 4, 2, 8))
    assert metrics.after.balancedness == pytest.approx([129.125 / 156, 144.5 / 179.5], rel=1e-12)


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=lambda c: c["name"])
def test_matches_reference_golden_outputs(case: dict) -> None:
    weight = np.array(case["weight"])
    p = rebalance_reference(weight, case["num_replicas"], case["num_groups"], case["num_nodes"], case["num_gpus"],
                            case["policy"])
    ref_p2l, ref_l2p, ref_cnt = (np.array(case[k]) for k in ("phy2log", "log2phy", "logcnt"))
    assert np.array_equal(p.logcnt, ref_cnt)
    assert p.log2phy.shape == ref_l2p.shape
    if case["integer"]:  # ties: same counts and the same per-GPU replica loads
        def per_gpu(p2l: np.ndarray) -> np.ndarray:
            per_replica = weight.astype(np.float32) / ref_cnt.astype(np.float32)
            slots = np.take_along_axis(per_replica, p2l, axis=1)
            return np.sort(slots.reshape(slots.shape[0], case["num_gpus"], -1), axis=2)
        assert np.array_equal(per_gpu(p.phy2log), per_gpu(ref_p2l))
    else:
        assert np.array_equal(p.phy2log, ref_p2l)
        assert np.array_equal(np.sort(p.log2phy, axis=2), np.sort(ref_l2p, axis=2))


def test_global_policy_with_one_slot_per_gpu_is_replication_order() -> None:
    w = np.array([[5.0, 1.0, 3.0, 2.0]])
    p = rebalance_reference(w, 6, 1, 1, 6, "global")
    # k = 1: experts 0..3 then the extras in creation order (expert 0 twice: 5 > 3 > 5/2)
    assert p.phy2log.tolist() == [[0, 1, 2, 3, 0, 2]]
    assert p.logcnt.tolist() == [[2, 1, 2, 1]]


def test_all_zero_layer_gives_extras_to_first_expert_of_each_node() -> None:
    w = np.zeros((1, 8))
    p = rebalance_reference(w, 12, 2, 2, 2)
    assert p.logcnt.tolist() == [[3, 1, 1, 1, 3, 1, 1, 1]]


def test_replicas_equal_experts_gives_one_replica_each() -> None:
    w = np.random.default_rng(1).random((3, 16))
    p = rebalance_reference(w, 16, 4, 2, 4)
    assert np.all(p.logcnt == 1) and p.log2phy.shape == (3, 16, 1)


def test_pack_balanced_lowest_bin_and_stable_ties() -> None:
    values = np.array([[4.0, 4.0, 1.0, 1.0]], dtype=np.float32)
    bins, pos = pack_balanced(values, 2)
    assert bins.tolist() == [[0, 1, 0, 1]]  # equal totals 4, 4 -> lowest bin
    assert pos.tolist() == [[0, 0, 1, 1]]


def test_replicate_first_maximum_on_ties() -> None:
    slot_expert, rank, count = replicate_experts(np.array([[2.0, 4.0, 4.0]], dtype=np.float32), 5)
    assert slot_expert.tolist() == [[0, 1, 2, 1, 2]]
    assert rank.tolist() == [[0, 0, 0, 1, 1]]
    assert count.tolist() == [[1, 2, 2]]


def test_policy_override_global_on_divisible_layout() -> None:
    w = np.random.default_rng(3).random((2, 32)).astype(np.float32)
    hier = rebalance_reference(w, 48, 4, 2, 8, "hierarchical")
    glob = rebalance_reference(w, 48, 4, 2, 8, "global")
    ref_global = rebalance_reference(w, 48, 1, 1, 8)  # the reference's global path: G' = N' = 1
    assert np.array_equal(glob.phy2log, ref_global.phy2log)
    assert not np.array_equal(hier.phy2log, glob.phy2log)
