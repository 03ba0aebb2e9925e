"""Tiny builder of synthetic Kineto-style Chrome traces for the trace tests (GPU kernels with known overlap).

Times are microseconds, as in real traces. The test modules import this file by path. Run it as a script to
write the two expert-parallel example traces of docs/trace.md::

    python tests/trace_builder.py /tmp/ep    # -> /tmp/ep/ep_serial.json.gz, ep_overlapped.json.gz
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

COMPUTE_STREAM = 7
COMM_STREAM = 20


def kernel(name: str, ts: float, dur: float | None, stream: int = COMPUTE_STREAM, device: int = 0,
           correlation: int | None = None, cat: str = "kernel", **args: Any) -> dict[str, Any]:
    """One GPU kernel (or copy with ``cat="gpu_memcpy"``); ``dur=None`` leaves the key out."""
    event: dict[str, Any] = {"ph": "X", "cat": cat, "name": name, "pid": device, "tid": stream, "ts": ts,
                             "args": {"device": device, "stream": stream, **args}}
    if dur is not None:
        event["dur"] = dur
    if correlation is not None:
        event["args"]["correlation"] = correlation
    return event


def compute(ts: float, dur: float, stream: int = COMPUTE_STREAM, **kw: Any) -> dict[str, Any]:
    return kernel("sm90_xmma_gemm_bf16bf16_bf16f32", ts, dur, stream=stream, **kw)


def nccl(ts: float, dur: float, collective: str = "AllReduce", stream: int = COMM_STREAM, **kw: Any) -> dict[str, Any]:
    return kernel(f"ncclDevKernel_{collective}_Sum_bf16_RING_LL", ts, dur, stream=stream, **kw)


def launch(ts: float, correlation: int, dur: float = 2.0) -> dict[str, Any]:
    """The host-side cudaLaunchKernel that launched the kernel with the same correlation id."""
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100, "ts": ts,
            "dur": dur, "args": {"correlation": correlation}}


def step(number: int, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{number}", "pid": 100, "tid": 100,
            "ts": ts, "dur": dur, "args": {}}


def cpu_op(name: str, ts: float, dur: float, tid: int = 100, cat: str = "cpu_op") -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 100, "tid": tid, "ts": ts, "dur": dur, "args": {}}


def trace(events: list[dict[str, Any]], rank: int | None = None, world_size: int | None = None) -> dict[str, Any]:
    """A whole trace document, as ``export_chrome_trace`` writes it (plus a metadata event); ``world_size``
    None leaves it out of ``distributedInfo`` (then no rank is missing whatever the files)."""
    doc: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": [],
                           "traceEvents": [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "gpu"}},
                                           *events]}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank}
        if world_size is not None:
            doc["distributedInfo"]["world_size"] = world_size
    return doc


def encode(doc: Any, gz: bool = False) -> bytes:
    data = json.dumps(doc).encode()
    return gzip.compress(data, mtime=0) if gz else data


ATTN_US, MLP_US, A2A_US = 100.0, 120.0, 60.0
_DISPATCH = "deep_ep::intranode::dispatch<8, 768, 6144>"
_COMBINE = "deep_ep::intranode::combine<8, 768, 4096>"


def ep_step(overlapped: bool, num_pairs: int = 2, rank: int = 0) -> dict[str, Any]:
    """One rank's step of ``2 * num_pairs`` MoE micro-batches: attention, dispatch, MLP, combine each.

    Serial: every all-to-all waits for its compute and blocks the next (all 8 * 60 us exposed for 2 pairs).
    Overlapped (DualPipe-style pairs): the dispatch/combine of one micro-batch runs under the other's
    compute; only the last combine is exposed (60 us).
    """
    events: list[dict[str, Any]] = []
    t = 0.0
    if not overlapped:
        for _ in range(2 * num_pairs):
            events += [compute(t, ATTN_US), kernel(_DISPATCH, t + ATTN_US, A2A_US, stream=COMM_STREAM),
                       compute(t + ATTN_US + A2A_US, MLP_US),
                       kernel(_COMBINE, t + ATTN_US + A2A_US + MLP_US, A2A_US, stream=COMM_STREAM)]
            t += ATTN_US + MLP_US + 2 * A2A_US
        return trace(events, rank=rank, world_size=2)
    for _ in range(num_pairs):
        events += [
            compute(t, ATTN_US),                                                          # attention a
            compute(t + ATTN_US, ATTN_US),                                                # attention b
            kernel(_DISPATCH, t + ATTN_US, A2A_US, stream=COMM_STREAM),                   # under attention b
            compute(t + 2 * ATTN_US, MLP_US),                                             # MLP a
            kernel(_DISPATCH, t + 2 * ATTN_US, A2A_US, stream=COMM_STREAM),               # under MLP a
            compute(t + 2 * ATTN_US + MLP_US, MLP_US),                                    # MLP b
            kernel(_COMBINE, t + 2 * ATTN_US + MLP_US, A2A_US, stream=COMM_STREAM),       # under MLP b
            kernel(_COMBINE, t + 2 * ATTN_US + 2 * MLP_US, A2A_US, stream=COMM_STREAM),   # under next attention
        ]
        t += 2 * ATTN_US + 2 * MLP_US
    return trace(events, rank=rank, world_size=2)


def job(num_ranks: int, slow: dict[int, float], num_collectives: int = 30, seed: int = 5,
        max_clock_offset_us: float = 2000.0, seq: bool = False) -> list[dict[str, Any]]:
    """Traces of a synchronous data-parallel job: per collective, compute then an all-reduce on every rank.

    Rank r's compute before collective k lasts ``base_k * factor_r * noise`` (``slow`` maps rank -> factor); the
    all-reduce starts when the rank arrives and ends on every rank ``A2A_US`` after the last arrival. Each rank's
    clock is shifted by a random offset, as hosts' clocks are. ``seq`` adds PG name and Seq arguments.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    base = rng.uniform(200.0, 800.0, num_collectives)
    factor = np.array([slow.get(r, 1.0) for r in range(num_ranks)])
    noise = rng.uniform(0.98, 1.02, (num_collectives, num_ranks))
    offsets = rng.uniform(-max_clock_offset_us, max_clock_offset_us, num_ranks)
    events: list[list[dict[str, Any]]] = [[] for _ in range(num_ranks)]
    t_end = 1000.0
    for k in range(num_collectives):
        arrive = t_end + base[k] * factor * noise[k]
        done = float(arrive.max()) + A2A_US
        for r in range(num_ranks):
            t0 = float(offsets[r])
            args = {"Collective name": "allreduce", "Process Group Name": "0", "Seq": k} if seq else {}
            events[r] += [compute(round(t_end + t0, 3), round(float(arrive[r]) - t_end, 3)),
                          nccl(round(float(arrive[r]) + t0, 3), round(done - float(arrive[r]), 3), **args)]
        t_end = done
    return [trace(ev, rank=r, world_size=num_ranks) for r, ev in enumerate(events)]


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out.mkdir(parents=True, exist_ok=True)
    (out / "ep_serial.json.gz").write_bytes(encode(ep_step(False, rank=0), gz=True))
    (out / "ep_overlapped.json.gz").write_bytes(encode(ep_step(True, rank=1), gz=True))
    print(f"wrote {out / 'ep_serial.json.gz'} and {out / 'ep_overlapped.json.gz'}")
