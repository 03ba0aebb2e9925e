"""Read a PyTorch profiler (Kineto) Chrome trace from byte chunks into numpy arrays, streaming.

Events come one at a time from :func:`dsctl.trace.scan.iter_events`; only the fields the analysis needs are kept,
in typed arrays (``array('d')``/``array('q')``: about 50 bytes per device event and 16 per launch, against
about 1 kB for a decoded event dict), so memory follows the number of kept events, not the size of the file.

Accepted: ``export_chrome_trace`` JSON (``{"traceEvents": [...], "distributedInfo": {...}, ...}``), the same
gzipped (``.json.gz``; detected by content, not by name), or a bare JSON list of events. Only complete events
(``"ph": "X"``) are used; every other phase (``B``/``E``, instant, counter, flow, metadata) is ignored. A
missing ``dur`` counts as zero; events without a numeric ``ts`` or with a negative ``dur`` are skipped and counted.
Times stay in the trace's unit, microseconds. Integer fields above int64 are bad input (exit 2).
"""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dsctl.errors import InputError
from dsctl.trace.scan import DEFAULT_MAX_BYTES, iter_events

#: events read from one trace file (any phase): memory grows with the events kept (about 100 bytes each), so a
#: file with more is refused with this number, before memory passes ~1 GB; a profiler trace of a few steps of
#: one rank holds well under a million
MAX_EVENTS = 5_000_000
#: largest ``distributedInfo.world_size`` (and rank + 1) taken from a trace: 64 times a 16,384-GPU cluster. A
#: larger one is read as unknown, as a negative one is: the ranks it would list as missing must fit in memory
MAX_WORLD_SIZE = 1 << 20
#: distinct (device, stream) pairs of device events, and distinct host threads, per trace file: a process drives
#: one to sixteen GPUs with tens of streams each. Every pair becomes a row of ``trace overlap`` and a lane of
#: ``trace timeline``, so a file with more (300,000 one-kernel streams, 20,000 devices) is refused after reading
MAX_STREAMS = 4096

#: categories of device-side events (Kineto spells them lower case; old versions capitalised them)
GPU_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"})
#: categories of host-side events used when a trace has no device events; Kineto of 2021 (PyTorch 1.8-1.9)
#: wrote ``Operator`` for CPU ops and for ``ProfilerStep#N`` (and ``Kernel``/``Runtime``/``Memcpy``)
CPU_CATEGORIES = frozenset({"cpu_op", "user_annotation", "operator"})
#: the category of CUPTI range-profiler events (per-range hardware counters, no kernel timeline)
RANGE_CATEGORY = "cuda_profiler_range"
#: host-side launch calls whose ``correlation`` ties a kernel to the step that launched it
LAUNCH_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "runtime", "driver"})
_STEP = re.compile(r"ProfilerStep#([0-9]{1,18})")  # fullmatch; 18 digits stay below int64


@dataclass(frozen=True)
class EventTable:
    """Complete events of one kind, column-wise; all arrays have shape ``(n,)``.

    ``start_us``/``end_us`` in trace microseconds; ``name_code`` indexes ``names``; ``device`` is the GPU index
    (``args.device``, else ``pid``) or -1 on the host; ``stream`` is ``args.stream`` (else ``tid``);
    ``correlation`` is ``args.correlation`` (-1 if absent); ``collective`` maps an event's index to its
    ``"Collective name"`` argument (only events that have one); ``annotation`` marks ``user_annotation`` regions
    (host side; they never count as compute).
    """

    start_us: NDArray[np.float64]
    end_us: NDArray[np.float64]
    name_code: NDArray[np.int32]
    names: tuple[str, ...]
    device: NDArray[np.int32]
    stream: NDArray[np.int32]
    correlation: NDArray[np.int64]
    collective: dict[int, str]
    annotation: NDArray[np.bool_]
    #: event index -> (process group name, sequence number) for collectives whose args carry both
    group: dict[int, tuple[str, int]] = field(default_factory=dict)
    #: event index -> (``Src Rank``, ``Dst Rank``) for collectives whose args carry both (point-to-point peers)
    peers: dict[int, tuple[int, int]] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return int(self.start_us.size)


@dataclass(frozen=True)
class ProfilerStep:
    """A ``ProfilerStep#N`` annotation: host-side window ``[start_us, end_us]``."""

    number: int
    start_us: float
    end_us: float


@dataclass(frozen=True)
class TraceData:
    """One parsed trace file (one rank): device events, host events, launches and step annotations."""

    source: str
    rank: int | None
    world_size: int | None
    backend: str | None
    gpu: EventTable
    cpu: EventTable
    #: (ts of the host launch call, its correlation id), shape (n,) each
    launch_start_us: NDArray[np.float64]
    launch_correlation: NDArray[np.int64]
    steps: tuple[ProfilerStep, ...]
    num_events: int
    #: trace timestamp (µs) subtracted from every time above, so that times start near 0 (float64 precision)
    origin_us: float = 0.0
    skipped: dict[str, int] = field(default_factory=dict)
    #: ``baseTimeNanoseconds / 1000``: trace µs + this = Unix µs (None when the trace has no base: old Kineto
    #: wrote epoch µs in ``ts`` itself)
    base_us: float | None = None
    #: ``distributedInfo.pg_config`` as ``(pg_name, pg_size, ranks)`` per process group (empty when absent)
    pg_config: tuple[tuple[str, int, tuple[int, ...]], ...] = ()
    #: the top-level ``host_name`` Kineto writes (empty when absent): ranks of one host share one clock
    host_name: str = ""


def _int(value: Any, default: int) -> int:
    """An id from a trace field: a JSON integer, an integral float or a string of ASCII digits ("¹" is a digit to
    ``str.isdigit`` but not to ``int``); anything else is ``default``. Integers beyond int64 are kept: the column
    arrays refuse them (exit 2 naming int64)."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        digits = text[1:] if text.startswith("-") else text
        if digits.isascii() and digits.isdigit() and len(digits) < 20:
            return int(text)
    return default


def _number(value: Any) -> float | None:
    """A finite JSON number (or numeric string) as float, else None."""
    if type(value) is str:
        try:
            value = float(value)
        except ValueError:
            return None
    if type(value) not in (float, int):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


#: event kinds the parser keeps (0 = ignored)
_IGNORED, _GPU, _CPU, _ANNOTATION, _LAUNCH, _RANGE = 0, 1, 2, 3, 4, 5


def _kind(cat: str) -> int:
    low = cat.lower()
    if low == RANGE_CATEGORY:
        return _RANGE
    if low in GPU_CATEGORIES:
        return _GPU
    if low in LAUNCH_CATEGORIES:
        return _LAUNCH
    if low == "user_annotation":
        return _ANNOTATION
    return _CPU if low in CPU_CATEGORIES else _IGNORED


class _Columns:
    """Column builder for an EventTable (typed arrays, turned into numpy arrays once without copying)."""

    def __init__(self) -> None:
        self.start = array("d")
        self.dur = array("d")
        self.name = array("i")
        self.index: dict[str, int] = {}
        self.device = array("i")  # int32: device and stream ids are small; larger values are refused
        self.stream = array("i")
        self.corr = array("q")
        self.coll: dict[int, str] = {}
        self.group: dict[int, tuple[str, int]] = {}
        self.peers: dict[int, tuple[int, int]] = {}
        self.annotation = array("b")

    def drop_non_finite(self) -> int:
        """Remove events whose ts or dur is NaN/infinite (JSON's NaN, Infinity); returns how many went."""
        start = np.frombuffer(self.start, dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):  # 1e308 + 1e308 is inf: dropped, not warned about
            ok = np.isfinite(start) & np.isfinite(start + np.frombuffer(self.dur, dtype=np.float64))
        if ok.all():
            return 0
        keep = np.flatnonzero(ok)
        new_index = {int(old): new for new, old in enumerate(keep.tolist())}
        for name, code in (("start", "d"), ("dur", "d"), ("name", "i"), ("device", "i"), ("stream", "i"),
                           ("corr", "q"), ("annotation", "b")):
            values = getattr(self, name)
            if len(values):
                setattr(self, name, array(code, [values[i] for i in keep.tolist()]))
        self.coll = {new_index[i]: c for i, c in self.coll.items() if i in new_index}
        self.group = {new_index[i]: g for i, g in self.group.items() if i in new_index}
        self.peers = {new_index[i]: g for i, g in self.peers.items() if i in new_index}
        return int(ok.size - keep.size)

    def first_start(self) -> float | None:
        return float(np.frombuffer(self.start, dtype=np.float64).min()) if len(self.start) else None

    def table(self, origin_us: float) -> EventTable:
        # in place on the columns' own buffers (no copies: a 1 GB trace holds millions of events)
        start = np.frombuffer(self.start, dtype=np.float64)
        start -= origin_us
        end = np.frombuffer(self.dur, dtype=np.float64)
        end += start
        n = start.size
        return EventTable(
            start_us=start,
            end_us=end,
            name_code=np.frombuffer(self.name, dtype=np.int32),
            names=tuple(self.index),
            device=np.frombuffer(self.device, dtype=np.int32),
            stream=np.frombuffer(self.stream, dtype=np.int32),
            correlation=np.frombuffer(self.corr, dtype=np.int64),
            collective=self.coll,
            annotation=(np.frombuffer(self.annotation, dtype=np.int8).astype(bool) if len(self.annotation)
                        else np.zeros(n, bool)),
            group=self.group,
            peers=self.peers,
        )


_INT64 = 2**63


def _peers(cols: _Columns, at: int, args: dict[str, Any]) -> None:
    """Keep a collective's ``Src Rank``/``Dst Rank`` arguments (point-to-point peers) when both are integers."""
    src, dst = args.get("Src Rank"), args.get("Dst Rank")
    if type(src) is int and type(dst) is int and min(src, dst) >= -_INT64 and max(src, dst) < _INT64:
        cols.peers[at] = (src, dst)


def _checked(source: str, field_: str, value: Any) -> Any:
    if type(value) is int and not -_INT64 <= value < _INT64:
        raise InputError(f"{source}: event field {field_!r} holds an integer above int64 ({str(value)[:24]}...); "
                         "not a profiler trace value")
    return value


def parse_trace(chunks: Iterable[bytes], source: str, max_bytes: int = DEFAULT_MAX_BYTES) -> TraceData:
    """Stream a trace from raw (maybe gzipped) byte ``chunks`` into column arrays.

    Raises InputError naming ``source`` when it is not a Chrome trace, exceeds ``max_bytes`` decompressed,
    holds integers above int64 or no complete (``"ph": "X"``) events.
    """
    meta: dict[str, Any] = {}
    try:
        return _parse(iter_events(chunks, source, meta, max_bytes), meta, source)
    except OverflowError:
        raise InputError(f"{source}: an event holds an integer out of range (above int64; device and stream ids "
                         "above int32); not a profiler trace value") from None


def _parse(events: Iterable[Any], meta: dict[str, Any], source: str) -> TraceData:
    gpu, cpu = _Columns(), _Columns()
    launch_ts = array("d")
    launch_corr = array("q")
    raw_steps: list[tuple[int, float, float]] = []  # (N, ts, dur)
    skipped = {"not_an_object": 0, "other_phase": 0, "bad_ts": 0, "negative_dur": 0, "missing_dur": 0}
    num_complete = 0
    num_events = 0
    num_ranges = 0
    kind_of: dict[str, int] = {}
    empty: dict[str, Any] = {}
    # bound methods of the hot columns (attribute look-ups cost as much as the appends)
    g_start, g_dur, g_name, g_dev = gpu.start.append, gpu.dur.append, gpu.name.append, gpu.device.append
    g_stream, g_corr, g_index, g_coll = gpu.stream.append, gpu.corr.append, gpu.index, gpu.coll
    l_ts, l_corr = launch_ts.append, launch_corr.append
    for ev in events:  # the one per-event Python loop: keep it lean (type() checks, no helper calls when typical)
        num_events += 1
        if num_events > MAX_EVENTS:
            raise InputError(f"{source}: more than {MAX_EVENTS:,} trace events; dsctl reads at most {MAX_EVENTS:,} "
                             "per file (memory grows with the events)",
                             hint="profile fewer steps (torch.profiler schedule active=1..2) or one rank per file")
        if type(ev) is not dict:
            skipped["not_an_object"] += 1
            continue
        if ev.get("ph") != "X":
            skipped["other_phase"] += 1
            continue
        num_complete += 1
        cat = ev.get("cat")
        if type(cat) is not str:
            continue
        kind = kind_of.get(cat)
        if kind is None:
            kind = kind_of[cat] = _kind(cat)
        if not kind:
            continue
        ts = ev.get("ts")
        if type(ts) is not float:
            ts = _checked(source, "ts", ts) if type(ts) is int else _number(ts)
            if ts is None:
                skipped["bad_ts"] += 1
                continue
        dur = ev.get("dur")
        if type(dur) is not float and type(dur) is not int:
            skipped["missing_dur"] += 1
            dur = 0.0
        elif dur < 0:
            skipped["negative_dur"] += 1
            continue
        args = ev.get("args")
        if type(args) is not dict:
            args = empty
        if kind == _RANGE:
            num_ranges += 1
            continue
        if kind == _LAUNCH:
            l_ts(ts)
            corr = args.get("correlation")
            l_corr(corr if type(corr) is int else _int(corr, -1))
            continue
        name = ev.get("name")
        if type(name) is not str:
            name = str(name)[:200]
        if kind == _GPU:
            device = args.get("device")
            g_dev(device if type(device) is int else _int(device, _int(ev.get("pid"), 0)))
            stream = args.get("stream")
            g_stream(stream if type(stream) is int else _int(stream, _int(ev.get("tid"), 0)))
            corr = args.get("correlation")
            g_corr(corr if type(corr) is int else _int(corr, -1))
            coll = args.get("Collective name")
            if coll is not None and type(coll) is str:
                at = len(gpu.start)
                g_coll[at] = coll
                group = args.get("Process Group Name")
                seq = args.get("Seq")
                if type(group) is str and type(seq) is int and 0 <= seq < _INT64:
                    gpu.group[at] = (group, seq)
                _peers(gpu, at, args)
            code = g_index.get(name)
            if code is None:
                code = g_index[name] = len(g_index)
            g_name(code)
            g_start(ts)
            g_dur(dur)
            continue
        if kind == _ANNOTATION or (kind == _CPU and name.startswith("ProfilerStep#")):  # 2021: cat Operator
            match = _STEP.fullmatch(name)
            if match:
                raw_steps.append((int(match.group(1)), float(ts), float(dur)))
                continue
        cols = cpu
        coll = args.get("Collective name")
        if coll is not None and type(coll) is str:
            at = len(cols.start)
            cols.coll[at] = coll
            group = args.get("Process Group Name")
            seq = args.get("Seq")
            if type(group) is str and type(seq) is int and 0 <= seq < _INT64:
                cols.group[at] = (group, seq)
            _peers(cols, at, args)
        cols.device.append(-1)
        cols.stream.append(_int(ev.get("tid"), 0))
        cols.corr.append(-1)
        cols.annotation.append(kind == _ANNOTATION)
        cols.start.append(ts)
        cols.dur.append(dur)
        code = cols.index.get(name)
        if code is None:
            code = cols.index[name] = len(cols.index)
        cols.name.append(code)
    if num_complete == 0:
        raise InputError(f"{source}: no complete (\"ph\": \"X\") events with a timestamp among {num_events:,} "
                         "trace events; nothing to analyse",
                         hint="record with torch.profiler and export_chrome_trace; complete events carry ts and dur")
    if num_ranges and not len(gpu.start):
        raise InputError(f"{source}: a CUPTI range-profiler trace ({num_ranges:,} {RANGE_CATEGORY} events: "
                         "hardware counters per profiled range, from torch.profiler's experimental_config "
                         "profiler_metrics) holds no GPU kernel timeline; dsctl trace reads activity traces",
                         hint="profile again without profiler_metrics (activities=[CPU, CUDA]) for kernel times")
    skipped["bad_ts"] += gpu.drop_non_finite() + cpu.drop_non_finite()
    raw_steps = [st for st in raw_steps if math.isfinite(st[1] + st[2])]
    launches = np.frombuffer(launch_ts, dtype=np.float64)
    launch_ok = np.isfinite(launches)
    starts = [x for x in (gpu.first_start(), cpu.first_start(), min((st[1] for st in raw_steps), default=None),
                          float(launches[launch_ok].min()) if launch_ok.any() else None) if x is not None]
    origin = float(min(starts)) if starts else 0.0
    steps = [ProfilerStep(n, ts - origin, ts - origin + dur) for n, ts, dur in raw_steps]
    launch_correlation = np.frombuffer(launch_corr, dtype=np.int64)
    if launch_ok.all():
        launches -= origin  # in place, as the event columns
        launch_start = launches
    else:
        launch_start, launch_correlation = launches[launch_ok] - origin, launch_correlation[launch_ok]
    _check_streams(source, gpu, "GPU streams (device, stream pairs)")
    _check_streams(source, cpu, "host threads")
    info = meta.get("distributedInfo")
    info = info if isinstance(info, dict) else {}
    rank = _int(info.get("rank"), -1)
    world = _int(info.get("world_size"), -1)
    backend = info.get("backend")
    base = _number(meta.get("baseTimeNanoseconds"))
    return TraceData(
        source=source,
        rank=rank if 0 <= rank < MAX_WORLD_SIZE else None,
        world_size=world if 0 < world <= MAX_WORLD_SIZE else None,
        backend=backend[:40] if isinstance(backend, str) else None,
        gpu=gpu.table(origin),
        cpu=cpu.table(origin),
        launch_start_us=launch_start,
        launch_correlation=launch_correlation,
        steps=tuple(sorted(_dedupe_steps(steps), key=lambda s: s.start_us)),
        num_events=num_events,
        origin_us=origin,
        skipped={k: v for k, v in skipped.items() if v},
        base_us=base / 1e3 if base is not None and base > 0 else None,
        pg_config=_pg_config(info.get("pg_config")),
        host_name=host[:200] if isinstance(host := meta.get("host_name"), str) else "",
    )


def _check_streams(source: str, cols: _Columns, what: str) -> None:
    """Refuse a file with more than :data:`MAX_STREAMS` distinct (device, stream) pairs in ``cols``."""
    if len(cols.stream) <= MAX_STREAMS:
        return
    device = np.frombuffer(cols.device, dtype=np.int32).astype(np.int64)
    stream = np.frombuffer(cols.stream, dtype=np.int32).astype(np.int64)
    count = np.unique((device << 32) | (stream & 0xFFFFFFFF)).size  # int32 pairs: no overflow
    if count > MAX_STREAMS:
        raise InputError(f"{source}: {count:,} {what}; dsctl reads at most {MAX_STREAMS:,} per trace file (each "
                         "is a row of trace overlap and a lane of trace timeline)",
                         hint="a profiler trace of one process holds tens of streams; give one file per rank")


def _pg_config(value: Any) -> tuple[tuple[str, int, tuple[int, ...]], ...]:
    """``distributedInfo.pg_config`` entries as ``(pg_name, pg_size, ranks)``; malformed entries are left out."""
    if not isinstance(value, list):
        return ()
    out = []
    for entry in value[:4096]:
        if not isinstance(entry, dict):
            continue
        name = entry.get("pg_name")
        ranks = entry.get("ranks")
        ranks = tuple(r for r in ranks[:1 << 20] if type(r) is int) if isinstance(ranks, list) else ()
        size = _int(entry.get("pg_size"), len(ranks))
        out.append((str(name)[:80], size, ranks))
    return tuple(out)


def _dedupe_steps(steps: list[ProfilerStep]) -> list[ProfilerStep]:
    """One window per step number (a repeated number keeps its widest window)."""
    by_number: dict[int, ProfilerStep] = {}
    for step in steps:
        old = by_number.get(step.number)
        if old is None or step.end_us - step.start_us > old.end_us - old.start_us:
            by_number[step.number] = step
    return list(by_number.values())
