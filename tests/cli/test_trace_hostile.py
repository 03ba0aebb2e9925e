"""Hostile trace inputs (issue 15's trace part): gzip bombs, FIFOs, devices, huge integers, unsafe regexes and
generated garbage all end in exit 2 with one error line, never exit 4 or a hang."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import zlib
from pathlib import Path
from typing import Any

import pytest
import trace_builder as tb  # tests/trace_builder.py (tests/ is on sys.path via its conftest)
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.trace import read_trace
from dsctl.trace.scan import iter_events
from tests.cli.refused import assert_refused


def _bad(result: Any, *needles: str) -> None:
    assert_refused(result, *needles, first_line=True)


def _bomb(size: int) -> bytes:
    """A gzip member that inflates to ``size`` bytes of spaces (valid JSON whitespace), made in streaming form."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b" " * (1 << 20)
    parts = [comp.compress(b'{"traceEvents": [')]
    for _ in range(size // len(block)):
        parts.append(comp.compress(block))
    parts.append(comp.compress(b"]}"))
    parts.append(comp.flush())
    return b"".join(parts)


def test_gzip_bomb_stops_at_the_decompressed_limit(cli, tmp_path: Path) -> None:
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(_bomb(64 << 20))  # 64 MiB of spaces in about 64 kB
    assert path.stat().st_size < 200_000
    _bad(cli("trace", "overlap", path, "--max-bytes", str(8 << 20)), "decompresses to more than 8,388,608 bytes",
         "--max-bytes")


def test_plain_file_over_the_limit_is_refused_before_reading(cli, tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(tb.encode(tb.trace([tb.compute(0, 1)] * 200)))
    _bad(cli("trace", "overlap", path, "--max-bytes", "1000"), "over the --max-bytes limit of 1,000")


def test_fifo_and_device_are_refused(cli, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    _bad(cli("trace", "overlap", fifo), "not a regular file")
    _bad(cli("trace", "overlap", "/dev/zero"), "not a regular file")
    _bad(cli("trace", "overlap", tmp_path), "is a folder")
    _bad(cli("trace", "overlap", str(tmp_path / "nothing*.json")), "no file matches")


@pytest.mark.parametrize("field", ["ts", "dur", "device", "stream", "correlation"])
def test_integers_above_int64_are_bad_input(cli, tmp_path: Path, field: str) -> None:
    event = tb.kernel("gemm", 0, 10, correlation=1)
    if field in ("ts", "dur"):
        event[field] = 2**64 if field == "ts" else 10**400
    else:
        event["args"][field] = 2**70
    path = tmp_path / "t.json"
    path.write_text(json.dumps(tb.trace([event, tb.compute(0, 5)])))
    _bad(cli("trace", "overlap", path), "t.json", "int64" if field != "dur" else "")


def test_unsafe_regex_option_is_refused(cli, tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(tb.encode(tb.trace([tb.compute(0, 5)])))
    _bad(cli("trace", "overlap", path, "--add-comm-pattern", "(a+)+b"), "--add-comm-pattern", "another repeat")
    _bad(cli("trace", "overlap", path, "--compute-pattern", "x" * 300), "--compute-pattern", "at most 200")


def test_one_event_over_the_value_limit_and_deep_nesting(monkeypatch: pytest.MonkeyPatch) -> None:
    import dsctl.trace.scan as scan
    monkeypatch.setattr(scan, "MAX_VALUE_CHARS", 1000)
    monkeypatch.setattr(scan, "CHUNK_CHARS", 256)
    big = json.dumps({"traceEvents": [{"ph": "X", "name": "x" * 5000}]}).encode()
    with pytest.raises(InputError, match="over 1,000 characters"):
        list(iter_events([big[i:i + 100] for i in range(0, len(big), 100)], "t.json", {}))
    deep = b'{"traceEvents": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}"
    with pytest.raises(InputError, match=r"t\.json"):
        read_trace([deep], "t.json")


def test_chunk_boundaries_do_not_change_the_result() -> None:
    doc = tb.trace([tb.compute(0, 10), tb.nccl(5, 10), tb.step(1, 0, 30)], rank=5, world_size=8)
    data = tb.encode(doc)
    whole = read_trace([data], "t.json")
    for size in (1, 2, 3, 7, 64):
        part = read_trace([data[i:i + size] for i in range(0, len(data), size)], "t.json")
        assert part.gpu.start_us.tolist() == whole.gpu.start_us.tolist()
        assert (part.rank, part.world_size, len(part.steps)) == (5, 8, 1)
    gz = gzip.compress(data)
    assert read_trace([gz[i:i + 5] for i in range(0, len(gz), 5)], "t.gz").gpu.size == 2
    # two concatenated gzip members are one stream
    half = len(data) // 2
    assert read_trace([gzip.compress(data[:half]) + gzip.compress(data[half:])], "t.gz").gpu.size == 2


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(
        ["ph", "cat", "name", "ts", "dur", "args", "device", "stream", "correlation", "traceEvents",
         "distributedInfo", "rank", "Collective name", "Seq", "Process Group Name"]), inner, max_size=6),
    max_leaves=20)


@settings(max_examples=300)
@given(events=st.lists(_json_values, max_size=6), junk=st.binary(max_size=30), cut=st.integers(0, 400))
def test_generated_hostile_traces_never_crash(events: list[object], junk: bytes, cut: int) -> None:
    from dsctl.trace import overlap_from_bytes
    text = json.dumps({"traceEvents": events, "distributedInfo": {"rank": 10**30}}).encode()
    for data in (text, text[:cut] + junk, gzip.compress(text)[:cut] + junk, junk):
        with contextlib.suppress(InputError):
            overlap_from_bytes([("t.json", data)])


_numbers = (st.integers(min_value=-(10**30), max_value=10**30) | st.floats(allow_nan=True, allow_infinity=True)
            | st.text(max_size=8) | st.none())
_kernel_like = st.fixed_dictionaries({
    "ph": st.just("X"), "cat": st.sampled_from(["kernel", "cpu_op", "cuda_runtime", "user_annotation", "gpu_memset"]),
    "name": st.sampled_from(["ncclDevKernel_AllReduce", "gemm", "ProfilerStep#1", "ProfilerStep#99999999999999999999",
                             "gloo:all_reduce", "Memset (Device)"]) | st.text(max_size=10),
    "ts": _numbers, "dur": _numbers,
    "args": st.dictionaries(st.sampled_from(["device", "stream", "correlation", "Collective name", "Seq",
                                             "Process Group Name"]), _numbers, max_size=4)})


@settings(max_examples=300)
@given(events=st.lists(_kernel_like, min_size=1, max_size=12), step=st.none() | st.integers(-3, 3))
def test_generated_kernel_events_never_crash(events: list[dict[str, object]], step: int | None) -> None:
    from dsctl.trace import overlap_from_bytes
    data = json.dumps({"traceEvents": events}).encode()
    try:
        result = overlap_from_bytes([("t.json", data)], step=step)
    except InputError:
        return
    for row in result.ranks:
        m = row.metrics
        assert m.exposed_comm_us <= m.comm_busy_us + 1e-6


@settings(max_examples=150)
@given(a=st.lists(_kernel_like, min_size=1, max_size=10), b=st.lists(_kernel_like, min_size=1, max_size=10),
       step=st.none() | st.integers(0, 2),
       window=st.tuples(st.none() | st.floats(0, 1e6), st.none() | st.floats(0, 1e6)))
def test_generated_events_never_crash_stragglers_or_timeline(a: list[dict[str, object]], b: list[dict[str, object]],
                                                             step: int | None, window: tuple) -> None:
    from dsctl.trace.classify import Classifier
    from dsctl.trace.skew import rank_collectives, stragglers
    from dsctl.trace.timeline import rank_lanes, timeline
    parts, lanes = [], []
    for i, events in enumerate((a, b)):
        try:
            trace = read_trace([json.dumps({"traceEvents": events}).encode()], f"r{i}.json")
        except InputError:
            continue
        with contextlib.suppress(InputError):
            parts += rank_collectives(trace, i, Classifier(), step)
        with contextlib.suppress(InputError):
            lanes.append(rank_lanes(trace, i, Classifier(), step, *window))
    with contextlib.suppress(InputError):
        stragglers(parts)
    with contextlib.suppress(InputError):
        timeline(lanes, "t")
