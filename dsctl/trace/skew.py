"""Across ranks: match each collective on every rank, its skew, the straggler ranking and the critical path.

Per rank (:func:`rank_collectives`, the parallel unit): the communication events of the analysed steps with a
matching key. The key is ``(process group, Seq)`` when the profiler recorded both (Kineto from 2026-03), else
``(label, k)``: the k-th event with that collective label on that rank (label = ``Collective name`` or the kernel
name without template arguments), so the same collective is matched by its order on each rank.

Across ranks (:func:`stragglers`), with P participants (rank, device) and K matched keys as ``K x P`` matrices:

- clock alignment (``align="ends"``): hosts' clocks differ (Kineto does not align hosts), but a synchronising
  collective (all-reduce, all-gather, reduce-scatter, all-to-all, barrier; never broadcast or point-to-point:
  :func:`dsctl.trace.comms.is_synchronising`) ends at about the same moment everywhere. Participants whose traces
  name the same ``host_name`` read one system clock and share one offset; each clock's offset is the median, over
  synchronising keys k and its participants p, of ``end[k, p] - median_p(end[k, :])``, subtracted from their
  times. One host: no offset at all. ``align="none"`` keeps the trace clocks;
- arrival = the aligned start of the rank's kernel; per key: ``skew_us = max - min`` arrival, the last rank
  (``argmax``), and ``wait_us = sum_p(max - arrival_p)``, the time the other ranks spent waiting for it;
- straggler score of a rank (``wait_caused_us``) = the ``wait_us`` of the keys where it arrived last, summed:
  only the last rank made the others wait (a rank that was early at a key caused no wait there, issue 29);
  ranked by score, then by how often the rank was last;
- critical path at collective granularity: keys ordered by median arrival; between consecutive keys a and b the
  rank that arrived last at b set the time, and its compute gap ``arrival[b] - end[a]`` is the critical segment;
  ``slack_us`` is how much later it arrived than the next-latest rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from dsctl.cluster import Places
from dsctl.errors import InputError
from dsctl.trace.classify import Classifier, classify_names, collective_label
from dsctl.trace.comms import host_collectives, host_label, is_point_to_point, is_synchronising, op_name
from dsctl.trace.groups import runs
from dsctl.trace.job import JobCheck
from dsctl.trace.overlap import launch_times, select_steps, step_of
from dsctl.trace.parse import TraceData
from dsctl.trace.place import PlaceReport, locate

ALIGN_MODES = ("ends", "none")
#: largest matched table, collectives seen on two or more participants x participants (rank x device): each
#: ``K x P`` float matrix is 8 bytes a cell and the analysis holds a few of them (16,384 GPUs x 1,024
#: collectives; a trace of one step of a 61-layer MoE model holds a few hundred per rank)
MAX_MATCH_CELLS = 1 << 24


@dataclass(frozen=True)
class RankCollectives:
    """One participant's communication events: shapes ``(n,)``; times are absolute trace µs."""

    source: str
    rank: int
    device: str
    keys: tuple[str, ...]
    key_code: NDArray[np.int64]
    key_index: NDArray[np.int64]
    start_us: NDArray[np.float64]
    end_us: NDArray[np.float64]
    #: whether each event is a synchronising collective (a clock reference; see dsctl.trace.comms)
    sync: NDArray[np.bool_]
    #: where the events come from: "gpu kernels" or a host source of dsctl.trace.comms.HOST_SOURCES
    basis: str = "gpu kernels"
    #: the trace's host_name ("" when absent): participants of one host share one clock
    host: str = ""
    #: point-to-point events left out: no (process group, peer, Seq) to match them by
    num_p2p_unmatched: int = 0


def rank_collectives(trace: TraceData, index: int, classifier: Classifier, step: int | None) -> list[RankCollectives]:
    """The matchable collectives of each device of one trace (``index`` = rank if the file has none).

    GPU communication kernels when the trace has any, else the host collectives of a CPU-only trace (gloo's
    ``gloo:<op>`` annotations first; see :mod:`dsctl.trace.comms`), one participant ``cpu`` per file.
    """
    table = trace.gpu
    comm = np.zeros(table.size, dtype=bool)
    if table.size:
        codes, _ = classify_names(table.names, classifier)
        comm = codes[table.name_code] == 1
    on_host = not comm.any()
    source = "gpu kernels"
    if on_host:
        table = trace.cpu
        source, comm = host_collectives(table)
        if not comm.any():
            raise InputError(f"{trace.source}: no collectives: neither GPU communication kernels nor host "
                             "collectives (gloo:<op> annotations, record_param_comms, c10d:: ops)",
                             hint="profile a distributed run (torch.profiler with the process group initialised)")
        when = table.start_us
    else:
        when = launch_times(table, trace)
    if trace.steps:
        comm &= np.isin(step_of(when, trace), select_steps(trace, step))
    elif step is not None:
        select_steps(trace, step)
    rank = trace.rank if trace.rank is not None else index
    device_of = np.full(table.size, -1, dtype=np.int32) if on_host else table.device
    sync_of: dict[str, bool] = {}
    p2p_of: dict[str, bool] = {}
    out = []
    for members in runs(np.flatnonzero(comm), device_of):  # one sort, not a mask per device
        idx = members[np.argsort(table.start_us[members], kind="stable")]
        device = int(device_of[idx[0]])
        keys: dict[str, int] = {}
        key_code = np.empty(idx.size, dtype=np.int64)
        key_index = np.empty(idx.size, dtype=np.int64)
        sync = np.empty(idx.size, dtype=bool)
        seen: dict[int, int] = {}
        kept = np.ones(idx.size, dtype=bool)
        for j, i in enumerate(idx.tolist()):
            name = table.names[table.name_code[i]]
            coll = table.collective.get(i)
            group = table.group.get(i)
            what = coll or name
            p2p = p2p_of.get(what)
            if p2p is None:
                p2p = p2p_of[what] = is_point_to_point(what)
            if p2p:  # one transfer between two ranks: matched by (group, peer pair, Seq) or not at all
                peer = _peer(op_name(what), rank, table.peers.get(i))
                if group is None or peer is None:
                    kept[j] = False
                    continue
                label, k = f"p2p (pg {group[0]}, ranks {min(rank, peer)}-{max(rank, peer)})", group[1]
            elif group is not None:  # the op name keeps the process group's collective and P2P counters apart
                label, k = f"{collective_label(name, coll)} (pg {group[0]})", group[1]
            else:
                label = host_label(name) if on_host and coll is None else collective_label(name, coll)
                k = -1
            code = keys.setdefault(label, len(keys))
            if k < 0:
                k = seen.get(code, 0)
                seen[code] = k + 1
            key_code[j], key_index[j] = code, k
            flag = sync_of.get(what)
            if flag is None:
                flag = sync_of[what] = is_synchronising(what)
            sync[j] = flag
        dropped = int(idx.size - kept.sum())
        idx = idx[kept]
        out.append(RankCollectives(trace.source, rank, "cpu" if on_host else f"gpu{device}", tuple(keys),
                                   key_code[kept], key_index[kept], table.start_us[idx] + trace.origin_us,
                                   table.end_us[idx] + trace.origin_us, sync[kept], source, trace.host_name,
                                   dropped))
    return out


def _peer(op: str, rank: int, peers: tuple[int, int] | None) -> int | None:
    """The other rank of a point-to-point event from its (``Src Rank``, ``Dst Rank``) arguments, None when
    unknown: a send's destination, a receive's source, else whichever of the two is not this rank."""
    if peers is None:
        return None
    src, dst = peers
    if op in ("send", "isend"):
        peer = dst
    elif op in ("recv", "irecv"):
        peer = src
    else:
        peer = dst if dst != rank else src
    return peer if peer >= 0 and peer != rank else None


@dataclass(frozen=True)
class Straggler:
    """A rank's share in the waiting: keys where it arrived last and the wait it caused others there (µs)."""

    rank: int
    device: str
    source: str
    times_last: int
    wait_caused_us: float
    #: this rank's score over the sum of all ranks' scores
    share_of_wait: float
    clock_offset_us: float
    #: node, GPU, NIC, plane, leaf, PP stage, EP/DP group (with --ranks/--plan; see dsctl.cluster.Places.of)
    place: dict[str, object] | None = None


@dataclass(frozen=True)
class SkewedCollective:
    """One matched collective: label, its index on each rank, skew and the last rank."""

    label: str
    index: int
    num_ranks: int
    skew_us: float
    wait_us: float
    last_rank: int
    last_device: str


@dataclass(frozen=True)
class CriticalSegment:
    """Between two consecutive collectives: the rank that arrived last at the second and its compute gap."""

    after: str
    before: str
    rank: int
    device: str
    compute_us: float
    slack_us: float


@dataclass(frozen=True)
class CriticalRank:
    """How often, and for how long, a rank's compute set the step time."""

    rank: int
    device: str
    segments: int
    critical_us: float


@dataclass(frozen=True)
class StragglerResult:
    """``dsctl trace stragglers``."""

    num_ranks: int
    num_matched: int
    align: str
    max_clock_offset_us: float
    stragglers: list[Straggler]
    collectives: list[SkewedCollective]
    critical_ranks: list[CriticalRank]
    critical_segments: list[CriticalSegment]
    notes: list[str]
    #: matched collectives the clock offsets were fitted on (synchronising ones only)
    num_aligned: int = 0
    #: the job's size (distributedInfo.world_size) and the ranks of it that no file holds
    world_size: int | None = None
    missing_ranks: list[int] = field(default_factory=list)
    #: where the slow ranks sit and where they concentrate (with --ranks/--plan)
    placement: PlaceReport | None = None
    #: every participant's clock offset (µs, subtracted from its trace times; 0 without alignment), as
    #: ``{"rank", "device", "source", "clock_offset_us"}``: ``trace timeline`` draws on the same clock
    clock_offsets: list[dict[str, object]] = field(default_factory=list)


def _matrices(parts: Sequence[RankCollectives]) -> tuple[list[tuple[str, int]], NDArray[np.float64],
                                                          NDArray[np.float64], NDArray[np.bool_]]:
    """``(keys, start[K, P], end[K, P], sync[K])`` over the K keys seen by two or more participants, NaN where a
    participant lacks the key; ``sync[k]`` when every participant that has key k saw a synchronising collective
    there.

    Keys are numbered by sorting the ``(label, index)`` pairs (no combined integer key: a ``Seq`` near 2^63
    would overflow one); the ``K x P`` matrices are sized after keys seen by a single participant are dropped,
    and refused above :data:`MAX_MATCH_CELLS` before they are allocated.
    """
    labels: dict[str, int] = {}
    per_part: list[NDArray[np.int64]] = []
    for part in parts:
        local = np.array([labels.setdefault(k, len(labels)) for k in part.keys], dtype=np.int64)
        per_part.append(local[part.key_code] if part.key_code.size else np.zeros(0, np.int64))
    sizes = [lab.size for lab in per_part]
    all_labels = np.concatenate(per_part) if per_part else np.zeros(0, np.int64)
    all_index = np.concatenate([p.key_index for p in parts]) if parts else np.zeros(0, np.int64)
    owner = np.repeat(np.arange(len(parts), dtype=np.int64), sizes)
    if not all_labels.size:
        return [], np.zeros((0, len(parts))), np.zeros((0, len(parts))), np.zeros(0, dtype=bool)
    pairs, row = np.unique(np.stack([all_labels, all_index], axis=1), axis=0, return_inverse=True)
    row = row.reshape(-1)
    # participants per key (a participant may hold a key twice: count it once)
    seen = np.unique(np.stack([row, owner], axis=1), axis=0)
    shared = np.bincount(seen[:, 0], minlength=len(pairs)) >= 2
    num_keys = int(shared.sum())
    if num_keys * len(parts) > MAX_MATCH_CELLS:
        raise InputError(f"{num_keys:,} collectives seen on two or more of {len(parts):,} participants (rank x "
                         f"device) need a {num_keys * len(parts):,}-cell table; dsctl matches at most "
                         f"{MAX_MATCH_CELLS:,} (collectives x participants)",
                         hint="analyse one step (--step N) or fewer ranks at a time")
    new_row = np.cumsum(shared) - 1  # old key row -> row among the shared keys
    names = list(labels)
    keys = [(names[int(label)], int(k)) for label, k in pairs[shared].tolist()]
    start = np.full((num_keys, len(parts)), np.nan)
    end = np.full((num_keys, len(parts)), np.nan)
    sync = np.ones(num_keys, dtype=bool)
    at = 0
    for p, part in enumerate(parts):
        n = sizes[p]
        rows, on = row[at:at + n], shared[row[at:at + n]]
        at += n
        if not on.any():
            continue
        mine = new_row[rows[on]]
        start[mine, p] = part.start_us[on]
        end[mine, p] = part.end_us[on]
        sync[mine[~part.sync[on]]] = False
    return keys, start, end, sync


def stragglers(parts: Sequence[RankCollectives], align: str = "ends", top: int = 10,
               job: JobCheck | None = None, places: Places | None = None) -> StragglerResult:
    """Skew, straggler ranking and critical path over participants (see the module docstring); ``job`` (the
    checked set of files) adds its missing ranks to the result; ``places`` (ranks.csv + plan.json) puts every
    reported rank in its place and looks for concentrations (:mod:`dsctl.trace.place`)."""
    if align not in ALIGN_MODES:
        raise InputError(f"{align!r}: expected ends or none", field="align")
    if len(parts) < 2:
        raise InputError("straggler analysis needs the traces of at least two ranks", hint="give one file per rank")
    keys, start, end, sync = _matrices(parts)
    present = np.isfinite(start)
    if not keys:
        raise InputError("no collective appears on two or more ranks; nothing to match",
                         hint="check that the traces are from the same job and steps (--step)")
    notes: list[str] = list(job.notes) if job is not None else []
    unmatched = sum(p.num_p2p_unmatched for p in parts)
    if unmatched:
        notes.append(f"{unmatched:,} point-to-point (send/recv) events left out of the skew and the stragglers: "
                     "their traces carry no process group, peer (Src/Dst Rank) and Seq to match them by, and "
                     "matching them by order pairs different transfers")
    bases = sorted({p.basis for p in parts})
    if bases != ["gpu kernels"]:
        notes.append("collectives read from " + ", ".join(bases) + " events (host side: the trace has no GPU "
                     "communication kernels)")
    offsets = np.zeros(len(parts))
    num_sync = int(sync.sum())
    if align == "ends" and num_sync:
        offsets = _offsets(parts, end, sync)
        start, end = start - offsets, end - offsets
    elif align == "ends" and not num_sync:
        notes.append("no synchronising collective (all-reduce, all-gather, reduce-scatter, all-to-all, barrier) "
                     "matched on two ranks: clocks are used as traced")
    arrival = np.where(present, start, -np.inf)
    last = np.argmax(arrival, axis=1)
    latest = arrival[np.arange(len(keys)), last]
    earliest = np.min(np.where(present, start, np.inf), axis=1)
    wait = np.where(present, latest[:, None] - start, 0.0).sum(axis=1)
    skew = latest - earliest
    # wait caused: each key's wait is credited to the rank that arrived last there, and to no other
    score = np.bincount(last, weights=wait, minlength=len(parts)).astype(np.float64)
    count = np.bincount(last, minlength=len(parts))
    total_wait = float(score.sum())
    order = sorted(range(len(parts)), key=lambda p: (-score[p], -count[p], parts[p].rank))
    report = _placed(parts, _lateness(arrival, present), places, top) if places is not None else None

    def where(p: int) -> dict[str, object] | None:
        return places.of(parts[p].rank) if places is not None else None

    ranking = [Straggler(parts[p].rank, parts[p].device, parts[p].source, int(count[p]), round(float(score[p]), 3),
                         round(float(score[p]) / total_wait, 6) if total_wait > 0 else 0.0,
                         round(float(offsets[p]), 3), where(p))
               for p in order if score[p] > 0][:top]
    by_skew = np.argsort(-skew, kind="stable")[:top]
    collectives = [SkewedCollective(keys[k][0], keys[k][1], int(present[k].sum()), round(float(skew[k]), 3),
                                    round(float(wait[k]), 3), parts[int(last[k])].rank, parts[int(last[k])].device)
                   for k in by_skew.tolist()]
    crit_ranks, segments = _critical_path(keys, start, end, present, parts, top)
    if present.sum() < present.size:
        notes.append(f"{int(present.size - present.sum()):,} (collective, rank) pairs missing: some collectives "
                     "were not seen on every rank (different steps profiled, or dropped events)")
    return StragglerResult(len(parts), len(keys), align, round(float(np.max(np.abs(offsets))), 3), ranking,
                           collectives, crit_ranks, segments, notes, num_sync if align == "ends" else 0,
                           job.world_size if job else None, list(job.missing) if job else [], report,
                           [{"rank": part.rank, "device": part.device, "source": part.source,
                             "clock_offset_us": round(float(offsets[p]), 3)} for p, part in enumerate(parts)])


def _placed(parts: Sequence[RankCollectives], score: NDArray[np.float64], places: Places,
            top: int) -> PlaceReport:
    """Scores summed per rank (a rank's devices together), then :func:`dsctl.trace.place.locate`."""
    ranks = np.array([p.rank for p in parts], dtype=np.int64)
    outside = ranks[ranks >= places.world_size]
    if outside.size:
        raise InputError(f": the rank map has {places.world_size:,} ranks but the traces hold rank "
                         f"{int(outside[0]):,}", field="ranks",
                         hint="give the ranks.csv of the job that wrote these traces")
    unique, inverse = np.unique(ranks, return_inverse=True)
    summed = np.bincount(inverse, weights=score, minlength=unique.size).astype(np.float64)
    return locate(unique.tolist(), summed, places, top)


def _offsets(parts: Sequence[RankCollectives], end: NDArray[np.float64],
             sync: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Each participant's clock offset (µs, shape ``(P,)``) from the ends of the synchronising keys (see the
    module docstring); zeros when every participant reads one clock."""
    clock = _clocks(parts)
    if int(clock.max()) == 0:
        return np.zeros(len(parts))
    with np.errstate(all="ignore"):
        diff = end[sync] - np.nanmedian(end[sync], axis=1, keepdims=True)
        per_clock = np.array([np.nanmedian(diff[:, clock == c]) for c in range(int(clock.max()) + 1)])
    return np.nan_to_num(per_clock[clock])


def clock_offsets(parts: Sequence[RankCollectives]) -> NDArray[np.float64] | None:
    """The clock offsets :func:`stragglers` subtracts with ``align="ends"`` (µs, one per participant), or None
    when no synchronising collective is matched on two participants (then the clocks cannot be aligned)."""
    if len(parts) < 2:
        return None
    keys, _start, end, sync = _matrices(parts)
    if not keys or not sync.any():
        return None
    return _offsets(parts, end, sync)


def _clocks(parts: Sequence[RankCollectives]) -> NDArray[np.int64]:
    """Clock index of each participant: one per ``host`` (processes of one host read one system clock), one per
    participant whose trace names no host."""
    index: dict[str, int] = {}
    out = np.empty(len(parts), dtype=np.int64)
    for p, part in enumerate(parts):
        key = f"host {part.host}" if part.host else f"file {p}"
        out[p] = index.setdefault(key, len(index))
    return out


def _lateness(arrival: NDArray[np.float64], present: NDArray[np.bool_]) -> NDArray[np.float64]:
    """How late each participant was, summed over keys (shape ``(P,)``, µs): per key ``sum_o max(0, a_r - a_o)``
    over the ranks o that arrived before it (with arrivals sorted, ``j * a_j - (a_0 + ... + a_{j-1})``).

    Not the wait it caused (only the last rank made the others wait, see ``wait_caused_us``), but a score on
    every rank, for :mod:`dsctl.trace.place`: a slow group of 32 ranks is late at every key even though one of
    them is last.
    """
    _k, p = arrival.shape
    order = np.argsort(arrival, axis=1, kind="stable")  # missing (-inf) first
    present_sorted = np.take_along_axis(present, order, axis=1)
    vals = np.where(present_sorted, np.take_along_axis(arrival, order, axis=1), 0.0)
    j = np.cumsum(present_sorted, axis=1) - 1  # index among the present ones
    before = np.cumsum(vals, axis=1) - vals
    blame = np.where(present_sorted & (j >= 1), j * vals - before, 0.0)
    return np.bincount(order.ravel(), weights=np.maximum(blame, 0.0).ravel(), minlength=p).astype(np.float64)


def _critical_path(keys: list[tuple[str, int]], start: NDArray[np.float64], end: NDArray[np.float64],
                   present: NDArray[np.bool_], parts: Sequence[RankCollectives],
                   top: int) -> tuple[list[CriticalRank], list[CriticalSegment]]:
    with np.errstate(all="ignore"):
        order = np.argsort(np.nanmedian(np.where(present, start, np.nan), axis=1), kind="stable")
    s, e, ok = start[order], end[order], present[order]
    if len(order) < 2:
        return [], []
    a_end, b_start = e[:-1], s[1:]
    both = ok[:-1] & ok[1:]
    arrive = np.where(both, b_start, -np.inf)
    crit = np.argmax(arrive, axis=1)
    rows = np.arange(crit.size)
    valid = both[rows, crit]
    gap = np.maximum(b_start[rows, crit] - a_end[rows, crit], 0.0)
    second = np.partition(arrive, -2, axis=1)[:, -2] if arrive.shape[1] >= 2 else arrive[:, 0]
    slack = np.where(np.isfinite(second), arrive[rows, crit] - second, 0.0)
    gap = np.where(valid, gap, 0.0)
    per = np.bincount(crit[valid], weights=gap[valid], minlength=len(parts))
    num = np.bincount(crit[valid], minlength=len(parts))
    ranks = [CriticalRank(parts[p].rank, parts[p].device, int(num[p]), round(float(per[p]), 3))
             for p in sorted(range(len(parts)), key=lambda p: (-per[p], parts[p].rank)) if num[p] > 0][:top]
    pick = [i for i in np.argsort(-np.where(valid, slack, -1.0), kind="stable").tolist() if valid[i]][:top]
    names = [f"{keys[k][0]}#{keys[k][1]}" for k in order.tolist()]
    seg = [CriticalSegment(names[i], names[i + 1], parts[int(crit[i])].rank, parts[int(crit[i])].device,
                           round(float(gap[i]), 3), round(float(slack[i]), 3)) for i in pick]
    return ranks, seg
