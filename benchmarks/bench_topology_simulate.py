"""dsctl topology simulate at 2,048 and 16,384 GPUs (MPFT, 8 planes): all-to-all and EP dispatch.

Cost grows with the network flows: an all-to-all over N nodes has N(N-1) connections per plane (one per NIC
pair; the GPUs of a node share it through the PXN relay), 4.2M per plane at 16,384 GPUs. Planes are generated
and solved one after the other (memory of one plane). Under adaptive routing the 8 planes are identical: one is
solved (a single progressive-filling round: every flow is frozen by one scan of the routes, no route -> flow
index) and the others mapped. ECMP solves every plane: about 5,300 rounds per plane at 16,384 GPUs, each over
the flows it freezes through a route -> flows index (a counting sort of the 16.8M route entries per plane, one
route column at a time). With the dsctl[fast] extra (numba) installed, ECMP planes of 262,144 flows or more are
routed and solved by compiled kernels instead (``dsctl/topology/sim/compiled.py``; same routes, rates within
1e-9): the 16,384-GPU ECMP row goes from about 30 s to about 7.6 s CPU (5.9-10.7 s with the machine's load,
514 MB peak).
Issue 32's targets (CPU seconds): adaptive < 3 s, EP dispatch < 5 s, ECMP < 8 s, each < 600 MB peak RSS;
``python -m benchmarks.sim_peaks`` measures CPU seconds and peak RSS of each in a fresh process.
Run the large cases alone: ``python -m benchmarks --filter 16,384 --repeat 1``.

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
from dsctl.topology.sim.api import EpModel
from dsctl.topology.sim.ep_time import clear_cache, ep_exchange_seconds
from dsctl.topology.summary import summarize


def _plan_json(nodes: int) -> str:
    store = ProfileStore()
    plan = build_plan(make_spec("mpft", nodes, store.node("h800-hgx"), store.switch("ib-ndr-64")))
    return plan_files(plan, summarize(plan))["plan.json"]


def _alltoall(routing: str, workload: str = "alltoall") -> Any:
    def go(text: str) -> float:
        request = SimRequest(Workload("a2a", workload), routing, 0, model=EpModel(7168, 8, 4))
        result = run(text, "plan.json", 200e9, request)
        return result.gpu_bytes_per_s.median / 1e9  # GB/s

    return go


CASES = [
    Case("topology simulate: mpft 2,048 GPUs all-to-all, ecmp", lambda: _plan_json(256), _alltoall("ecmp"),
         target_s=10.0),
    Case("topology simulate: mpft 2,048 GPUs all-to-all, adaptive", lambda: _plan_json(256), _alltoall("adaptive"),
         target_s=10.0),
    Case("topology simulate: mpft 16,384 GPUs all-to-all, adaptive", lambda: _plan_json(2048),
         _alltoall("adaptive"), target_s=3.0),
    Case("topology simulate: mpft 16,384 GPUs ep-dispatch, adaptive", lambda: _plan_json(2048),
         _alltoall("adaptive", "ep-dispatch"), target_s=5.0),
    Case("topology simulate: mpft 16,384 GPUs all-to-all, ecmp", lambda: _plan_json(2048), _alltoall("ecmp"),
         target_s=8.0),
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
