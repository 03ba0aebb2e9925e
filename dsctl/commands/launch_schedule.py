"""dsctl launch schedule: simulate a pipeline schedule (DualPipe, DualPipeV, 1F1B, ZB1P, interleaved 1F1B)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dsctl.commands._common import FormatOpt, show
from dsctl.errors import InputError
from dsctl.output.formats import OutputFormat


def schedule(
    schedule_name: Annotated[
        str, typer.Option("--schedule", "-s", help="dualpipe, dualpipev, 1f1b, zb1p or interleaved.")
    ] = "dualpipe",
    pp: Annotated[
        int, typer.Option("--pp", help="Pipeline stages (DualPipe: ranks; DualPipeV, interleaved: stages on PP/2 "
                                       "ranks).")
    ] = 8,
    micro_batches: Annotated[
        int, typer.Option("--micro-batches", help="Micro-batches per step (DualPipe: both directions).")
    ] = 20,
    f: Annotated[float, typer.Option("--f-cost", help="Forward cost of one chunk (any time unit).")] = 1.0,
    b: Annotated[float, typer.Option("--b-cost", help="Full backward cost (input + weight gradient).")] = 2.0,
    w: Annotated[float | None, typer.Option("--w-cost", help="Weight-gradient part of the backward (I = B - W; "
                                                 "dualpipe, dualpipev, zb1p); default 1.")] = None,
    fb: Annotated[
        float | None, typer.Option("--fb-cost", help="Overlapped forward+backward cost (dualpipe, dualpipev); "
                                                   "default F+B.")
    ] = None,
    comm_model: Annotated[
        str, typer.Option("--comm-model", help="ideal (README figures) or batched (the DualPipe code's "
                          "batched p2p; dualpipe/dualpipev only).")
    ] = "ideal",
    svg: Annotated[Path | None, typer.Option("--svg", help="Also write the timeline as an SVG file (at most "
                                             "20,000 ops).")] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Per-rank op order, timeline, bubble against the README formula, and peak activations of a schedule."""
    from dsctl.launch.schedule import OpCosts, check_svg_size, min_ops, simulate, timeline_svg
    from dsctl.launch.schedule.costs import check_costs_apply
    from dsctl.output.emit import stderr_console
    from dsctl.output.files import atomic_write

    costs = OpCosts(f=f, b=b, w=1.0 if w is None else w, fb=fb)
    check_costs_apply(schedule_name, costs, w_given=w is not None)
    if svg is not None and svg.is_dir():
        raise InputError(f"--svg {svg} is a folder; give a file name such as {svg / 'timeline.svg'}")
    if svg is not None:
        from dsctl.output.files import check_target

        check_target(svg, "--svg")
        check_svg_size(min_ops(pp, micro_batches), exact=False)  # before a long simulation
    result = simulate(schedule_name, pp, micro_batches, costs, comm_model)
    if svg is not None:
        atomic_write(svg, timeline_svg(result), option="--svg")
        stderr_console().print(f"wrote {svg}")
    show(result, fmt, "launch schedule")


def register_schedule(launch_app: typer.Typer) -> None:
    """Add the ``schedule`` command to the ``launch`` group."""
    launch_app.command("schedule")(schedule)
