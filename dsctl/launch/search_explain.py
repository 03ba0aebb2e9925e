"""Stage 6 of the layout search (``dsctl.launch.search``): the top few layouts side by side, why each lost to the
winner (the phase of the step that grew most, in predicted seconds), and one line per rejected family."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from dsctl.launch.trials import REJECTION_KINDS, Rejected, SearchResult, Trial
from dsctl.steptime import StepTime

#: layouts shown side by side
TOP = 5
#: what the search does not try, and what the models lack for it (printed with every searched plan)
SCOPE = ("ZeRO-2's and ZeRO-3's gradient reduce-scatter runs after every micro-batch (a pipeline accumulates "
         "gradients) and is counted exposed; ZeRO-3's per-layer parameter gathers share the NIC with the EP "
         "all-to-all (added to its seconds: an upper bound); interleaved 1F1B with 2 chunks per rank only; "
         "tp > 1 is Megatron's with sequence parallelism inside a node, experts not tensor-parallel, its NVLink "
         "all-gathers and reduce-scatters counted exposed")


@dataclass(frozen=True)
class CandidateRow:
    """One ranked layout: predicted step (s), tokens/day, MFU (non-causal), worst GPU memory and headroom (bytes),
    EP all-to-all seconds per MoE layer (dispatch + combine, forward), and why it lost ("" for the winner)."""

    rank: int
    label: str
    step_s: float
    tokens_per_day: float
    mfu: float
    bubble_s: float
    memory_bytes: int
    headroom_bytes: int
    ep_a2a_s: float
    why_lost: str
    recipe: str = ""

    def to_data(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in CandidateRow.__dataclass_fields__}


@dataclass(frozen=True)
class FamilyLine:
    """Every rejected combination of one ``kind``: how many, the schedules and degrees they span, one reason
    (the closest miss for memory, else the first rule broken)."""

    kind: str
    count: int
    schedules: tuple[str, ...]
    pps: tuple[int, ...]
    eps: tuple[int, ...]
    example: str

    def text(self) -> str:
        return (f"{self.kind}: {self.count} ({'/'.join(self.schedules)}; pp {_span(self.pps)}, ep "
                f"{_span(self.eps)}); {self.example}")

    def to_data(self) -> dict[str, Any]:
        return {"kind": self.kind, "count": self.count, "schedules": list(self.schedules), "pps": list(self.pps),
                "eps": list(self.eps), "example": self.example}


@dataclass(frozen=True)
class SearchExplanation:
    """What the plan prints about its search: counts, the objective, the top rows and the rejected families."""

    objective: str
    num_evaluated: int
    num_fitting: int
    #: fitting layouts simulated (the rest were dominated or outpaced: never faster, or unable to reach the top)
    num_predicted: int
    rows: tuple[CandidateRow, ...]
    families: tuple[FamilyLine, ...]
    scope: str

    def to_data(self) -> dict[str, Any]:
        return {"objective": self.objective, "num_evaluated": self.num_evaluated, "num_fitting": self.num_fitting,
                "num_predicted": self.num_predicted,
                "candidates": [r.to_data() for r in self.rows], "rejected": [f.to_data() for f in self.families],
                "scope": self.scope}


def _span(values: tuple[int, ...]) -> str:
    return str(values[0]) if len(values) == 1 else f"{values[0]}-{values[-1]}"


def _phases(step: StepTime) -> dict[str, float]:
    b = step.breakdown
    return {"compute": b.one_f_s + b.one_b_s + b.one_w_s, "F&B": b.overlapped_fb_s,
            "bubble": b.bubble_s, "optimizer": b.optimizer_s}


def why_lost(trial: Trial, best: Trial) -> str:
    """``+0.41 s, bubble +0.52`` (seconds: the step, and the phase that grew most) and the EP all-to-all per MoE
    layer (dispatch + combine, forward, ms) when it differs."""
    (memory, step), (best_memory, best_step) = trial.predicted(), best.predicted()
    if step.step_s < best_step.step_s:  # ranked by headroom: it lost on memory
        return (f"{(best_step.step_s - step.step_s):.2f} s faster but {memory.headroom_bytes / 2**30:.1f} GiB free "
                f"vs {best_memory.headroom_bytes / 2**30:.1f}")
    mine, theirs = _phases(step), _phases(best_step)
    phase = max(mine, key=lambda k: mine[k] - theirs[k])
    text = f"+{step.step_s - best_step.step_s:.2f} s, {phase} {mine[phase] - theirs[phase]:+.2f}"
    a2a, a2a_best = _a2a(step), _a2a(best_step)
    if abs(a2a - a2a_best) > 1e-4:
        text += f"; a2a {a2a * 1e3:.1f} vs {a2a_best * 1e3:.1f} ms"
    return text


def _a2a(step: StepTime) -> float:
    return step.ep_dispatch_s + step.ep_combine_s


def _row(index: int, trial: Trial, best: Trial, with_recipe: bool) -> CandidateRow:
    memory, step = trial.predicted()
    return CandidateRow(index + 1, trial.label(with_recipe), step.step_s, step.tokens_per_day, step.mfu_noncausal,
                        step.max_bubble_s, memory.max_total_bytes, memory.headroom_bytes, _a2a(step),
                        "" if trial is best else why_lost(trial, best), trial.recipe.name)


def _families(rejected: tuple[Rejected, ...], with_recipe: bool) -> tuple[FamilyLine, ...]:
    groups: dict[str, list[Rejected]] = defaultdict(list)
    for r in rejected:
        groups[r.kind].append(r)
    lines = []
    for kind in REJECTION_KINDS:
        items = groups.get(kind)
        if not items:
            continue
        example = min(items, key=lambda r: r.memory_bytes or 0) if kind == "memory" else items[0]
        tp = f" TP{example.tp}" if example.tp > 1 else ""
        where = f"PP{example.pp} EP{example.ep}{tp} {example.schedule} b{example.micro_batch_size}"
        where += f" {example.recipe}" if with_recipe and kind in ("memory", "step-time model") else ""
        where += f" ZeRO-{example.zero_stage}" if example.zero_stage != 1 and kind != "dominated" else ""
        reason = example.reason.split(" (")[0]
        lines.append(FamilyLine(kind, len(items), tuple(sorted({r.schedule for r in items})),
                                tuple(sorted({r.pp for r in items})), tuple(sorted({r.ep for r in items})),
                                f"closest {where} {reason}" if kind == "memory" else f"e.g. {where}: {reason}"))
    return tuple(lines)


def explain_search(result: SearchResult, top: int = TOP) -> SearchExplanation:
    """The top ``top`` rows (winner first) and the rejected families of ``result``."""
    best = result.best
    with_recipe = len(result.space.recipes) > 1
    rows = tuple(_row(i, t, best, with_recipe) for i, t in enumerate(result.ranked[:top])) if best else ()
    tps = result.space.tps
    why = "as given" if result.space.tp_given else "only (the one the node and the heads allow)"
    scope = SCOPE if len(tps) != 1 else SCOPE.replace("tp > 1 is", f"tp {tps[0]} {why}; tp > 1 is")
    unsimulated = sum(r.kind in ("dominated", "outpaced") for r in result.rejected)
    return SearchExplanation(result.objective, result.num_evaluated, len(result.ranked) + unsimulated,
                             len(result.ranked), rows,
                             _families(result.rejected, with_recipe), scope)


def choice_lines(result: SearchResult, explanation: SearchExplanation) -> list[str]:
    """The "why this layout" lines of a searched plan."""
    best = result.best
    if best is None:
        unpredicted = sum(r.kind == "step-time model" for r in result.rejected)
        if unpredicted:
            return [f"searched {result.num_evaluated:,} layouts: {unpredicted} fit but none could be predicted "
                    "(step-time model); the memory rule chose instead"]
        lines = [f"searched {result.num_evaluated:,} layouts: none fits in usable HBM; the memory rule "
                 "chose the closest instead"]
        for other in result.alternatives:
            memory, step = other.predicted()
            lines.append(f"recipe {other.recipe.name} fits at PP{other.layout.pp}: {step.step_s:.2f} s "
                         f"({other.label()}, worst GPU {memory.max_total_bytes / 2**30:.1f} GiB; --recipe "
                         f"{other.recipe.name})")
        if result.space.recipes and not result.alternatives:
            lines.append(f"no other recipe fits either (tried every one {result.space.recipes[0].name} can be "
                         "swapped for)")
        return lines
    memory, step = best.predicted()
    space = result.space
    recipes = "/".join(r.name for r in space.recipes)
    lines = [f"searched {result.num_evaluated:,} layouts ((pp, tp) x ep x schedule x micro-batch size x ZeRO x "
             f"recipe: {len(space.pp_tps)} x {len(space.eps)} x {len(space.schedules)} x "
             f"{len(space.micro_batch_sizes)} x {len(space.zero_stages)} x {len(space.recipes)}; tp "
             f"{'/'.join(str(t) for t in space.tps)}); {explanation.num_fitting} fit, "
             f"{explanation.num_predicted} simulated (the rest never faster or unable to reach the top five)",
             f"{best.label()}, recipe {best.recipe.name}: the {_objective_words(result.objective)}, predicted step "
             f"{step.step_s:.2f} s, worst GPU {memory.max_total_bytes / 2**30:.1f} GiB",
             f"recipe {'searched: ' + recipes if len(space.recipes) > 1 else best.recipe.name + ' as given'}",
             *tp_lines(result), explanation.scope]
    return lines


def tp_lines(result: SearchResult) -> list[str]:
    """One line per tensor-parallel degree the winner does not use: its best predicted layout and what it lost
    by (the step, and its exposed NVLink collectives), else why none of its layouts was predicted."""
    best = result.best
    if best is None or len(result.space.tps) < 2:
        return []
    _, best_step = best.predicted()
    lines = []
    for tp in result.space.tps:
        if tp == best.layout.tp:
            continue
        trial = next((t for t in result.ranked if t.layout.tp == tp), None)
        if trial is not None:
            step = trial.predicted()[1]
            collectives = sum(x.tp_f_s + x.tp_b_s for x in step.layers[-1:])
            lines.append(f"tp {tp}: best {trial.label()} {step.step_s:.2f} s ({step.step_s - best_step.step_s:+.2f} "
                         "s)" + (f"; its NVLink all-gathers + reduce-scatters {collectives * 1e3:.1f} ms per layer "
                                 "and micro-batch, exposed" if tp > 1 else ""))
            continue
        rejected = [r for r in result.rejected if r.tp == tp]
        kinds = sorted({r.kind for r in rejected}, key=REJECTION_KINDS.index)
        example = next((r for r in rejected if r.kind == "outpaced"), rejected[0] if rejected else None)
        lines.append(f"tp {tp}: none predicted ({', '.join(kinds) or 'no layout'})"
                     + (f"; e.g. PP{example.pp} EP{example.ep} TP{tp} {example.schedule}: {example.reason}"
                        if example is not None else ""))
    return lines


def _objective_words(objective: str) -> str:
    return {"fastest": "fastest that fits", "headroom": "most headroom within 10% of the fastest",
            "fewest-nodes": "fastest that fits at the fewest nodes"}.get(objective, objective)
