"""dsctl trace overlap: compute/communication overlap and exposed communication from PyTorch profiler traces."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from dsctl.commands._common import FormatOpt, read_input, show
from dsctl.errors import InputError
from dsctl.output.formats import OutputFormat

app = typer.Typer(
    name="trace",
    help="Compute/communication overlap from PyTorch profiler traces (torch.profiler export_chrome_trace).",
    no_args_is_help=True,
)


def _check_svg(path: Path) -> None:
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise InputError(f"--svg {path}: is a folder; give a file path, e.g. {path / 'overlap.svg'}")
    if not parent.is_dir():
        raise InputError(f"--svg {path}: cannot write there, folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"--svg {path}: cannot write there, folder {parent} is not writable")


@app.command("overlap")
def overlap_cmd(
    traces: Annotated[list[Path], typer.Argument(help="Chrome trace files from torch.profiler (.json or .json.gz), "
                                                 "one per rank.")],
    step: Annotated[int | None, typer.Option("--step", help="Analyse only ProfilerStep#N.")] = None,
    all_steps: Annotated[bool, typer.Option("--all-steps", help="Also report every ProfilerStep#N separately.")]
    = False,
    comm_pattern: Annotated[list[str] | None, typer.Option(
        "--comm-pattern", help="Regex (re.search) for communication event names; replaces the defaults "
        "(repeatable). Defaults: NCCL/RCCL kernels, DeepEP dispatch/combine, P2P copies, c10d/gloo ops; the list "
        "is printed in --format json as comm_patterns.")] = None,
    add_comm_pattern: Annotated[list[str] | None, typer.Option(
        "--add-comm-pattern", help="Regex added to the default communication patterns (repeatable).")] = None,
    svg: Annotated[Path | None, typer.Option("--svg", help="Write a timeline SVG: compute and comm lanes per rank, "
                                             "exposed communication in red.")] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Compute-busy, comm-busy, overlapped and exposed communication time per rank, and per collective."""
    from dsctl.output.emit import stderr_console
    from dsctl.output.files import atomic_write
    from dsctl.trace import DEFAULT_PATTERNS, overlap_from_bytes
    from dsctl.trace.svg import timeline_svg

    if step is not None and all_steps:
        raise InputError("--step and --all-steps exclude each other; give one")
    if svg is not None:
        _check_svg(svg)
    patterns = list(comm_pattern) if comm_pattern else list(DEFAULT_PATTERNS)
    patterns += list(add_comm_pattern or [])
    option = "--comm-pattern" if comm_pattern else "--add-comm-pattern"
    result = overlap_from_bytes([(str(p), read_input(p, "trace")) for p in traces], patterns, step, all_steps, option)
    if svg is not None:
        atomic_write(svg, timeline_svg(result), option="--svg")
    show(result, fmt, "trace overlap")
    if svg is not None:
        stderr_console().print(f"wrote {svg}")
