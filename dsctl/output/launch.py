"""Table views of ``dsctl launch`` (the plan) and ``dsctl launch layout``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from dsctl.launch.layout_report import LayoutReport
from dsctl.launch.memory import MEMORY_TERMS, MemoryEstimate, RankMemory
from dsctl.launch.plan import LaunchPlan, StageRow
from dsctl.launch.rankmap import RankMapSummary, compact_ranks
from dsctl.launch.search_explain import SearchExplanation
from dsctl.launch.sweep import NodeSweep
from dsctl.output.registry import table_renderer
from dsctl.steptime import StageCost, StepTime
from dsctl.units import GIB, format_gib, human_bytes

_EXPLAIN_ROWS = 4


def _params(n: int) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e8 else f"{n / 1e6:.1f}M"


def _gib(n: float) -> str:
    return format_gib(n, unit=False)


def _layout_table(plan: LaunchPlan) -> Table:
    table = Table(title=f"Layout: {plan.model} on {plan.num_nodes:,} x {plan.node_profile} "
                        f"({plan.world_size:,} GPUs)", title_justify="left")
    for col in ("PP", "EP", "TP", "DP", "expert-DP", "ZeRO", "schedule", "stages"):
        table.add_column(col, justify="right")
    lay = plan.layout
    table.add_row(str(lay.pp), str(lay.ep), str(lay.tp), str(lay.dp), str(plan.expert_dp), str(plan.zero_stage),
                  plan.schedule, str(plan.num_stages))
    return table


def _bullets(title: str, lines: Iterable[str]) -> Text:
    text = Text(title + "\n", style="bold")
    for line in lines:
        text.append(f"  - {line}\n", style="")
    return text


def _stage_table(stages: Iterable[StageRow]) -> Table:
    table = Table(title="Stages", title_justify="left")
    for col in ("stage", "contents", "pp ranks", "params/GPU", "routed/GPU"):
        table.add_column(col, justify="left" if col == "contents" else "right")
    for s in stages:
        table.add_row(str(s.stage), s.contents, ", ".join(str(r) for r in s.pp_ranks),
                      _params(s.params_per_gpu), _params(s.routed_expert_params_per_gpu))
    return table


def _memory_columns(memory: MemoryEstimate) -> list[list[RankMemory]]:
    """Pipeline ranks grouped by equal memory (neighbours only); at most 4 groups shown: the first, the worst,
    the last and the one after the first."""
    groups: list[list[RankMemory]] = []
    for row in memory.per_rank:
        key = tuple(getattr(row, name) for name, _ in MEMORY_TERMS)
        if groups and tuple(getattr(groups[-1][-1], name) for name, _ in MEMORY_TERMS) == key:
            groups[-1].append(row)
        else:
            groups.append([row])
    if len(groups) <= 4:
        return groups
    worst = next(i for i, g in enumerate(groups) if memory.worst in g)
    keep = sorted({0, 1, worst, len(groups) - 1})
    return [groups[i] for i in keep]


def _memory_table(memory: MemoryEstimate) -> Iterator[RenderableType]:
    nominal = memory.nominal_hbm_bytes or memory.hbm_bytes
    table = Table(title=f"Memory per GPU, GiB (recipe {memory.recipe}; usable HBM {_gib(memory.hbm_bytes)} of "
                        f"{_gib(nominal)})", title_justify="left")
    groups = _memory_columns(memory)
    table.add_column("term", justify="left", no_wrap=True)
    for group in groups:
        ranks = compact_ranks([r.pp_rank for r in group])
        stages = "+".join(str(s) for s in group[0].stages) + (".." if len(group) > 1 else "")
        table.add_column(f"ranks {ranks}\nstages {stages}", justify="right", no_wrap=True)
    table.add_row("params", *(_params(g[0].params) for g in groups))
    for name, label in MEMORY_TERMS:
        cells = [_gib(getattr(g[0], name)) for g in groups]
        if name == "activations_bytes":
            label = f"{label} ({memory.recipe})"
            cells = [f"{g[0].activation_chunks}x: {c}" for g, c in zip(groups, cells, strict=True)]
        table.add_row(label, *cells)
    table.add_row("total", *(_gib(g[0].total_bytes) for g in groups), style="bold")
    table.add_row("free", *(_gib(g[0].headroom_bytes) for g in groups),
                  style="red" if memory.headroom_bytes < 0 else "")
    yield table
    legend = (f"activations: Nx = micro-batches in flight, {memory.tokens_per_micro_batch:,} tokens each; recompute "
              f"{memory.recompute_flops_per_token_layer / 1e6:,.0f} MFLOP per token per layer in the backward; "
              "usable HBM from the node profile (hbm_usable: nvidia-smi's total)")
    if any(len(group) > 1 for group in groups):
        legend += "; 'a+b..' = the first rank's stages, the column's other ranks follow the same pattern"
    yield Text(legend, style="dim")
    worst = memory.worst
    if memory.fits:
        yield Text(f"fits: worst pipeline rank {worst.pp_rank} uses {human_bytes(worst.total_bytes)} of "
                   f"{human_bytes(memory.hbm_bytes)} usable ({human_bytes(memory.headroom_bytes)} headroom)",
                   style="green")
    else:
        yield Text(f"DOES NOT FIT: pipeline rank {worst.pp_rank} needs {human_bytes(worst.total_bytes)} > "
                   f"{human_bytes(memory.hbm_bytes)} usable (short by {human_bytes(-memory.headroom_bytes)})",
                   style="bold red")


def _rank_table(summary: RankMapSummary) -> Table:
    table = Table(title=f"Rank map ({summary.world_size:,} ranks, order {summary.order}); nodes and planes "
                        "per group", title_justify="left")
    for col in ("group", "count x size", "nodes", "planes", "first group", "its nodes"):
        table.add_column(col, justify="left" if col.startswith(("first", "its", "group")) else "right")
    for g in summary.groups:
        nodes = (str(g.min_nodes_per_group) if g.min_nodes_per_group == g.max_nodes_per_group
                 else f"{g.min_nodes_per_group}-{g.max_nodes_per_group}")
        planes = (str(g.min_planes_per_group) if g.min_planes_per_group == g.max_planes_per_group
                  else f"{g.min_planes_per_group}-{g.max_planes_per_group}")
        table.add_row(g.kind, f"{g.num_groups:,} x {g.group_size:,}", nodes, planes, g.first_group,
                      g.first_group_nodes)
    return table


def _stage_cost_table(step: StepTime) -> Table:
    """Per-stage op times in ms (F, I, W alone; the all-to-alls are inside F and I), equal neighbours on one row."""
    table = Table(title="Stage costs, ms per micro-batch", title_justify="left")
    for col in ("stages", "F", "I", "W", "a2a F", "a2a B"):
        table.add_column(col, justify="right")
    groups: list[list[StageCost]] = []
    for cost in step.stages:
        key = (cost.f_s, cost.i_s, cost.w_s, cost.comm_f_s, cost.comm_b_s)
        last = groups[-1][0] if groups else None
        if last is not None and key == (last.f_s, last.i_s, last.w_s, last.comm_f_s, last.comm_b_s):
            groups[-1].append(cost)
        else:
            groups.append([cost])
    for group in groups:
        c = group[0]
        name = str(c.stage) if len(group) == 1 else f"{c.stage}-{group[-1].stage}"
        table.add_row(name, *(f"{v * 1e3:,.1f}" for v in (c.f_s, c.i_s, c.w_s, c.comm_f_s, c.comm_b_s)))
    return table


def _layer_cost_table(step: StepTime) -> Table:
    """Where one layer's time goes, per layer kind, in ms (B = input + weight gradient; recompute = the part of
    B and a2a B that redoes forward work under the activation recipe)."""
    table = Table(title="Layer costs, ms per micro-batch", title_justify="left")
    tp = any(x.tp_f_s for x in step.layers)  # tensor parallelism's NVLink collectives, F + B, exposed
    columns = ("layer", "attn F", "attn B", "FFN F", "FFN B", "a2a F", "a2a B", "recompute")
    for col in columns + (("TP F+B",) if tp else ()):
        table.add_column(col, justify="left" if col == "layer" else "right")
    for x in step.layers:
        values: tuple[float, ...] = (x.attention_f_s, x.attention_i_s + x.attention_w_s, x.ffn_f_s,
                                     x.ffn_i_s + x.ffn_w_s, x.dispatch_f_s + x.combine_f_s,
                                     x.dispatch_b_s + x.combine_b_s, x.recompute_s)
        values += (x.tp_f_s + x.tp_b_s,) if tp else ()
        table.add_row(x.kind, *(f"{v * 1e3:,.1f}" for v in values))
    return table


def _step_time(plan: LaunchPlan) -> Iterator[RenderableType]:
    """The predicted step as the paper's Table 4 reads it, then throughput and (with --tokens) the budget."""
    step = plan.step_time
    if step is None:
        return
    b = step.breakdown
    table = Table(title=f"Predicted step, pipeline rank {b.rank}", title_justify="left")
    for col in ("phase", "ops", "seconds", "share"):
        table.add_column(col, justify="left" if col == "phase" else "right")
    rows = (("forward only (1F)", b.num_f, b.one_f_s), ("backward only (1B)", b.num_b, b.one_b_s),
            ("weight gradient (1W)", b.num_w, b.one_w_s), ("overlapped F&B", b.num_fb, b.overlapped_fb_s),
            ("bubble (idle)", None, b.bubble_s), ("optimizer + ZeRO", None, b.optimizer_s))
    for name, ops, seconds in rows:
        table.add_row(name, "" if ops is None else f"{ops:,}", f"{seconds:.3f}", f"{seconds / step.step_s:.1%}")
    table.add_row("step", "", f"{step.step_s:.3f}", "100.0%", style="bold")
    yield table
    yield Text(f"throughput: {step.tokens_per_day / 1e9:,.1f}B tokens/day; per GPU {step.tflops_noncausal:,.0f} "
               f"TFLOPS non-causal / {step.tflops_causal:,.0f} causal (attention counted in full / half; MTP "
               f"excluded); MFU {step.mfu_noncausal:.1%} / {step.mfu_causal:.1%} of BF16 dense peak")
    yield _stage_cost_table(step)
    yield _layer_cost_table(step)
    budget = plan.token_budget
    if budget is not None:
        yield Text(f"{budget.tokens / 1e12:,.4g}T tokens: {budget.gpu_hours / 1e3:,.0f}K GPU hours, "
                   f"{budget.days:,.1f} days, ${budget.cost_usd / 1e6:,.3f}M at ${budget.gpu_hour_usd:g}/GPU hour")


def _search(search: SearchExplanation) -> Iterator[RenderableType]:
    """The top layouts side by side and one line per rejected family (``dsctl.launch.search_explain``)."""
    if not search.rows:
        yield Text(f"Layouts by predicted step: {search.num_evaluated:,} evaluated, none fits and was predicted")
    table = Table(title=f"Layouts by predicted step ({search.num_evaluated:,} evaluated, {search.num_fitting:,} fit, "
                        f"{search.num_predicted:,} simulated; "
                        f"objective {search.objective})", title_justify="left")
    for col in ("#", "layout, m x b", "step s", "tok/day", "MFU", "GiB", "why it lost"):
        table.add_column(col, justify="left" if col[0] in "lw" else "right")
    for row in search.rows:
        table.add_row(str(row.rank), row.label, f"{row.step_s:.2f}", f"{row.tokens_per_day / 1e9:,.0f}B",
                      f"{row.mfu:.1%}", f"{row.memory_bytes / GIB:.1f}", row.why_lost or "chosen")
    if search.rows:
        yield table
        yield Text("m x b: micro-batches per pipeline x sequences each; MFU non-causal of BF16 peak; GiB: worst GPU; "
                   "why it lost: seconds behind #1 and the phase that grew most (compute, F&B = overlapped "
                   "forward-and-backward, bubble, optimizer), a2a: EP dispatch + combine per MoE layer")
    if search.families:
        yield _bullets("Rejected families (kind: count (schedules; degrees); the closest miss or an example)",
                       [f.text() for f in search.families])


def _sweep(sweep: NodeSweep) -> Iterator[RenderableType]:
    """``--nodes LOW-HIGH``: each count's best layout and what the token budget costs there."""
    budget = f" for {sweep.tokens / 1e12:,.4g}T tokens at ${sweep.gpu_hour_usd:g}/GPU hour" if sweep.tokens else ""
    table = Table(title=f"Node counts{budget}", title_justify="left")
    columns = ["nodes", "best layout", "step s", "tok/day"]
    if sweep.tokens:
        columns += ["days", "GPU hours", "cost"]
    if sweep.within_days is not None:
        columns.append(f"<= {sweep.within_days:g} d")
    for col in columns:
        table.add_column(col, justify="left" if col == "best layout" else "right")
    for r in sweep.rows:
        cells = [f"{r.num_nodes:,}", r.label or "none fits", _num(r.step_s, "{:.2f}"),
                 _num(r.tokens_per_day, "{:,.0f}B", 1e-9)]
        if sweep.tokens:
            cells += [_num(r.days, "{:,.1f}"), _num(r.gpu_hours, "{:,.0f}K", 1e-3), _num(r.cost_usd, "${:,.2f}M", 1e-6)]
        if sweep.within_days is not None:
            cells.append("yes" if r.meets_deadline else "no")
        table.add_row(*cells, style="bold" if r.num_nodes == sweep.chosen_nodes else None)
    yield table
    yield Text(f"chosen: {sweep.reason}" if sweep.chosen_nodes is not None else
               f"no count chosen: {sweep.reason}; the plan below is for the largest count")


def _num(value: float | None, pattern: str, scale: float = 1.0) -> str:
    return "-" if value is None else pattern.format(value * scale)


@table_renderer(LaunchPlan)
def _render_plan(plan: LaunchPlan) -> Iterator[RenderableType]:
    if plan.sweep is not None:
        yield from _sweep(plan.sweep)
    yield _layout_table(plan)
    yield _bullets("Why this layout", plan.choices)
    if plan.search is not None:
        yield from _search(plan.search)
    b = plan.batch
    yield Text(f"batch: {b.global_batch:,} sequences x {b.seq_len:,} tokens per step = dp {plan.layout.dp} x "
               f"{b.micro_batches} micro-batches x {b.micro_batch_size} sequence(s)")
    yield _stage_table(plan.stages)
    yield from _memory_table(plan.memory)
    yield _rank_table(plan.rank_map)
    fig = plan.schedule_figures
    if fig is not None:
        formula = f" (README formula {fig.bubble_formula:g})" if fig.bubble_formula is not None else ""
        yield Text(f"schedule {fig.schedule}: {fig.num_stages} stages on {fig.num_ranks} ranks, {fig.micro_batches} "
                   f"micro-batches; at F=1, B=2, W=1, F&B=3: step {fig.makespan:g} units, bubble {fig.bubble:g}"
                   f"{formula} = {fig.bubble_fraction:.1%} of the step; peak activations {fig.peak_activations} "
                   f"chunks; parameters {fig.params_per_rank}")
    if plan.step_time is not None:
        yield from _step_time(plan)
    command = " ".join(plan.train_command) if plan.train_command else "(none)"
    yield Text(f"training command: {command}" + (f"   backend: {plan.backend}" if plan.backend else "")
               + (f"   job: {plan.job_name}" if plan.job_name else ""))
    if plan.notes:
        yield _bullets("Notes", plan.notes)


@table_renderer(LayoutReport)
def _render_layout(report: LayoutReport) -> Iterator[RenderableType]:
    plan = report.plan
    yield _layout_table(plan)
    yield _bullets("Why this layout", report.choices)
    yield _stage_table(plan.stages)
    verdict = "fits" if plan.memory.fits else "DOES NOT FIT"
    yield Text(f"memory: {verdict} (recipe {plan.memory.recipe}; worst GPU {human_bytes(plan.memory.max_total_bytes)} "
               f"of {human_bytes(plan.memory.hbm_bytes)} usable; details: dsctl launch --dry-run)")
    yield _rank_table(plan.rank_map)
    node = plan.ranks.node
    plane = plan.ranks.plane
    for listing in report.groups:
        table = Table(title=f"{listing.kind} groups: {listing.num_groups:,} x {listing.group_size:,} - "
                            f"{listing.meaning}", title_justify="left")
        for col in ("#", "ranks", "nodes", "planes"):
            table.add_column(col, justify="right" if col == "#" else "left")
        for i, ranks in enumerate(listing.ranks[:_EXPLAIN_ROWS]):
            table.add_row(str(i), compact_ranks(ranks), compact_ranks(np.unique(node[ranks])),
                          compact_ranks(np.unique(plane[ranks])))
        if listing.num_groups > _EXPLAIN_ROWS:
            table.add_row("...", f"{listing.num_groups - _EXPLAIN_ROWS:,} more (all in --format json)", "", "")
        yield table
