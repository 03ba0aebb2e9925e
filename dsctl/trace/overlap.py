"""Compute/communication overlap of profiled ranks: busy times, exposed communication, per-collective breakdown.

For each rank (trace file) and device, inside each analysed window (a ``ProfilerStep#N``, or the whole trace):

- ``compute_busy_us`` = |∪ compute events|, ``comm_busy_us`` = |∪ communication events|
- ``overlapped_us`` = |∪ compute ∩ ∪ comm| (communication hidden under compute)
- ``exposed_comm_us`` = ``comm_busy_us - overlapped_us`` (communication nothing else runs under)
- ``idle_us`` = ``wall_us - |∪ compute ∪ ∪ comm|``
- ``overlap_ratio`` = ``overlapped_us / comm_busy_us`` (None without communication)

Sums over several windows add each window's figures. Events are device kernels/copies when the trace has any
(classes from :mod:`dsctl.trace.classify`: communication, compute, and memory = local copies/memsets, which count
as neither); otherwise host ``cpu_op`` events (compute) and host collective ops/annotations (communication),
which the result says in ``basis`` and ``notes``. ``categories`` gives HTA's kernel categories (computation,
communication, memory, idle) and ``top_kernels`` the kernels with the most summed time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import numpy as np
from numpy.typing import NDArray

from dsctl.errors import InputError, one_of
from dsctl.trace.classify import CLASS_NAMES, Classifier, classify_names, collective_label
from dsctl.trace.groups import runs
from dsctl.trace.intervals import Coverage, FloatArray, clip, covered_lengths, subtract, total, union, union_lengths
from dsctl.trace.kernels import CATEGORY
from dsctl.trace.parse import EventTable, TraceData
from dsctl.trace.spread import spread, worst_ranks
from dsctl.trace.windows import clip_set, partition


@dataclass(frozen=True)
class OverlapMetrics:
    """Time split of one window (or a sum of windows), all in microseconds; see the module docstring."""

    wall_us: float
    compute_busy_us: float
    comm_busy_us: float
    overlapped_us: float
    exposed_comm_us: float
    compute_only_us: float
    idle_us: float
    #: overlapped / comm busy; None when there is no communication
    overlap_ratio: float | None
    #: exposed communication / wall time; None for an empty window
    exposed_comm_fraction: float | None

    @staticmethod
    def from_sums(wall: float, compute: float, comm: float, both: float, idle: float) -> OverlapMetrics:
        """Metrics from window, compute, comm, overlapped and idle sums (µs), rounded to the trace's ns."""
        wall, compute, comm, both, idle = (round(x, 3) for x in (wall, compute, comm, both, idle))
        return OverlapMetrics(
            wall_us=wall, compute_busy_us=compute, comm_busy_us=comm, overlapped_us=both,
            exposed_comm_us=round(max(0.0, comm - both), 3), compute_only_us=round(max(0.0, compute - both), 3),
            idle_us=idle,
            overlap_ratio=both / comm if comm > 0 else None,
            exposed_comm_fraction=max(0.0, comm - both) / wall if wall > 0 else None,
        )


@dataclass(frozen=True)
class CollectiveStat:
    """One collective label: ``count`` events, their summed durations and exposed parts (µs) in the windows."""

    name: str
    count: int
    total_us: float
    exposed_us: float
    mean_us: float


@dataclass(frozen=True)
class StreamStat:
    """One GPU stream (or host thread): what runs on it and its busy time (µs, union of its events)."""

    stream: int
    kind: str
    num_events: int
    busy_us: float


@dataclass(frozen=True)
class CategoryStat:
    """One of HTA's kernel categories in the analysed windows: ``busy_us`` = |∪ its kernels| (for ``idle``: the
    window time with no kernel at all), ``kernel_us`` = Σ kernel durations, ``share`` = busy / wall."""

    category: str
    busy_us: float
    kernel_us: float
    num_kernels: int
    share: float | None


@dataclass(frozen=True)
class KernelStat:
    """One distinct kernel (or host op) name: its class, the rule that decided it, count and summed time (µs)."""

    name: str
    cls: str
    rule: str
    count: int
    total_us: float


@dataclass(frozen=True)
class StepOverlap:
    """Metrics of one ``ProfilerStep#N`` window (``step`` None = the whole trace); ``start_us`` is relative to the
    trace's first event."""

    step: int | None
    start_us: float
    metrics: OverlapMetrics

    def to_data(self) -> dict[str, object]:
        return {"step": self.step, "start_us": self.start_us, **vars(self.metrics)}


@dataclass(frozen=True)
class Lanes:
    """Canonical interval sets (trace µs) of one rank for drawing: compute, comm, and exposed comm, plus the
    analysed windows ``(start, end)`` (one per step)."""

    origin_us: float
    end_us: float
    compute: tuple[FloatArray, FloatArray]
    comm: tuple[FloatArray, FloatArray]
    exposed: tuple[FloatArray, FloatArray]
    windows: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class RankOverlap:
    """Overlap figures of one rank's device (one trace file may hold several devices)."""

    source: str
    rank: int
    device: str
    basis: str
    steps: list[int]
    metrics: OverlapMetrics
    collectives: list[CollectiveStat]
    streams: list[StreamStat]
    per_step: list[StepOverlap]
    num_events: int
    notes: list[str]
    categories: list[CategoryStat]
    top_kernels: list[KernelStat]
    #: every distinct name (for --explain-classes), and the drawing lanes (None unless asked for)
    kernels: list[KernelStat] = field(metadata={"output": False})
    lanes: Lanes | None = field(metadata={"output": False})

    def to_data(self) -> dict[str, object]:
        """The dataclass fields with the metrics flattened in (``wall_us`` ... at the rank's top level)."""
        data: dict[str, object] = {}
        for f in fields(self):
            if f.name == "metrics":
                data.update(vars(self.metrics))
            elif f.metadata.get("output", True):
                data[f.name] = getattr(self, f.name)
        return data


@dataclass(frozen=True)
class OverlapResult:
    """``dsctl trace overlap``: one row per rank/device, the worst rank, and how events were classified."""

    steps: str
    comm_patterns: list[str]
    compute_patterns: list[str]
    ranks: list[RankOverlap]
    worst_rank: dict[str, object] | None
    #: min/median/p95/max across rank rows of the main figures (None with a single row)
    spread: dict[str, dict[str, float]] | None
    #: the rows with the most exposed communication, worst first (at most WORST_RANKS)
    worst_ranks: list[dict[str, object]]
    notes: list[str]
    #: --slurm: nodes that gave no answer, ``{"node", "reason"}`` (then the exit code is 1)
    unreachable_nodes: list[dict[str, str]] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 1 if self.unreachable_nodes else 0


def launch_times(table: EventTable, trace: TraceData) -> FloatArray:
    """When each device event was launched on the host (its correlated runtime call), else its own start."""
    t = table.start_us.copy()
    corr = trace.launch_correlation
    if corr.size == 0 or table.size == 0:
        return t
    lo, hi = int(corr.min()), int(corr.max())
    if lo >= 0 and hi - lo < 4 * corr.size + 1024:  # dense ids (the usual case): a lookup table, less memory
        lut = np.full(hi - lo + 1, np.nan)
        lut[corr - lo] = trace.launch_start_us
        inside = (table.correlation >= lo) & (table.correlation <= hi)
        hit = np.full(table.size, np.nan)
        hit[inside] = lut[table.correlation[inside] - lo]
        del lut
        found = ~np.isnan(hit)
        t[found] = hit[found]
        return t
    order = np.argsort(corr, kind="stable")
    corr_sorted = trace.launch_correlation[order]
    pos = np.searchsorted(corr_sorted, table.correlation)
    pos_ok = np.minimum(pos, corr_sorted.size - 1)
    found = (table.correlation >= 0) & (pos < corr_sorted.size) & (corr_sorted[pos_ok] == table.correlation)
    t[found] = trace.launch_start_us[order][pos_ok[found]]
    return t


def step_of(times: FloatArray, trace: TraceData) -> NDArray[np.int32]:
    """Index into ``trace.steps`` of the step window holding each time, -1 outside every step."""
    starts = np.array([s.start_us for s in trace.steps])
    ends = np.array([s.end_us for s in trace.steps])
    idx = np.searchsorted(starts, times, side="right") - 1
    ok = (idx >= 0) & (times <= ends[np.maximum(idx, 0)])
    return np.where(ok, idx, -1).astype(np.int32)


def select_steps(trace: TraceData, step: int | None) -> list[int]:
    """Indices into ``trace.steps`` to analyse (all of them unless ``step`` names one)."""
    if step is None:
        return list(range(len(trace.steps)))
    if not trace.steps:
        raise InputError(f"{step}: {trace.source} has no ProfilerStep#N annotations; drop {{step}} to analyse "
                         "the whole trace", field="step", mentions=("step",))
    for i, s in enumerate(trace.steps):
        if s.number == step:
            return [i]
    numbers = [str(s.number) for s in trace.steps]
    raise InputError(f"{step}: {trace.source} has no ProfilerStep#{step}; steps present: "
                     f"{one_of(numbers[:20])}{' ...' if len(numbers) > 20 else ''}", field="step")


@dataclass
class _Acc:
    """One device's figures per analysed window."""

    coverages: list[Coverage] = field(default_factory=list)
    per_step: list[StepOverlap] = field(default_factory=list)
    busy_all_us: list[float] = field(default_factory=list)
    memory_us: list[float] = field(default_factory=list)
    windows: list[tuple[float, float]] = field(default_factory=list)


def _window(acc: _Acc, compute_u: tuple[FloatArray, FloatArray], comm_u: tuple[FloatArray, FloatArray],
            memory_u: tuple[FloatArray, FloatArray], lo: float, hi: float, number: int | None) -> None:
    """Figures of one window [lo, hi] (µs) from the device's canonical compute, comm and memory sets."""
    compute_w, comm_w, memory_w = (clip_set(u, lo, hi) for u in (compute_u, comm_u, memory_u))
    # |A ∩ B| = |A| + |B| - |A ∪ B| over the (much smaller) canonical sets: less memory than a sweep of all events
    either = union(np.concatenate([compute_w[0], comm_w[0]]), np.concatenate([compute_w[1], comm_w[1]]))
    a_us, b_us, either_us = total(*compute_w), total(*comm_w), total(*either)
    window = max(0.0, hi - lo)
    cov = Coverage(window, a_us, b_us, min(max(0.0, a_us + b_us - either_us), a_us, b_us),
                   max(0.0, window - either_us))
    acc.coverages.append(cov)
    acc.per_step.append(StepOverlap(number, lo, OverlapMetrics.from_sums(
        cov.window_us, cov.a_us, cov.b_us, cov.both_us, cov.neither_us)))
    acc.windows.append((lo, hi))
    acc.memory_us.append(total(*memory_w))
    acc.busy_all_us.append(total(*union(np.concatenate([either[0], memory_w[0]]),
                                        np.concatenate([either[1], memory_w[1]]))))


def _collectives(codes: NDArray[np.int64], labels: list[str], s: FloatArray, e: FloatArray,
                 comm: NDArray[np.bool_], exposed: FloatArray) -> list[CollectiveStat]:
    """Per label: count, summed duration and exposed part (``exposed``: per communication event, µs)."""
    if not comm.any():
        return []
    lab = codes[comm]
    dur = (e - s)[comm]
    n = len(labels)
    count = np.bincount(lab, minlength=n)
    tot = np.bincount(lab, weights=dur, minlength=n)
    exp = np.bincount(lab, weights=exposed, minlength=n)
    rows = [CollectiveStat(labels[i], int(count[i]), round(float(tot[i]), 3), round(float(exp[i]), 3),
                           round(float(tot[i] / count[i]), 3))
            for i in np.flatnonzero(count)]
    return sorted(rows, key=lambda r: (-r.exposed_us, -r.total_us, r.name))


def _streams(streams: NDArray[np.int32], s: FloatArray, e: FloatArray, comm: NDArray[np.bool_]) -> list[StreamStat]:
    """One row per stream, ascending; all streams in one pass (a mask per stream would cost streams x events:
    300,000 one-kernel streams took 100 s)."""
    ids, group = np.unique(streams, return_inverse=True)
    group = group.reshape(-1)
    count = np.bincount(group, minlength=ids.size)
    num_comm = np.bincount(group, weights=comm.astype(np.float64), minlength=ids.size).astype(np.int64)
    busy = union_lengths(group, s, e, ids.size)
    kinds = np.where(num_comm == count, "comm", np.where(num_comm == 0, "compute", "mixed"))
    return [StreamStat(sid, kind, n, round(us, 3))
            for sid, kind, n, us in zip(ids.tolist(), kinds.tolist(), count.tolist(), busy.tolist(), strict=True)]


def _device_table(trace: TraceData) -> tuple[EventTable, str]:
    """The events analysed (GPU kernels, else host ops) and their basis name."""
    if trace.gpu.size:
        return trace.gpu, "gpu_kernels"
    if trace.cpu.size:
        return trace.cpu, "cpu_ops"
    bad = {k: v for k, v in trace.skipped.items() if k in ("bad_ts", "negative_dur")}
    why = ("; skipped " + ", ".join(f"{v:,} with {k.replace('_', ' ')}" for k, v in sorted(bad.items()))
           + " (ts must be a finite number, dur a finite non-negative one)") if bad else ""
    raise InputError(f"{trace.source}: no GPU kernels, copies or CPU ops (cat kernel, gpu_memcpy, cpu_op) among "
                     f"{trace.num_events:,} events{why}; nothing to analyse")


def _categories(acc: _Acc, cls_codes: NDArray[np.int8], wall: float, s: FloatArray,
                e: FloatArray) -> list[CategoryStat]:
    """HTA's categories from the accumulated windows; ``cls_codes`` is the class code per selected event."""
    dur = e - s
    busy = {"computation": sum(c.a_us for c in acc.coverages), "communication": sum(c.b_us for c in acc.coverages),
            "memory": sum(acc.memory_us)}
    rows = []
    for code, cls in enumerate(CLASS_NAMES):
        on = cls_codes == code
        cat = CATEGORY[cls]
        rows.append(CategoryStat(cat, round(busy[cat], 3), round(float(dur[on].sum()), 3), int(on.sum()),
                                 busy[cat] / wall if wall > 0 else None))
    idle = max(0.0, wall - sum(acc.busy_all_us))
    rows.append(CategoryStat("idle", round(idle, 3), 0.0, 0, idle / wall if wall > 0 else None))
    return rows


def analyse_trace(trace: TraceData, rank: int, classifier: Classifier, step: int | None,
                  all_steps: bool, top: int = 10, keep_lanes: bool = False) -> list[RankOverlap]:
    """Overlap of one parsed trace, one :class:`RankOverlap` per device (``rank`` is used if the file has none)."""
    table, basis = _device_table(trace)
    name_cls, rules = classify_names(table.names, classifier)
    labels: list[str] = []
    label_index: dict[str, int] = {}

    def code_of(label: str) -> int:
        if label not in label_index:
            label_index[label] = len(labels)
            labels.append(label)
        return label_index[label]

    # one label per event: its "Collective name" argument if it has one (NCCL may reuse a kernel name for several
    # collectives), else the label derived from its name
    by_name = np.array([code_of(collective_label(name)) for name in table.names], dtype=np.int64)
    event_label = by_name[table.name_code] if table.size else np.zeros(0, dtype=np.int64)
    for i, coll in table.collective.items():
        event_label[i] = code_of(coll)
    cls_all = name_cls[table.name_code] if table.size else np.zeros(0, dtype=np.int8)
    comm_all = cls_all == 1
    memory_all = cls_all == 2
    compute_all = cls_all == 0
    notes: list[str] = []
    if basis == "gpu_kernels":
        when = launch_times(table, trace)
    else:
        compute_all &= ~table.annotation
        memory_all[:] = False
        cls_all = np.where(table.annotation & (cls_all == 0), np.int8(-1), cls_all)
        when = table.start_us
        notes.append("no GPU kernels in this trace: compute = host CPU ops (cat cpu_op), communication = host "
                     "collective ops/annotations matching the patterns; all host threads share one lane")
    selected = select_steps(trace, step)
    step_idx = step_of(when, trace) if trace.steps else np.zeros(table.size, dtype=np.int32)
    del when
    if not trace.steps:
        notes.append("no ProfilerStep#N annotations: the window is the whole trace")
    odd = {k: v for k, v in trace.skipped.items() if k != "other_phase"}
    if odd:
        notes.append("unusable events: " + ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in odd.items())
                     + " (missing dur counts as zero length; the others are skipped)")
    rows = []
    on_gpu = basis == "gpu_kernels"
    device_of = table.device.astype(np.int64) if on_gpu else np.zeros(table.size, dtype=np.int64)
    wanted = np.asarray(selected if trace.steps else [0], dtype=np.int32)
    for every in runs(np.arange(table.size, dtype=np.intp), device_of):  # one sort, not a mask per device
        device = int(device_of[every[0]])
        s_all, e_all, k_all = table.start_us[every], table.end_us[every], step_idx[every]
        if not trace.steps:
            windows = [(0, float(s_all.min()), float(e_all.max()))]
        elif not on_gpu:  # host windows are the steps themselves, with or without events
            windows = [(k, trace.steps[k].start_us, trace.steps[k].end_us) for k in selected]
        else:
            windows = [w for w in partition(s_all, e_all, k_all, len(trace.steps)) if w[0] in selected]
        if not windows:
            continue
        # busy time from every event of the device (a step's window may hold the previous step's tail), each
        # instant in one window; per-kernel tables from the events the analysed steps launched, each counted once
        compute_u, comm_u, memory_u = (union(s_all[m], e_all[m])
                                       for m in (compute_all[every], comm_all[every], memory_all[every]))
        acc = _Acc()
        for k, lo, hi in windows:
            _window(acc, compute_u, comm_u, memory_u, lo, hi, trace.steps[k].number if trace.steps else None)
        first_us, last_us = acc.windows[0][0], acc.windows[-1][1]
        order = every[np.isin(k_all, wanted)]
        sums = [sum(getattr(c, f) for c in acc.coverages) for f in ("window_us", "a_us", "b_us", "both_us",
                                                                     "neither_us")]
        compute_u, comm_u = clip_set(compute_u, first_us, last_us), clip_set(comm_u, first_us, last_us)
        lanes = Lanes(first_us, last_us, compute_u, comm_u, subtract(comm_u, compute_u),
                      tuple(acc.windows)) if keep_lanes else None
        clipped_s, clipped_e = clip(table.start_us[order], table.end_us[order], first_us, last_us)
        comm_sel = comm_all[order]
        exposed = ((clipped_e - clipped_s)[comm_sel]
                   - covered_lengths(clipped_s[comm_sel], clipped_e[comm_sel], compute_u))
        # kernel statistics over the clipped events, in the same order as ``order``
        names_sel = table.name_code[order]
        n = len(table.names)
        count = np.bincount(names_sel, minlength=n)
        tot = np.bincount(names_sel, weights=clipped_e - clipped_s, minlength=n)
        ranked = sorted(np.flatnonzero(count).tolist(), key=lambda i: (-tot[i], table.names[i]))
        kernels = [KernelStat(table.names[i], CLASS_NAMES[int(name_cls[i])], rules[i], int(count[i]),
                              round(float(tot[i]), 3)) for i in ranked]
        rows.append(RankOverlap(
            source=trace.source, rank=trace.rank if trace.rank is not None else rank,
            device=f"gpu{device}" if on_gpu else "cpu", basis=basis,
            steps=[s.number for i, s in enumerate(trace.steps) if i in selected],
            metrics=OverlapMetrics.from_sums(*sums),
            collectives=_collectives(event_label[order], labels, clipped_s, clipped_e, comm_sel, exposed),
            streams=_streams(table.stream[order], clipped_s, clipped_e, comm_sel),
            per_step=acc.per_step if all_steps else [],
            num_events=int(order.size),
            notes=list(notes),
            categories=_categories(acc, cls_all[order], sums[0], clipped_s, clipped_e),
            top_kernels=kernels[:top],
            kernels=kernels,
            lanes=lanes,
        ))
    if not rows:
        raise InputError(f"{trace.source}: no events fall inside the analysed steps "
                         f"({', '.join(str(s.number) for s in trace.steps)})")
    return rows


def analyse(traces: Sequence[TraceData], classifier: Classifier, step: int | None = None,
            all_steps: bool = False, top: int = 10, keep_lanes: bool = False) -> OverlapResult:
    """Overlap of every trace (one per rank), see :func:`combine`."""
    if step is not None and all_steps:
        raise InputError("and {all_steps} exclude each other; give one", field="step", mentions=("all_steps",))
    ranks: list[RankOverlap] = []
    for i, trace in enumerate(traces):
        ranks.extend(analyse_trace(trace, i, classifier, step, all_steps, top, keep_lanes))
    return combine(ranks, classifier, step)


def combine(ranks: list[RankOverlap], classifier: Classifier, step: int | None, notes: Sequence[str] = (),
            unreachable: Sequence[dict[str, str]] = ()) -> OverlapResult:
    """The result over per-rank rows: spread across ranks and the worst ranks (most exposed communication)."""
    notes = list(notes)
    seen: dict[tuple[int, str], str] = {}
    for row in ranks:
        key = (row.rank, row.device)
        if key in seen and seen[key] != row.source:
            notes.append(f"rank {row.rank} {row.device} appears in both {seen[key]} and {row.source}")
        seen.setdefault(key, row.source)
    worst = None
    if len(ranks) > 1:
        top = max(ranks, key=lambda r: r.metrics.exposed_comm_us)
        worst = {"rank": top.rank, "device": top.device, "source": top.source,
                 "exposed_comm_us": top.metrics.exposed_comm_us, "overlap_ratio": top.metrics.overlap_ratio,
                 "exposed_comm_fraction": top.metrics.exposed_comm_fraction}
    return OverlapResult(steps="all" if step is None else str(step), comm_patterns=classifier.patterns,
                         compute_patterns=list(classifier.compute_patterns), ranks=ranks, worst_rank=worst,
                         spread=spread(ranks), worst_ranks=worst_ranks(ranks), notes=notes,
                         unreachable_nodes=list(unreachable))
