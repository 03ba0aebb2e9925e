"""A Kineto trace of one DualPipe F&B pair made from the step-time model's own cells (kernel time per cell = the
model's seconds x a factor per rate), for the calibration tests and the narrow-table test."""

from __future__ import annotations

import json
from typing import Any

from dsctl.profiles.loader import ProfileStore
from dsctl.steptime import fabric_ep
from dsctl.steptime.calibrate import model_cells
from dsctl.steptime.hardware import gpu_rates

STORE = ProfileStore()
V3 = STORE.model("deepseek-v3")
H800 = STORE.node("h800-hgx")

_NAMES = {
    "attention": "void cutlass::device_kernel<flash::FlashAttnBwd<flash::CollectiveMainloopBwd<2> > >(Params)",
    "gemm": "void cutlass::device_kernel<dpsk::grouped_gemm::cuda::fp8_ptp128c::GemmKernel>(Params)",
    "elementwise": "void cuda::per_token_cast_to_fp8_with_channels<__nv_bfloat16, 128, false, 128, false>(int)",
    "communication": "void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*)",
}
#: an elementwise cell (per direction) is launched inside one phase of that direction
_DIRECTION_PHASE = {"forward": "attn(F)", "input-gradient": "attn(B)", "weight-gradient": "mlp(W)", "all": "all"}


def pair_trace(factors: dict[str, float], annotated: bool = True, comm_overlapped: bool = True) -> bytes:
    """A Kineto trace of one F&B pair whose kernel per cell lasts the model's cell seconds x ``factors``."""
    ep_cost = fabric_ep(V3, H800, 64)
    cells = model_cells(V3, gpu_rates(H800, "fp8"), 64, 4, 4096, 4096, ep_cost, annotated)
    by_phase: dict[str, list[tuple[str, float]]] = {}
    for (phase, cls), row in sorted(cells.items()):
        seconds = sum(v * factors.get(p, 1.0) for p, v in row.items())
        by_phase.setdefault(_DIRECTION_PHASE.get(phase, phase), []).append((cls, seconds))
    events: list[dict[str, Any]] = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1,
                                     "tid": 1, "ts": 0.0, "dur": 1e7}]
    host, device, corr = 10.0, 100.0, 0
    for phase, kernels in by_phase.items():
        if annotated:
            events.append({"ph": "X", "cat": "user_annotation", "name": phase, "pid": 1, "tid": 1, "ts": host,
                           "dur": 5.0 * len(kernels)})
        comm_at = device
        for cls, seconds in kernels:
            corr += 1
            dur = seconds * 1e6
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                           "ts": host + 1.0, "dur": 2.0, "args": {"correlation": corr}})
            host += 5.0
            comm = cls == "communication"
            start = comm_at if comm and comm_overlapped else device
            events.append({"ph": "X", "cat": "kernel", "name": _NAMES[cls], "pid": 0, "tid": 27 if comm else 7,
                           "ts": start, "dur": dur,
                           "args": {"device": 0, "stream": 27 if comm else 7, "correlation": corr}})
            if not (comm and comm_overlapped):
                device += dur
        host += 10.0
    return json.dumps({"traceEvents": events}).encode()
