"""dsctl trace overlap on a large synthetic GPU trace: ~1M kernel events (plus launches and steps), as bytes.

The trace mimics one rank of a DualPipe-style step: compute kernels on two streams, NCCL and DeepEP-style
dispatch/combine kernels on a third, each kernel with its host launch (cudaLaunchKernel, correlation id) and ten
ProfilerStep#N windows (165 MB of JSON). The first case times the whole domain call from bytes (streamed in 1 MiB
chunks): scanning, per-event decoding, column extraction, classification, step assignment and the interval
sweeps; the second the analysis from the parsed columns; the third the interval algebra alone. Scale targets
(1 GB RSS, 100 MB time, 512 rank files) are in ``benchmarks/trace_scale.py``, run as its own script.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from benchmarks.case import Case
from dsctl.trace import overlap_from_bytes, read_trace
from dsctl.trace.classify import Classifier
from dsctl.trace.intervals import coverage, union
from dsctl.trace.overlap import analyse
from dsctl.trace.parse import TraceData

NUM_KERNELS = 500_000  # each has a launch event: ~1M complete events in all
NUM_STEPS = 10
_NAMES = ["sm90_xmma_gemm_bf16bf16_bf16f32", "flash_fwd_kernel", "vectorized_elementwise_kernel",
          "ncclDevKernel_AllGather_RING_LL", "deep_ep::internode::dispatch<8>", "deep_ep::internode::combine<8>"]


def _events(seed: int = 7) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    dur = rng.uniform(2.0, 40.0, NUM_KERNELS).round(3)
    kind = rng.integers(0, len(_NAMES), NUM_KERNELS)
    stream = np.where(kind >= 3, 20, 7 + (np.arange(NUM_KERNELS) % 2))
    start = (np.arange(NUM_KERNELS) * 12.0 + rng.uniform(0, 5, NUM_KERNELS)).round(3)
    return start, dur, kind, stream


def _trace_bytes() -> bytes:
    start, dur, kind, stream = _events()
    events: list[dict[str, Any]] = []
    for i, (t, d, k, s) in enumerate(zip(start.tolist(), dur.tolist(), kind.tolist(), stream.tolist(), strict=True)):
        events.append({"ph": "X", "cat": "kernel", "name": _NAMES[k], "pid": 0, "tid": s, "ts": t, "dur": d,
                       "args": {"device": 0, "stream": s, "correlation": i}})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": t - 3.0, "dur": 2.0, "args": {"correlation": i}})
    span = float(start[-1]) + 100.0
    for n in range(NUM_STEPS):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1,
                       "ts": -10.0 + n * span / NUM_STEPS, "dur": span / NUM_STEPS, "args": {}})
    doc = {"traceEvents": events, "distributedInfo": {"rank": 0, "world_size": 8, "backend": "nccl"}}
    return json.dumps(doc).encode()


def _full(data: bytes) -> Any:
    return overlap_from_bytes([("bench.json", data)], keep_lanes=False)


def _parsed() -> TraceData:
    data = _trace_bytes()
    return read_trace((data[i:i + (1 << 20)] for i in range(0, len(data), 1 << 20)), "bench.json")


def _from_parsed(trace: TraceData) -> Any:
    return analyse([trace], Classifier())


def _sweep(inputs: tuple[np.ndarray, ...]) -> Any:
    start, dur, kind, _ = inputs
    end = start + dur
    comm = kind >= 3
    cov = coverage((start[~comm], end[~comm]), (start[comm], end[comm]), float(start.min()), float(end.max()))
    return cov, union(start, end)


CASES = [
    Case("trace: ~1M-event trace from bytes (json + parse + analyse)", _trace_bytes, _full, target_s=15.0),
    Case("trace: ~1M-event trace from parsed columns (analyse)", _parsed, _from_parsed, target_s=2.0),
    Case("trace: interval sweep only, 500k kernels", _events, _sweep, target_s=0.2),
]
