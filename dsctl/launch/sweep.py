"""``dsctl launch --nodes LOW-HIGH``: the layout search at several node counts, answering "how many nodes for this
token budget by this deadline, at what cost".

Counts tried: ``LOW``, ``HIGH`` and every ``2^k`` and ``3 x 2^(k-1)`` between them (128-512: 128, 192, 256, 384,
512), at most :data:`MAX_SWEEP_COUNTS`. Each count runs :func:`dsctl.launch.search.search_layouts` and keeps its
best layout. With ``tokens`` each row says the days (``tokens / tokens_per_day``), GPU hours and cost; with
``within_days`` whether it meets that deadline. The chosen count: ``fewest-nodes`` the smallest that fits (and
meets the deadline); otherwise the one with the most tokens per day (among those meeting the deadline).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from dsctl.errors import InputError
from dsctl.launch.candidates import PlanInputs
from dsctl.launch.memory import MemoryAssumptions
from dsctl.launch.ranking import search_layouts
from dsctl.launch.request import LaunchRequest, check_node_count
from dsctl.launch.search import SearchOptions, search_request
from dsctl.launch.trials import SearchResult
from dsctl.model.params import count_parameters
from dsctl.profiles.schema import ModelProfile, NodeProfile
from dsctl.progress_count import Report, Stages

#: a search with the inputs and options it ran on (what ``plan_launch``'s ``presearched`` takes)
Searched = tuple[PlanInputs, SearchOptions, SearchResult]

if TYPE_CHECKING:
    from dsctl.launch.plan import LaunchPlan

#: node counts one sweep evaluates at most (each a full layout search, ~1-2 s)
MAX_SWEEP_COUNTS = 12


def sweep_counts(low: int, high: int) -> tuple[int, ...]:
    """``low``, ``high`` and the powers of two and their 1.5 multiples between them, increasing; InputError when
    the range is empty or would need more than :data:`MAX_SWEEP_COUNTS` counts."""
    check_node_count(low)
    check_node_count(high)
    if low > high:
        raise InputError(f"{low}-{high}: the range is empty (the first count must not exceed the second)",
                         field="nodes")
    counts = {low, high}
    k = 1
    while k <= high:
        counts.update(c for c in (k, 3 * k // 2) if low <= c <= high and c >= 1)
        k *= 2
    ordered = tuple(sorted(counts))
    if len(ordered) > MAX_SWEEP_COUNTS:
        raise InputError(f"{low}-{high} spans {len(ordered)} node counts; a sweep evaluates at most "
                         f"{MAX_SWEEP_COUNTS}", field="nodes",
                         hint="narrow the range (e.g. a factor of 8 between its ends)")
    return ordered


@dataclass(frozen=True)
class SweepRow:
    """One node count: its best layout (``label``, ``""`` when none fits), predicted step and throughput, and with
    a token budget the days, GPU hours and cost (USD) it takes; ``meets_deadline`` None without a deadline."""

    num_nodes: int
    label: str
    step_s: float | None
    tokens_per_day: float | None
    days: float | None
    gpu_hours: float | None
    cost_usd: float | None
    meets_deadline: bool | None

    def to_data(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in SweepRow.__dataclass_fields__}


@dataclass(frozen=True)
class NodeSweep:
    """Every count's row, the budget asked about and the count chosen (None: no count fits / meets it)."""

    rows: tuple[SweepRow, ...]
    tokens: float | None
    within_days: float | None
    gpu_hour_usd: float
    objective: str
    chosen_nodes: int | None
    reason: str

    def to_data(self) -> dict[str, Any]:
        return {"rows": [r.to_data() for r in self.rows], "tokens": self.tokens, "within_days": self.within_days,
                "gpu_hour_usd": self.gpu_hour_usd, "objective": self.objective, "chosen_nodes": self.chosen_nodes,
                "reason": self.reason}


def _row(model: ModelProfile, node: NodeProfile, request: LaunchRequest, options: SearchOptions, count: int,
         tokens: float | None, within_days: float | None, gpu_hour_usd: float, report: Report | None = None
         ) -> tuple[SweepRow, Searched]:
    """The count's row, and its search with what it was run on."""
    inputs = PlanInputs(model, node, replace(request, num_nodes=count), count_parameters(model), MemoryAssumptions())
    result = search_layouts(inputs, options, report)
    searched = (inputs, options, result)
    best = result.best
    if best is None:
        return SweepRow(count, "", None, None, None, None, None, False if within_days is not None else None), searched
    step = best.predicted()[1]
    days = hours = cost = None
    if tokens:
        days = tokens / step.tokens_per_day
        hours = step.gpu_hours(tokens)
        cost = hours * gpu_hour_usd
    meets = None if within_days is None or days is None else days <= within_days
    return SweepRow(count, best.label(), step.step_s, step.tokens_per_day, days, hours, cost, meets), searched


def plan_node_range(model: ModelProfile, node: NodeProfile, request: LaunchRequest, options: SearchOptions,
                    low: int, high: int, tokens: float | None, within_days: float | None, gpu_hour_usd: float,
                    progress: Report | None = None, **plan_options: Any) -> LaunchPlan:
    """``--nodes LOW-HIGH``: sweep the counts (:func:`sweep_nodes`), then the full plan of the chosen count (the
    largest when none is chosen) with the sweep attached; ``plan_options`` go to :func:`plan_launch`.
    ``progress(done, total)``: one unit per count searched and one for the final plan, each counted within."""
    from dsctl.launch.plan import plan_launch

    swept = replace(options, balancedness=plan_options.get("balancedness", options.balancedness),
                    fabric_plan=plan_options.get("fabric_plan", options.fabric_plan))
    counts = sweep_counts(low, high)
    stages = Stages(progress, [len(counts), 1])
    searches: dict[int, Searched] = {}
    sweep = sweep_nodes(model, node, request, swept, counts, tokens, within_days, gpu_hour_usd, stages.part(0),
                        searches)
    chosen = replace(request, num_nodes=sweep.chosen_nodes or high)
    # the chosen count's search is the sweep's (plan_launch runs it again only if its inputs differ)
    plan = plan_launch(model, node, chosen, tokens=tokens, gpu_hour_usd=gpu_hour_usd, search=options,
                       progress=stages.part(1), presearched=searches.get(chosen.num_nodes), **plan_options)
    stages.finish()
    return replace(plan, sweep=sweep)


def sweep_nodes(model: ModelProfile, node: NodeProfile, request: LaunchRequest, options: SearchOptions,
                counts: tuple[int, ...], tokens: float | None = None, within_days: float | None = None,
                gpu_hour_usd: float = 2.0, report: Report | None = None,
                searches: dict[int, Searched] | None = None) -> NodeSweep:
    """Search every count of ``counts`` (``request.num_nodes`` is ignored) and choose one (module docstring).
    ``report(done, len(counts))`` counts the node counts searched, each counted within (its layouts predicted);
    ``searches`` receives each count's search with its inputs and options."""
    if within_days is not None and not tokens:
        raise InputError("needs {tokens}: the deadline is for training that many tokens", field="within_days",
                         mentions=("tokens",))
    request = search_request(request, options).checked(model, node.num_gpus)
    stages = Stages(report, [1.0] * len(counts))
    rows_searched = [_row(model, node, request, options, c, tokens, within_days, gpu_hour_usd, stages.part(i))
                     for i, c in enumerate(counts)]
    rows = tuple(row for row, _ in rows_searched)
    if searches is not None:
        searches.update((row.num_nodes, searched) for row, searched in rows_searched)
    stages.finish()
    usable = [r for r in rows if r.step_s is not None and r.meets_deadline is not False]
    if not usable:
        why = (f"no count from {counts[0]} to {counts[-1]} finishes {tokens / 1e12:,.4g}T tokens within "
               f"{within_days:g} days" if within_days is not None and tokens else
               f"no count from {counts[0]} to {counts[-1]} has a layout that fits")
        return NodeSweep(rows, tokens, within_days, gpu_hour_usd, options.objective, None, why)
    if options.objective == "fewest-nodes":
        chosen = min(usable, key=lambda r: r.num_nodes)
        why = "the fewest nodes with a layout that fits" + (
            f" and finishes within {within_days:g} days" if within_days is not None else "")
    else:
        chosen = max(usable, key=lambda r: (r.tokens_per_day or 0.0, -r.num_nodes))
        why = "the most tokens per day" + (f" among counts finishing within {within_days:g} days"
                                           if within_days is not None else "")
    return NodeSweep(rows, tokens, within_days, gpu_hour_usd, options.objective, chosen.num_nodes,
                     f"{chosen.num_nodes} nodes: {why}")
