"""EP dispatch/combine seconds (dsctl.topology.sim.ep_time) against the paper's Fig. 7, from profile defaults only.

Fig. 7 (ISCA '25, DeepEP normal kernels on MPFT, 4,096 tokens per GPU, hidden 7,168, top-8 on at most 4 nodes,
FP8 dispatch, BF16 combine) plots DeepEP's logical bandwidth: every (token, node) pair, the sender's own node
included. Nothing below is fitted to it: the NIC efficiency comes from DeepEP's README (the same measurement
series, so EP32/EP64 are consistency checks; EP16, EP128 and the order are predictions), NVLink from the paper's
~160 GB/s and DeepEP's intranode table.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

from dsctl.errors import InputError
from dsctl.profiles.loader import ProfileStore
from dsctl.profiles.schema import NodeProfile
from dsctl.topology.api import plan_files
from dsctl.topology.plan import PlanSpec, build_plan, default_planes, default_templates
from dsctl.topology.sim.ep_time import EpExchange, ep_exchange_seconds
from dsctl.topology.summary import summarize

#: EP size: (dispatch, combine) GB/s, the paper's Fig. 7
FIG7 = {16: (43.05, 42.47), 32: (58.02, 56.96), 64: (50.58, 48.54), 128: (45.34, 41.6)}
#: this model's prediction (GB/s) and its error against FIG7, as docs/topology.md tabulates them
PREDICTED = {16: (45.59, 47.43), 32: (58.04, 58.47), 64: (49.75, 50.12), 128: (46.43, 46.78)}


@functools.cache
def h800() -> NodeProfile:
    return ProfileStore().node("h800-hgx")


def v3(ep: int, node: NodeProfile | None = None, **kw: object) -> EpExchange:
    return ep_exchange_seconds(node or h800(), ep, 4096, 7168, 8, 4, **kw)  # type: ignore[arg-type]


def test_fig7_dispatch_within_10_percent_in_the_measured_order() -> None:
    rows = []
    for ep, (paper, _) in FIG7.items():
        got = v3(ep).dispatch_logical_bytes_per_s / 1e9
        rows.append((ep, paper, got, got / paper - 1))
        assert got == pytest.approx(PREDICTED[ep][0], abs=0.01)
        assert abs(got / paper - 1) <= 0.10, rows
    by_ep = {ep: got for ep, _, got, _ in rows}
    assert by_ep[32] > by_ep[64] > by_ep[128] > by_ep[16]  # the measured order


def test_fig7_combine_at_4_and_8_nodes_within_10_percent_all_in_the_measured_order() -> None:
    for ep in (32, 64):
        got = v3(ep).combine_logical_bytes_per_s / 1e9
        assert got == pytest.approx(PREDICTED[ep][1], abs=0.01)
        assert abs(got / FIG7[ep][1] - 1) <= 0.10
    by_ep = {ep: v3(ep).combine_logical_bytes_per_s for ep in FIG7}
    measured = sorted(FIG7, key=lambda ep: -FIG7[ep][1])
    assert measured == [32, 64, 16, 128]  # combine: EP16 (42.47) above EP128 (41.6), unlike dispatch
    assert sorted(by_ep, key=lambda ep: -by_ep[ep]) == measured


def test_fig7_combine_misses_at_2_and_16_nodes_by_what_the_docs_state() -> None:
    """The model gives combine about dispatch's logical rate (as DeepEP's intranode table does: 158 vs 153 GB/s);
    the measurement drops combine below dispatch by 1% at EP16 and 8% at EP128 (a per-peer cost of the combine
    kernel the fluid model has no term for). +11.7% and +12.4%: reported, not tuned away."""
    for ep, error in ((16, 0.117), (128, 0.124)):
        got = v3(ep).combine_logical_bytes_per_s / 1e9
        assert got == pytest.approx(PREDICTED[ep][1], abs=0.01)
        assert got / FIG7[ep][1] - 1 == pytest.approx(error, abs=0.002)


@pytest.mark.xfail(strict=True, reason="combine at EP16/EP128 is 12% above Fig. 7 (docs/topology.md)")
def test_fig7_combine_at_2_and_16_nodes_within_10_percent() -> None:
    for ep in (16, 128):
        assert abs(v3(ep).combine_logical_bytes_per_s / 1e9 / FIG7[ep][1] - 1) <= 0.10


def test_two_nodes_are_nvlink_bound_more_are_rdma_bound() -> None:
    """EP16: every token reaches ~both nodes, and the forwarder pushes each to ~2.9 other GPUs of its node, 5.8
    NVLink bytes per RDMA byte: NVLink at DeepEP's 134 GB/s binds. From 4 nodes the NIC at 88% binds."""
    two = v3(16)
    assert (two.dispatch_bound, two.combine_bound) == ("nvlink", "nvlink")
    assert two.nodes_per_token == pytest.approx(2 * (1 - 0.5 ** 8))
    assert two.dispatch_physical_bytes_per_s / 1e9 == pytest.approx(23.0, abs=0.1)
    for ep in (32, 64, 128):
        r = v3(ep)
        assert (r.dispatch_bound, r.combine_bound) == ("rdma", "rdma")
        assert r.dispatch_physical_bytes_per_s == pytest.approx(0.88 * 50e9)
        nodes = ep // 8
        # logical = physical x n/(n-1) x logical bytes / wire bytes (7,392 / 7,472 dispatch, 14,336 / 14,384)
        assert r.dispatch_logical_bytes_per_s == pytest.approx(
            r.dispatch_physical_bytes_per_s * nodes / (nodes - 1) * 7392 / 7472)
        assert r.combine_logical_bytes_per_s == pytest.approx(
            r.combine_physical_bytes_per_s * nodes / (nodes - 1) * 14336 / 14384)
        assert r.dispatch_s == pytest.approx(4096 * r.nodes_per_token * (1 - 1 / nodes) * 7472 / (0.88 * 50e9))


def test_efficiencies_come_from_the_profile() -> None:
    half = dataclasses.replace(h800(), nic_efficiency=0.44)
    assert v3(64, half).dispatch_s == pytest.approx(2 * v3(64).dispatch_s)
    fast_nvlink = dataclasses.replace(h800(), nvlink_achievable_bytes_per_s=320e9)
    assert v3(16, fast_nvlink).dispatch_bound == "rdma"


def test_results_are_cached_per_shape() -> None:
    first = v3(64)
    assert v3(64) is first
    assert ep_exchange_seconds(h800(), np.int64(64), 4096, 7168, 8, 4) is first  # type: ignore[arg-type]
    assert v3(128) is not first
    assert ep_exchange_seconds(h800(), 64, 2048, 7168, 8, 4).dispatch_s == pytest.approx(first.dispatch_s / 2)


@functools.cache
def plan_text(nodes: int) -> str:
    spec = PlanSpec("mpft", nodes, 8, 8, default_planes("mpft", 8), 64, 400.0, 82045.0, 544.0, 544.0, 1.0,
                    default_templates("mpft"), "h800-hgx", "ib-ndr-64")
    plan = build_plan(spec)
    return plan_files(plan, summarize(plan))["plan.json"]


@pytest.mark.parametrize("ep", [16, 64])
def test_the_fabric_simulator_agrees_with_the_closed_form(ep: int) -> None:
    """On a non-blocking MPFT under adaptive routing the simulated EP groups (two groups at once) take as long as
    the closed form says; under ECMP the NIC still binds (many small flows per NIC)."""
    closed = v3(ep)
    for routing in ("adaptive", "ecmp"):
        fabric = v3(ep, plan=plan_text(2 * ep // 8), routing=routing)
        assert fabric.dispatch_bound == "fabric"
        assert fabric.dispatch_s == pytest.approx(closed.dispatch_s, rel=1e-6)
        assert fabric.combine_s == pytest.approx(closed.combine_s, rel=1e-6)
        assert fabric.dispatch_logical_bytes_per_s == pytest.approx(closed.dispatch_logical_bytes_per_s, rel=1e-6)


@pytest.mark.parametrize(("kw", "needle"), [
    ({"ep_size": 12}, "multiple of the 8 GPUs"),
    ({"ep_size": 20}, "or fewer than 8"),
    ({"ep_size": 0}, "EP size must be a whole number"),
    ({"tokens_per_gpu": 0}, "tokens per GPU"),
    ({"topk": True}, "top-k"),
    ({"hidden": 7168.0}, "hidden size"),
    ({"routing": "bogus"}, "routing 'bogus' is not valid"),
])
def test_bad_shapes_are_input_errors(kw: dict[str, object], needle: str) -> None:
    args: dict[str, object] = {"node": h800(), "ep_size": 64, "tokens_per_gpu": 4096, "hidden": 7168, "topk": 8,
                               "max_nodes_per_token": 4, **kw}
    with pytest.raises(InputError, match=needle):
        ep_exchange_seconds(**args)  # type: ignore[arg-type]


def test_one_node_is_nvlink_only_and_a_nicless_node_cannot_span_nodes() -> None:
    one = v3(8)
    assert (one.num_nodes, one.dispatch_bound, one.dispatch_physical_bytes_per_s) == (1, "nvlink", 0.0)
    assert one.dispatch_s == pytest.approx(4096 * 7 * (1 - (7 / 8) ** 8) * 7472 / (160e9 * 153 * 7 / 8 / 160))
    nicless = dataclasses.replace(h800(), num_compute_nics=0)
    assert v3(8, nicless).dispatch_s == one.dispatch_s
    with pytest.raises(InputError, match="no compute NICs"):
        v3(16, nicless)


def test_bytes_per_token_scale_the_seconds_not_the_bandwidth() -> None:
    """The step-time model's backward sends BF16 gradients both ways (14,384 B a token): every flow grows by the
    same factor, so seconds scale linearly, on the closed form and on a plan alike."""
    forward = v3(64)
    backward = v3(64, bytes_per_token=(14384, 14384))
    assert backward.dispatch_s == pytest.approx(forward.dispatch_s * 14384 / 7472)
    assert backward.combine_s == pytest.approx(forward.combine_s)
    assert backward.dispatch_logical_bytes_per_s == forward.dispatch_logical_bytes_per_s
    planned = v3(16, plan=plan_text(4), bytes_per_token=(7472 * 2, 14384 / 2))
    assert planned.dispatch_s == pytest.approx(2 * v3(16, plan=plan_text(4)).dispatch_s)
    assert planned.combine_s == pytest.approx(v3(16, plan=plan_text(4)).combine_s / 2)
    for bad in (0, -1.0, float("nan"), float("inf"), True):
        with pytest.raises(InputError, match="bytes per token"):
            v3(64, bytes_per_token=(bad, 14384))


def test_a_group_inside_one_node_is_nvlink_only() -> None:
    """EP4 on an 8-GPU node: 4 GPUs, no RDMA, plan or not (the fabric simulator plays no part); DeepEP takes any
    group below 8 ranks (EP6 too)."""
    four = v3(4)
    assert (four.num_nodes, four.dispatch_bound, four.dispatch_physical_bytes_per_s) == (1, "nvlink", 0.0)
    assert four.dispatch_s == pytest.approx(4096 * 3 * (1 - (3 / 4) ** 8) * 7472 / (160e9 * 153 * 7 / 8 / 160))
    assert v3(4, plan=plan_text(2)) is four
    assert v3(4).dispatch_s < v3(6).dispatch_s < v3(8).dispatch_s


def test_a_plan_too_small_for_the_group_is_an_input_error() -> None:
    with pytest.raises(InputError, match=r"^ep 64 must be a multiple of the 8 GPUs per node") as caught:
        v3(64, plan=plan_text(2))
    assert caught.value.field == "ep"  # spelled --ep by the command that ran (topology's and launch's tables)
