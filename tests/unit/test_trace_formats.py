"""Trace formats beyond today's Kineto (issue 29): the 2021 format (``cat`` ``Operator``/``Kernel``/``Runtime``,
ProfilerStep#N as an ``Operator``) is read with its steps; a CUPTI range-profiler trace is refused naming it."""

from __future__ import annotations

import json

import pytest

from dsctl.errors import InputError
from dsctl.trace import overlap_from_bytes, read_trace


def _old(cat: str, name: str, ts: float, dur: float, **args: object) -> dict[str, object]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 31383, "tid": "31383", "ts": ts, "dur": dur, "args": args}


# shaped as PyTorch 1.8/1.9 wrote it (Kineto's ChromeTraceLogger then): epoch-µs ts, string tids
OLD = [
    _old("Operator", "ProfilerStep#10", 1000, 100, **{"Device": 31383, "External id": 1}),
    _old("Operator", "ProfilerStep#11", 1100, 100, **{"Device": 31383, "External id": 2}),
    _old("Operator", "aten::mm", 1005, 20),
    _old("Runtime", "cudaLaunchKernel", 1010, 5, correlation=34),
    _old("Kernel", "volta_sgemm_128x64_nn", 1020, 60, device=0, stream=7, correlation=34),
    _old("Runtime", "cudaLaunchKernel", 1110, 5, correlation=35),
    _old("Kernel", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 1120, 30, device=0, stream=20,
         correlation=35),
]


def test_2021_kineto_format_reads_steps_from_operator_events() -> None:
    data = json.dumps({"schemaVersion": 1, "traceEvents": OLD}).encode()
    trace = read_trace([data], "old.json")
    assert [s.number for s in trace.steps] == [10, 11]  # before: "no ProfilerStep#N annotations"
    row = overlap_from_bytes([("old.json", data)], all_steps=True).ranks[0]
    assert row.steps == [10, 11]
    assert [(s.step, s.metrics.wall_us) for s in row.per_step] == [(10, 100.0), (11, 30.0)]
    assert (row.metrics.compute_busy_us, row.metrics.comm_busy_us) == (60.0, 30.0)
    assert not any("ProfilerStep" in n for n in row.notes)


def test_cupti_range_profiler_trace_is_refused_naming_the_format() -> None:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "args": {}},
        {"ph": "X", "cat": "cuda_profiler_range", "name": "__profile_kernel_volta_sgemm", "pid": 0, "tid": 0,
         "ts": 2, "dur": 5, "args": {"smsp__warps_launched.sum": 4096}},
    ]
    with pytest.raises(InputError, match=r"r\.json: a CUPTI range-profiler trace \(1 cuda_profiler_range events"):
        read_trace([json.dumps({"traceEvents": events}).encode()], "r.json")
