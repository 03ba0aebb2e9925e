"""dsctl topology simulate: all-to-all on full MPFT planes under ECMP (the most progressive-filling rounds).

Cost grows with the network flows: an all-to-all over N nodes has N(N-1) connections per plane (one per NIC
pair; the GPUs of a node share it through the PXN relay), each with 4 links, and the solver takes one round
per distinct bottleneck level (about 440 per plane at 2,048 GPUs, 5,200 at 16,384). Work is
O(planes x N^2 x hops + rounds x links of a plane), i.e. about 4x per doubling of the GPUs; memory is bounded
by one plane's flows (1.38 GB peak RSS at 16,384 GPUs), because planes are solved one after the other.
Run the large case alone: ``python -m benchmarks --filter 16,384 --repeat 1``.

EP time (``ep_time.ep_exchange_seconds``, what the step-time model calls once per EP group shape and fabric): the
closed form is a few numpy operations on [nodes, GPUs] arrays; the plan form simulates every EP group of the plan;
both are cached per arguments, so a layout search pays them once (the warm case is a dictionary look-up).
"""

from __future__ import annotations

from typing import Any

from benchmarks.case import Case
from dsctl.profiles.loader import ProfileStore
from dsctl.topology.api import make_spec, plan_files
from dsctl.topology.plan import build_plan
from dsctl.topology.sim import SimRequest, Workload, run
from dsctl.topology.sim.ep_time import clear_cache, ep_exchange_seconds
from dsctl.topology.summary import summarize


def _plan_json(nodes: int) -> str:
    store = ProfileStore()
    plan = build_plan(make_spec("mpft", nodes, store.node("h800-hgx"), store.switch("ib-ndr-64")))
    return plan_files(plan, summarize(plan))["plan.json"]


def _alltoall(routing: str) -> Any:
    def go(text: str) -> float:
        result = run(text, "plan.json", 200e9, SimRequest(Workload("a2a", "alltoall"), routing, 0))
        return result.gpu_bytes_per_s.median / 1e9  # GB/s

    return go


CASES = [
    Case("topology simulate: mpft 2,048 GPUs all-to-all, ecmp", lambda: _plan_json(256), _alltoall("ecmp"),
         target_s=10.0),
    Case("topology simulate: mpft 2,048 GPUs all-to-all, adaptive", lambda: _plan_json(256), _alltoall("adaptive"),
         target_s=10.0),
    Case("topology simulate: mpft 16,384 GPUs all-to-all, ecmp", lambda: _plan_json(2048), _alltoall("ecmp"),
         target_s=60.0),
]


def _ep_time(cold: bool, ep: int = 64) -> Any:
    def go(inputs: tuple[Any, str | None]) -> float:
        node, plan = inputs
        if cold:
            clear_cache()
        return ep_exchange_seconds(node, ep, 4096, 7168, 8, 4, plan=plan).dispatch_s

    return go


def _h800(plan_nodes: int = 0) -> Any:
    return lambda: (ProfileStore().node("h800-hgx"), _plan_json(plan_nodes) if plan_nodes else None)


CASES += [
    Case("topology simulate: EP time of one MoE layer, EP64, closed form (cold)", _h800(), _ep_time(True),
         target_s=0.05),
    Case("topology simulate: EP time of one MoE layer, EP64 (warm: cached)", _h800(), _ep_time(False),
         target_s=0.05),
    Case("topology simulate: EP time, 32 EP64 groups on a 2,048-GPU plan (cold)", _h800(256), _ep_time(True),
         target_s=10.0),
]
