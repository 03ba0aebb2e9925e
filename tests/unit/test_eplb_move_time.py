"""Migration moves timed on a planned fabric (dsctl.eplb.move_time, sim.transfer_time) and set against the gain."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from dsctl.eplb.move_cost import MoveFabric, break_even_steps, payback_s
from dsctl.eplb.move_time import move_transfers, time_moves
from dsctl.eplb.placement import placement_from_phy2log
from dsctl.eplb.rebalance import rebalance
from dsctl.eplb.request import RebalanceRequest
from dsctl.errors import InputError
from dsctl.profiles.loader import ProfileStore
from dsctl.topology import sim
from dsctl.topology.api import make_spec, plan_files
from dsctl.topology.plan import build_plan
from dsctl.topology.summary import summarize

NVLINK = 200e9  # bytes/s; H800: 400 GB/s both directions -> 200 GB/s per direction
NIC = 50.0  # 400 Gb/s


@functools.cache
def plan_text(num_nodes: int) -> str:
    """A real plan written by ``dsctl topology plan -N num_nodes`` (MPFT, h800-hgx, 8 planes)."""
    store = ProfileStore()
    spec = make_spec("mpft", num_nodes, store.node("h800-hgx"), store.switch("ib-ndr-64"))
    plan = build_plan(spec)
    return plan_files(plan, summarize(plan))["plan.json"]


def _time(src: list[int], dst: list[int], gb: list[float]) -> float:
    result = sim.transfer_time(plan_text(4), "plan.json", NVLINK, np.array(src), np.array(dst), np.array(gb) * 1e9,
                               reflow=True)
    return result.completion_s


def test_transfer_time_uses_nvlink_nics_and_shares_links() -> None:
    assert _time([0], [1], [1.0]) == pytest.approx(1e9 / NVLINK)  # same node: NVLink
    assert _time([0], [8], [1.0]) == pytest.approx(1 / NIC)  # GPU 0 of node 1, same plane: its NIC
    assert _time([0], [9], [1.0]) == pytest.approx(1 / NIC)  # other plane: relayed over NVLink, then the NIC
    assert _time([0, 0], [8, 16], [1.0, 1.0]) == pytest.approx(2 / NIC)  # one NIC carries both
    assert _time([0, 1], [8, 17], [1.0, 1.0]) == pytest.approx(1 / NIC)  # two planes in parallel
    assert _time([0, 3], [8, 3], [1.0, 5.0]) == pytest.approx(1 / NIC)  # a GPU to itself costs nothing
    with pytest.raises(InputError, match=r"outside plan\.json, which has 32 GPUs"):
        _time([0], [32], [1.0])
    with pytest.raises(InputError, match="finite bytes"):
        _time([0], [1], [-1.0])


def test_move_sources_nearest_first() -> None:
    # 6 experts, 4 GPUs x 2 slots on 2 nodes of 2 GPUs: GPU = slot // 2, node = GPU // 2
    prev = placement_from_phy2log(np.array([[0, 1, 2, 3, 4, 5, 0, 1]]), 6)
    new = placement_from_phy2log(np.array([[1, 0, 0, 5, 4, 2, 3, 1]]), 6)
    src, dst, count = move_transfers(prev, new, 4, 2)
    got = {(int(s), int(d)): int(c) for s, d, c in zip(src, dst, count, strict=True)}
    assert got == {
        (0, 0): 2,  # slots 0 and 1 swap experts already on GPU 0: local copies
        (0, 1): 1,  # expert 0 to GPU 1: from GPU 0 (same node), not GPU 3 (same plane)
        (2, 1): 1,  # expert 5 lives on GPU 2 only
        (1, 2): 1,  # expert 2 lives on GPU 1 only
        (1, 3): 1,  # expert 3 from GPU 1
    }
    none = move_transfers(prev, prev, 4, 2)
    assert all(len(a) == 0 for a in none)


def test_payback_formulas() -> None:
    assert payback_s(0.5, 0.05) == pytest.approx(10.0)
    assert break_even_steps(0.5, 0.05, 0.02) == pytest.approx(500.0)
    assert break_even_steps(0.5, 0.05, None) is None
    assert payback_s(0.0, 0.0) == 0.0 and payback_s(0.1, 0.0) == float("inf")


LAYOUT = {"replicas": 80, "gpus": 16, "nodes": 2, "groups": 2}
EXPERT_BYTES = 44_040_192  # one DeepSeek-V3 routed expert in FP8 (3 x 7168 x 2048)


def _windows() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    w0 = np.round(rng.lognormal(0, 1.0, (4, 64)) * 1000)
    w1 = np.round(w0 * np.exp(0.3 * rng.standard_normal(w0.shape)))
    return w0, w1


def test_pareto_table_times_every_candidate_on_the_fabric() -> None:
    w0, w1 = _windows()
    prev = rebalance(w0, RebalanceRequest(**LAYOUT)).placement
    fabric = MoveFabric(plan_text(2), "plan.json", NVLINK)
    res = rebalance(w1, RebalanceRequest(**LAYOUT, previous=prev, expert_bytes=EXPERT_BYTES, fabric=fabric,
                                         step_time_s=0.01))
    trade = res.trade_off
    assert trade is not None and trade.plan == "plan.json" and trade.step_time_s == 0.01
    keep = trade.points[0]
    assert keep.moves is not None and keep.moves.move_s == 0.0 and keep.payback_s == 0.0
    for p in trade.points[1:]:
        m = p.moves
        assert m is not None
        assert m.local_copies + m.nvlink_copies + m.network_copies == p.replicas_moved
        assert m.network_bytes == m.network_copies * EXPERT_BYTES
        if p.replicas_moved:
            # no faster than the busiest link, and no faster than the network bytes over all 16 NICs at once
            assert m.move_s >= m.lower_bound_s * (1 - 1e-9) > 0
            assert m.move_s >= m.network_bytes / (16 * NIC * 1e9) * (1 - 1e-9)
            assert p.payback_s == pytest.approx(m.move_s / p.gain)
            assert p.break_even_steps == pytest.approx(m.move_s / (p.gain * 0.01))
    most = max(trade.points, key=lambda p: p.replicas_moved)
    fewest = min((p for p in trade.points if p.replicas_moved), key=lambda p: p.replicas_moved)
    assert most.moves is not None and fewest.moves is not None and most.moves.move_s > fewest.moves.move_s
    if trade.worth_it:
        assert "s of moves on the fabric, paid back after" in trade.reason


def test_fabric_errors() -> None:
    w0, w1 = _windows()
    prev = rebalance(w0, RebalanceRequest(**LAYOUT)).placement
    small = MoveFabric(plan_text(1), "one.json", NVLINK)
    with pytest.raises(InputError, match=r"has 8 GPUs .* the placement spans 16"):
        rebalance(w1, RebalanceRequest(**LAYOUT, previous=prev, expert_bytes=EXPERT_BYTES, fabric=small))
    fabric = MoveFabric(plan_text(2), "plan.json", NVLINK)
    with pytest.raises(InputError, match="8 GPUs per node; the layout puts 16 GPUs on 4 nodes"):
        time_moves(prev, prev, 16, 4, EXPERT_BYTES, fabric)
    with pytest.raises(InputError, match=r"^fabric needs the expert size"):
        rebalance(w1, RebalanceRequest(**LAYOUT, previous=prev, fabric=fabric))
    with pytest.raises(InputError, match=r"^step_time_s only applies with a planned fabric"):
        rebalance(w1, RebalanceRequest(**LAYOUT, previous=prev, expert_bytes=EXPERT_BYTES, step_time_s=0.1))
    with pytest.raises(InputError, match=r"^step_time_s -1\.0 must be a positive"):
        rebalance(w1, RebalanceRequest(**LAYOUT, previous=prev, expert_bytes=EXPERT_BYTES, fabric=fabric,
                                       step_time_s=-1.0))
    with pytest.raises(InputError, match=r"^fabric only applies with a previous placement") as err:
        rebalance(w1, RebalanceRequest(**LAYOUT, fabric=fabric))
    assert err.value.field == "fabric" and err.value.hint == "give the current placement with --previous FILE"
