"""Event simulation of per-rank programs: when each op starts and ends.

Two timing models (dualpipe-facts.md §5):

- ``ideal``: each rank runs its ops in order; an op starts at max(rank free, end of the ops it needs). Sends
  never block and take no time. This is the model of the DualPipe README figures and formulas.
- ``commit`` (the CLI's ``batched``): the reference code's p2p pattern. Before every compute op the rank issues
  its queued sends and receives as one batch and waits until every receive in it has had its matching send
  issued; a send is issued at the sender's next commit.

Both run in O(number of ops + instructions): a rank that has to wait is parked on the one data item it waits
for and woken when that item is produced (ideal) or sent (commit).
"""

from __future__ import annotations

from dataclasses import dataclass

from dsctl.launch.schedule.costs import OpCosts
from dsctl.launch.schedule.geometry import Geometry
from dsctl.launch.schedule.ops import Op
from dsctl.launch.schedule.program import COMMIT, OP, RECV, SEND, RankProgram


@dataclass(frozen=True)
class Timing:
    """Start and end time of every op, per rank (same order as the programs' ops)."""

    starts: list[list[float]]
    ends: list[list[float]]


def _op_deps(geometry: Geometry, rank: int, op: Op) -> tuple[list[int], list[int]]:
    """(data items ``op`` needs, data items it produces) as ``Geometry.key`` ids."""
    needs: list[int] = []
    makes: list[int] = []
    last = geometry.num_stages - 1
    if op.fwd is not None and op.kind in ("F", "FB"):
        d, m = op.fwd
        chain, s = geometry.chain(d, m), geometry.stage(rank, d)
        if s > 0:
            needs.append(geometry.key(False, chain, s - 1))
        makes.append(geometry.key(False, chain, s))
    if op.bwd is not None and op.kind in ("B", "I", "FB"):
        d, m = op.bwd
        chain, s = geometry.chain(d, m), geometry.stage(rank, d)
        needs.append(geometry.key(True, chain, s + 1) if s < last else geometry.key(False, chain, s))
        makes.append(geometry.key(True, chain, s))
    return needs, makes


def _deadlock(kind: str, programs: list[RankProgram], positions: list[int]) -> RuntimeError:
    stuck = [f"rank {p.rank} at step {pos}" for p, pos in zip(programs, positions, strict=True)
             if pos < (len(p.instructions) if kind == "commit" else len(p.ops))]
    return RuntimeError(f"schedule deadlocks under the {kind} model ({', '.join(stuck)}); generator bug")


def simulate_ideal(programs: list[RankProgram], costs: OpCosts) -> Timing:
    """Ideal model: start = max(rank free, dependency ends)."""
    durations = {kind: costs.duration(kind) for kind in ("F", "B", "I", "W", "FB")}
    return simulate_ideal_timed(programs, [[durations[op.kind] for op in p.ops] for p in programs])


def op_dependencies(programs: list[RankProgram]) -> list[list[tuple[list[int], list[int]]]]:
    """Per rank and op: (data items it needs, data items it produces), as :func:`_op_deps` gives them, with the
    key arithmetic of ``Geometry.key`` inlined (a layout search builds these for thousands of ops); reusable
    across timings."""
    geometry = programs[0].geometry
    stages, chains = geometry.num_stages, geometry.num_chains
    last = stages - 1
    backward_base = chains * stages
    out = []
    for p in programs:
        stage_of = [geometry.stage(p.rank, d) for d in range(max(2, geometry.num_directions))]
        row = []
        for op in p.ops:
            needs: list[int] = []
            makes: list[int] = []
            kind = op.kind
            if op.fwd is not None and (kind == "F" or kind == "FB"):
                d, m = op.fwd
                s = stage_of[d]
                base = geometry.chain(d, m) * stages
                if s > 0:
                    needs.append(base + s - 1)
                makes.append(base + s)
            if op.bwd is not None and kind != "F" and kind != "W":
                d, m = op.bwd
                s = stage_of[d]
                base = geometry.chain(d, m) * stages
                needs.append(backward_base + base + s + 1 if s < last else base + s)
                makes.append(backward_base + base + s)
            row.append((needs, makes))
        out.append(row)
    return out


def simulate_ideal_timed(programs: list[RankProgram], op_seconds: list[list[float]],
                         transfer: float = 0.0,
                         deps: list[list[tuple[list[int], list[int]]]] | None = None) -> Timing:
    """Ideal model with a duration per op (``op_seconds[r][i]`` for ``programs[r].ops[i]``) and a p2p delay.

    ``transfer`` (same unit) is added to a dependency produced on another rank: the send's latency plus its
    bytes over the link. Data a rank produces for itself (the loss at the last stage, DualPipeV's turn) is
    ready at once.
    """
    geometry = programs[0].geometry
    done = [-1.0] * geometry.num_keys
    maker = [-1] * geometry.num_keys
    if deps is None:
        deps = op_dependencies(programs)
    starts: list[list[float]] = [[] for _ in programs]
    ends: list[list[float]] = [[] for _ in programs]
    clock = [0.0] * len(programs)
    position = [0] * len(programs)
    waiting: dict[int, list[int]] = {}
    ready = list(range(len(programs)))
    while ready:
        r = ready.pop()
        ops, rank_deps, seconds = programs[r].ops, deps[r], op_seconds[r]
        while position[r] < len(ops):
            i = position[r]
            needs, makes = rank_deps[i]
            start = clock[r]
            blocked = False
            for key in needs:
                t = done[key]
                if t < 0:
                    waiting.setdefault(key, []).append(r)
                    blocked = True
                    break
                start = max(start, t + (transfer if maker[key] != r else 0.0))
            if blocked:
                break
            end = start + seconds[i]
            starts[r].append(start)
            ends[r].append(end)
            clock[r] = end
            position[r] = i + 1
            for key in makes:
                done[key] = end
                maker[key] = r
                ready.extend(waiting.pop(key, ()))
    if any(position[r] < len(p.ops) for r, p in enumerate(programs)):
        raise _deadlock("ideal", programs, position)
    return Timing(starts, ends)


@dataclass(frozen=True)
class IdealPlan:
    """The ideal model's work for one schedule shape, whatever the op durations: every op in an order that runs
    each after the ops it needs (``order``: rank, index in its program, the data items it needs with whether
    another rank made them, the items it makes), so a timing is one pass without parking ranks."""

    num_keys: int
    ops_per_rank: tuple[int, ...]
    order: tuple[tuple[int, int, tuple[tuple[int, bool], ...], tuple[int, ...]], ...]


def plan_ideal(programs: list[RankProgram],
               deps: list[list[tuple[list[int], list[int]]]] | None = None) -> IdealPlan | None:
    """:class:`IdealPlan` of ``programs`` (:func:`simulate_ideal_timed`'s walk, recorded); None when a data item
    has two makers (its reader's time would depend on the walk; never in the generated schedules)."""
    geometry = programs[0].geometry
    if deps is None:
        deps = op_dependencies(programs)
    maker = [-1] * geometry.num_keys
    position = [0] * len(programs)
    waiting: dict[int, list[int]] = {}
    ready = list(range(len(programs)))
    walk: list[tuple[int, int]] = []
    while ready:
        r = ready.pop()
        rank_deps = deps[r]
        while position[r] < len(rank_deps):
            i = position[r]
            needs, makes = rank_deps[i]
            missing = next((key for key in needs if maker[key] < 0), None)
            if missing is not None:
                waiting.setdefault(missing, []).append(r)
                break
            walk.append((r, i))
            position[r] = i + 1
            for key in makes:
                if maker[key] >= 0:
                    return None
                maker[key] = r
                ready.extend(waiting.pop(key, ()))
    if any(position[r] < len(p.ops) for r, p in enumerate(programs)):
        raise _deadlock("ideal", programs, position)
    return IdealPlan(geometry.num_keys, tuple(len(p.ops) for p in programs),
                     tuple((r, i, tuple((key, maker[key] != r) for key in deps[r][i][0]), tuple(deps[r][i][1]))
                           for r, i in walk))


def simulate_planned(plan: IdealPlan, op_seconds: list[list[float]], transfer: float = 0.0) -> Timing:
    """:func:`simulate_ideal_timed` over a :class:`IdealPlan` (the same start and end of every op: each is the
    largest of its rank's clock and its inputs' ends, plus ``transfer`` for one made on another rank)."""
    done = [0.0] * plan.num_keys
    starts = [[0.0] * n for n in plan.ops_per_rank]
    ends = [[0.0] * n for n in plan.ops_per_rank]
    clock = [0.0] * len(plan.ops_per_rank)
    for r, i, needs, makes in plan.order:
        start = clock[r]
        for key, crossed in needs:
            t = done[key] + transfer if crossed else done[key]
            if t > start:  # max(start, t), which keeps start on a tie
                start = t
        end = start + op_seconds[r][i]
        starts[r][i] = start
        ends[r][i] = end
        clock[r] = end
        for key in makes:
            done[key] = end
    return Timing(starts, ends)


def simulate_commit(programs: list[RankProgram], costs: OpCosts) -> Timing:
    """Batched-p2p model of the reference code (needs programs with instructions)."""
    geometry = programs[0].geometry
    sent = [-1.0] * geometry.num_keys
    durations = {kind: costs.duration(kind) for kind in ("F", "B", "I", "W", "FB")}
    num_ranks = len(programs)
    starts: list[list[float]] = [[] for _ in programs]
    ends: list[list[float]] = [[] for _ in programs]
    clock = [0.0] * num_ranks
    position = [0] * num_ranks
    sends: list[list[int]] = [[] for _ in programs]
    recvs: list[list[int]] = [[] for _ in programs]
    issued = [False] * num_ranks  # the current batch's sends are out; waiting on its receives
    waiting: dict[int, list[int]] = {}
    ready = list(range(num_ranks))
    while ready:
        r = ready.pop()
        program = programs[r].instructions
        while position[r] < len(program):
            code, value = program[position[r]]
            if code == RECV:
                recvs[r].append(value)
            elif code == SEND:
                sends[r].append(value)
            elif code == COMMIT:
                if not issued[r]:
                    for key in sends[r]:
                        sent[key] = clock[r]
                        ready.extend(waiting.pop(key, ()))
                    sends[r].clear()
                    issued[r] = True
                missing = next((key for key in recvs[r] if sent[key] < 0), None)
                if missing is not None:
                    waiting.setdefault(missing, []).append(r)
                    break
                clock[r] = max([clock[r], *(sent[key] for key in recvs[r])])
                recvs[r].clear()
                issued[r] = False
            elif code == OP:
                start = clock[r]
                clock[r] = start + durations[programs[r].ops[value].kind]
                starts[r].append(start)
                ends[r].append(clock[r])
            position[r] += 1
    if any(position[r] < len(p.instructions) for r, p in enumerate(programs)):
        raise _deadlock("commit", programs, position)
    return Timing(starts, ends)
