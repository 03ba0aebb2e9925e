"""Table (human) views of ``dsctl eplb`` results: balancedness per layer and a per-GPU load bar chart."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from dsctl.eplb.budget import BudgetResult
from dsctl.eplb.checks import EplbLayout
from dsctl.eplb.metrics import PlacementMetrics
from dsctl.eplb.pareto import TradeOff
from dsctl.eplb.result import RebalanceResult
from dsctl.eplb.simulate import SimulationResult
from dsctl.eplb.windows import WindowReplay
from dsctl.output.registry import table_renderer
from dsctl.units import human_bytes

#: show every layer up to this many; beyond, a summary and the worst layers
MAX_LAYER_ROWS = 16
BAR_WIDTH = 40
#: worst-layer gap to the lower bound above which a reference plan suggests --algorithm balanced
BALANCED_HINT_GAP = 0.01


def load_text(load: float) -> str:
    """A load (tokens routed to a GPU or an expert, summed over statistics) in a table, one format for every load
    column: whole tokens with thousands separators from 10,000 up (``2,838,912``, never ``2.839e+06``), up to two
    decimals below (``179.5``: small hand-made loads split over replicas). The JSON keeps the exact value."""
    value = float(load)
    if abs(value) >= 10_000:
        return f"{round(value):,}"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def _layout_line(layout: EplbLayout) -> str:
    nodes = f"{layout.num_nodes} node{'s' if layout.num_nodes != 1 else ''}"
    return (f"{layout.num_layers} layers x {layout.num_experts} experts -> {layout.num_replicas} slots on "
            f"{layout.num_gpus} GPUs / {nodes} ({layout.slots_per_gpu} per GPU), policy {layout.policy}")


def _layer_table(metrics: PlacementMetrics, layers: Iterable[int], title: str, first_layer: int = 0) -> Table:
    """``first_layer``: the model layer number of row 0 (the dense layers before the first MoE layer)."""
    bound = metrics.balancedness_bound
    table = Table(title=title, title_justify="left")
    proved = metrics.proved
    optimum = metrics.optimum_gpu_load
    names = ["model layer" if first_layer else "layer", "before", "after", "bound", "max GPU load",
             "mean GPU load", "lower bound", "gap"]
    if optimum is not None:
        names.append("optimum")
    for name in names:
        table.add_column(name, justify="right")
    gap = metrics.gap_to_bound
    for i in layers:
        cells = [str(i + first_layer), f"{metrics.before.balancedness[i]:.4f}",
                 f"{metrics.after.balancedness[i]:.4f}", f"{bound[i]:.4f}",
                 load_text(float(metrics.after.max_gpu_load[i])),
                 load_text(float(metrics.after.mean_gpu_load[i])),
                 load_text(float(metrics.lower_bound_gpu_load[i])), f"{gap[i]:.2%}"]
        if optimum is not None and proved is not None:
            cells.append(load_text(float(optimum[i])) + (" proved" if proved[i] else " (best found)"))
        table.add_row(*cells)
    return table


def _summary_table(metrics: PlacementMetrics) -> Table:
    bound = metrics.balancedness_bound
    table = Table(title=f"Balancedness (mean / max GPU load) over {metrics.num_layers} layers", title_justify="left")
    for name in ("", "before", "after", "bound"):
        table.add_column(name, justify="right" if name else "left")
    rows = (("mean", np.mean), ("worst", np.min), ("best", np.max))
    for label, func in rows:
        table.add_row(label, f"{func(metrics.before.balancedness):.4f}", f"{func(metrics.after.balancedness):.4f}",
                      f"{func(bound):.4f}")
    return table


def balancedness_views(metrics: PlacementMetrics, first_layer: int = 0) -> Iterator[RenderableType]:
    """Per-layer table for few layers; otherwise the summary and the five worst layers."""
    if metrics.num_layers <= MAX_LAYER_ROWS:
        yield _layer_table(metrics, range(metrics.num_layers), "Balancedness (mean / max GPU load) per layer",
                           first_layer)
        return
    yield _summary_table(metrics)
    worst = np.argsort(metrics.after.balancedness, kind="stable")[:5]
    yield _layer_table(metrics, (int(i) for i in worst), "Worst layers after placement", first_layer)


def load_chart(metrics: PlacementMetrics, layer: int, first_layer: int = 0) -> RenderableType:
    """Bar chart of the layer's per-GPU loads after placement; '|' marks the mean."""
    loads = metrics.after.gpu_loads[layer]
    peak = float(loads.max()) or 1.0
    mean = float(metrics.after.mean_gpu_load[layer])
    mean_col = min(BAR_WIDTH - 1, round(mean / peak * BAR_WIDTH))
    label = f"model layer {layer + first_layer}" if first_layer else f"layer {layer}"
    title = Text(f"Per-GPU load, worst {label} (balancedness {metrics.after.balancedness[layer]:.4f}; "
                 f"| = mean {load_text(mean)})", style="italic")
    table = Table(show_edge=False, box=None)
    table.add_column("GPU", justify="right")
    table.add_column("load", justify="right")
    table.add_column("", no_wrap=True)
    for gpu, load in enumerate(loads):
        filled = round(float(load) / peak * BAR_WIDTH)
        cells = ["#" if c < filled else " " for c in range(BAR_WIDTH)]
        if cells[mean_col] == " ":
            cells[mean_col] = "|"
        style = "bold red" if float(load) >= peak else ""
        table.add_row(str(gpu), load_text(load), Text("".join(cells), style=style))
    return Group(title, table)


def _warnings(warnings: Iterable[str]) -> Iterator[RenderableType]:
    for warning in warnings:
        yield Text(f"warning: {warning}", style="yellow")


@table_renderer(RebalanceResult)
def _render_rebalance(result: RebalanceResult) -> Iterator[RenderableType]:
    yield Text(f"EPLB rebalance ({result.algorithm}): {_layout_line(result.layout)}", style="bold")
    for note in result.notes:
        yield Text(note)
    yield from _warnings(result.warnings)
    if result.num_dense_layers:
        yield Text(f"layers are numbered as in the model: row 0 of the statistics is model layer "
                   f"{result.num_dense_layers} (the first MoE layer)")
    yield from balancedness_views(result.metrics, result.num_dense_layers)
    summary = result.metrics.summary()
    yield Text(f"mean balancedness {summary['mean_balancedness_before']:.4f} -> "
               f"{summary['mean_balancedness_after']:.4f} "
               f"(bound {summary['mean_balancedness_bound']:.4f}, {summary['bound_kind']}); "
               f"max replicas per expert {result.placement.log2phy.shape[2]}")
    first = result.num_dense_layers
    yield Text(f"gap to the lower bound (max GPU load / bound - 1): mean {summary['mean_gap_to_bound']:.2%}, "
               f"worst {summary['max_gap_to_bound']:.2%} (layer {summary['worst_gap_layer'] + first})")
    if result.algorithm == "reference" and summary["max_gap_to_bound"] > BALANCED_HINT_GAP:
        yield Text("hint: --algorithm balanced closes most of this gap in about the same time and is never worse "
                   "on any layer; reference stays DeepSeek's EPLB, exactly", style="italic")
    if "layers_proved" in summary:
        yield Text(f"exact search: {summary['layers_proved_optimal']} of {summary['num_layers']} layers proved "
                   f"optimal ({summary['layers_proved']} searched to the end); largest gap to the optimum "
                   f"{summary['max_gap_to_optimum']:.2%}", style="green" if summary["layers_proved_optimal"]
                   == summary["num_layers"] else "yellow")
    if result.migration is not None:
        moved = result.migration
        size = "n/a (give --model)" if moved.bytes_moved is None else human_bytes(moved.bytes_moved, digits=2)
        yield Text(f"migration: {moved.replicas_moved:,} replicas moved, {size} (tolerance {moved.tolerance:.2%})")
    if result.trade_off is not None:
        yield from trade_off_views(result.trade_off)
    yield load_chart(result.metrics, result.metrics.worst_layer, result.num_dense_layers)


def trade_off_views(trade: TradeOff) -> Iterator[RenderableType]:
    """The Pareto table (balance versus replicas and bytes moved) and the decision."""
    table = Table(title="Balance versus migration (on the new statistics)", title_justify="left")
    timed = trade.plan is not None
    names = ["plan", "max load (sum of layers)", "gain / step", "balancedness", "replicas moved", "share",
             "bytes moved"]
    if timed:
        names += ["move time", "pays back after"]
    for name in (*names, ""):
        table.add_column(name, justify="right" if name not in ("plan", "") else "left")
    for i, p in enumerate(trade.points):
        label = "keep current" if p.tolerance is None else f"tolerance {p.tolerance:.1%}"
        flags = ", ".join(f for f, on in (("chosen", i == trade.chosen), ("front", p.on_front),
                                          ("over budget", not p.within_budget)) if on)
        size = "n/a" if p.bytes_moved is None else human_bytes(p.bytes_moved, digits=2)
        cells = [label, load_text(p.max_load), f"{p.gain:.2%}", f"{p.mean_balancedness:.4f}",
                 f"{p.replicas_moved:,}", f"{p.replicas_moved / max(1, trade.num_slots):.1%}", size]
        if timed:
            cells += [_seconds(None if p.moves is None else p.moves.move_s), _payback(p.payback_s,
                                                                                      p.break_even_steps)]
        table.add_row(*cells, flags)
    yield table
    if timed:
        step = (f"--step-time-s {trade.step_time_s:g}: steps = move time / (gain x step time)"
                if trade.step_time_s is not None else
                "pays back after = move time / gain, in seconds of step time that scale with the max GPU load; "
                "give --step-time-s for steps")
        yield Text(f"moves timed on {trade.plan} (all layers at once, max-min rates re-solved as copies finish, "
                   f"as 'topology simulate --reflow'); {step}")
    yield Text(trade.reason, style="green" if trade.worth_it else "yellow")


def _seconds(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value == 0:
        return "0"
    return f"{value * 1e3:.3g} ms" if value < 1 else f"{value:.3g} s"


def _payback(seconds: float | None, steps: float | None) -> str:
    if seconds is None:
        return "n/a"
    if seconds == 0:
        return "-"
    if seconds == float("inf"):
        return "never"
    return f"{steps:,.0f} steps" if steps is not None else f"{_seconds(seconds)} of steps"


@table_renderer(WindowReplay)
def _render_replay(result: WindowReplay) -> Iterator[RenderableType]:
    yield Text(f"EPLB replay ({result.algorithm}): {result.num_windows} windows, plan on t, score on t+1; "
               f"{_layout_line(result.layout)}", style="bold")
    table = Table(title="Delivered balancedness by re-planning interval", title_justify="left")
    for name in ("interval (windows)", "delivered mean", "worst window", "re-plans", "replicas moved / window",
                 "re-plans that pay off"):
        table.add_column(name, justify="right")
    for s in result.scores:
        paid = "n/a" if s.pays_off is None else f"{s.pays_off:.0%}"
        table.add_row(str(s.interval), f"{s.delivered:.4f}", f"{s.worst_window:.4f}", str(s.replans),
                      f"{s.replicas_moved_per_window:,.1f}", paid)
    yield table
    yield Text(f"hindsight (each window planned on itself) {result.oracle:.4f}; first plan never changed "
               f"{result.stale:.4f}; best interval: {result.best_interval} window(s) (longest within 0.5% of the "
               f"best delivered; a re-plan pays off at >= {result.min_gain:.0%} less max load)")


@table_renderer(BudgetResult)
def _render_budget(result: BudgetResult) -> Iterator[RenderableType]:
    layers = len(result.slots_per_layer)
    yield Text(f"EPLB budget ({result.algorithm}, {result.policy}): {result.total_slots:,} slots over {layers} "
               f"layers on {result.num_gpus} GPUs; uniform {result.uniform_slots} per layer", style="bold")
    table = Table(title="Slots per layer", title_justify="left")
    for name in ("slots per layer", "per GPU", "layers"):
        table.add_column(name, justify="right")
    values, counts = np.unique(result.slots_per_layer, return_counts=True)
    for value, count in zip(values.tolist(), counts.tolist(), strict=True):
        table.add_row(str(value), str(value // result.num_gpus), str(count))
    yield table
    yield Text(f"sum of max GPU loads: per-layer {load_text(float(result.max_load_per_layer.sum()))} vs uniform "
               f"{load_text(float(result.max_load_uniform.sum()))} ({result.gain:+.2%} per MoE step); mean "
               f"balancedness {result.balancedness_per_layer:.4f} vs {result.balancedness_uniform:.4f}")


@table_renderer(SimulationResult)
def _render_simulation(result: SimulationResult) -> Iterator[RenderableType]:
    yield Text(f"EPLB simulate: placement {result.placement_source} ({result.placement_kind}) on "
               f"{', '.join(result.sources) or 'statistics'}", style="bold")
    yield Text(_layout_line(result.layout))
    yield from _warnings(result.warnings)
    yield from balancedness_views(result.metrics)
    yield load_chart(result.metrics, result.metrics.worst_layer)
