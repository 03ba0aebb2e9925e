"""dsctl trace: overlap, kernel classes, stragglers and timelines from PyTorch profiler traces."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dsctl.commands._common import FormatOpt, show
from dsctl.errors import InputError
from dsctl.output.formats import OutputFormat
from dsctl.output.progress import progress
from dsctl.units import DAY_S

if TYPE_CHECKING:
    from dsctl.cluster import Places
    from dsctl.trace.classify import Classifier

#: request field (named by dsctl.trace's errors) -> the option that sets it
FIELD_OPTIONS: dict[str, str] = {
    "step": "--step",
    "all_steps": "--all-steps",
    "slurm": "--slurm",
    "align": "--align",
    "ranks": "--ranks",
    "from_us": "--from-us",
    "to_us": "--to-us",
    "max_bytes": "--max-bytes",
    "nodes": "-w/--nodelist",
    "svg": "--svg",
    "explain_classes": "--explain-classes",
    "plan": "--plan",
}

app = typer.Typer(
    name="trace",
    help="Compute/communication overlap, kernel classes, stragglers and timelines from PyTorch profiler traces.",
    no_args_is_help=True,
)

#: default --max-bytes (decompressed bytes per trace file): 8 GiB
_MAX_BYTES = 8 * 1024**3

TracesArg = Annotated[list[str], typer.Argument(
    help="Chrome trace files from torch.profiler (.json or .json.gz), one per rank; glob patterns such as "
         "'traces/*.json.gz' are expanded by dsctl too (quote them for thousands of files).")]
StepOpt = Annotated[int | None, typer.Option("--step", help="Analyse only ProfilerStep#N.")]
CommOpt = Annotated[list[str] | None, typer.Option(
    "--comm-pattern", help="Regex (re.search) for communication names; replaces the built-in table's "
    "communication families (repeatable); --explain-classes shows how each name is classed.")]
AddCommOpt = Annotated[list[str] | None, typer.Option(
    "--add-comm-pattern", help="Regex for names that are communication, before the built-in table (repeatable).")]
ComputeOpt = Annotated[list[str] | None, typer.Option(
    "--compute-pattern", help="Regex for names that are compute whatever else matches (repeatable).")]
JobsOpt = Annotated[int | None, typer.Option("--jobs", "-j", min=1, max=1024,
                                             help="Worker processes for many files (default: the usable CPUs).")]
MaxBytesOpt = Annotated[int, typer.Option("--max-bytes", min=1, max=2**50,
                                          help="Refuse a trace over this many bytes, after gzip decompression.")]


def _check_out(path: Path, option: str, inputs: list[str] | None = None) -> None:
    """Refuse an output path before any trace is read (the file rule of ``dsctl.output.files``): a folder, a
    missing or unwritable folder, a link, device or FIFO, or one of the ``inputs``."""
    from dsctl.inputs import note_input
    from dsctl.output.files import check_target

    for trace in inputs or ():
        note_input(trace, "TRACE")  # traces are read by worker processes: record them here
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise InputError(f"{option} {path}: is a folder; give a file path, e.g. {path / 'trace.svg'}")
    if not parent.is_dir():
        raise InputError(f"{option} {path}: cannot write there, folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{option} {path}: cannot write there, folder {parent} is not writable")
    check_target(path, option)


def _fill_node(pattern: str) -> str:
    """``{node}`` in a TRACE pattern becomes this node's Slurm name (``SLURMD_NODENAME``, else the host name)."""
    if "{node}" not in pattern:
        return pattern
    import socket

    from dsctl.runners.fleet import valid_node_name
    name = os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    if not valid_node_name(name):
        raise InputError(f"TRACE {pattern}: node name {name!r} cannot fill {{node}}")
    return pattern.replace("{node}", name)


def _forwarded(step: int | None, comm: list[str] | None, add: list[str] | None, compute: list[str] | None,
               top: int, jobs: int | None, max_bytes: int) -> list[str]:
    """The options each node's dsctl gets (argv, no shell)."""
    args = ["--top", str(top), "--max-bytes", str(max_bytes), "--format", "json"]
    if step is not None:
        args += ["--step", str(step)]
    if jobs is not None:
        args += ["--jobs", str(jobs)]
    for option, values in (("--comm-pattern", comm), ("--add-comm-pattern", add), ("--compute-pattern", compute)):
        for value in values or []:
            args += [option, value]
    return args


def _on_nodes(traces: list[str], forwarded: list[str], nodes: str, dsctl_path: str, node_timeout: float,
              partition: str | None, classifier: Classifier, step: int | None,
              report: Callable[[float, float], None] | None = None) -> object:
    from dsctl.cluster.hostlist import node_names
    from dsctl.output.envelope import read_node_report
    from dsctl.runners.fleet import run_on_nodes
    from dsctl.trace.nodes import rows_from_nodes
    from dsctl.trace.overlap import combine

    names = node_names(nodes, option="--nodelist")
    command = [dsctl_path, "trace", "overlap", *traces, *forwarded]
    run = run_on_nodes(names, command, timeout_s=node_timeout, partition=partition, job_name="dsctl-trace",
                       report=report)
    reports = {a.node: read_node_report(a.node, a.document, "trace overlap", a.reason) for a in run.answers}
    documents = [(node, r.data) for node, r in reports.items() if r.data is not None]
    unreachable = [{"node": a.node, "reason": reports[a.node].reason + (f": {a.stderr_tail}" if a.stderr_tail else "")}
                   for a in run.answers if reports[a.node].data is None]
    notes = [f"--slurm: {len(documents)} of {len(names)} nodes answered in {run.wall_s:.1f} s"]
    return combine(rows_from_nodes(documents), classifier, step, notes, unreachable)


def _reading(paths: list[Path]) -> str:
    """The progress line's text: how many trace files and bytes are read."""
    size = 0
    for path in paths:
        try:
            size += path.stat().st_size
        except OSError:
            continue
    files = f"{len(paths)} trace file" + ("s" if len(paths) != 1 else "")
    return f"reading {files} ({size / 1e6:,.0f} MB)"


def _classifier(comm: list[str] | None, add: list[str] | None, compute: list[str] | None) -> Classifier:
    from dsctl.trace.classify import make_classifier
    return make_classifier(comm, add or [], compute or [])


@app.command("overlap")
def overlap_cmd(
    traces: TracesArg,
    step: StepOpt = None,
    all_steps: Annotated[bool, typer.Option("--all-steps", help="Also report every ProfilerStep#N separately.")]
    = False,
    comm_pattern: CommOpt = None,
    add_comm_pattern: AddCommOpt = None,
    compute_pattern: ComputeOpt = None,
    explain_classes: Annotated[bool, typer.Option(
        "--explain-classes", help="Instead of the overlap, list every distinct kernel name with its class "
        "(compute, comm, memory), the rule that decided it and its total time.")] = False,
    top: Annotated[int, typer.Option("--top", min=0, max=1000, help="Kernels listed per rank by summed time.")]
    = 10,
    svg: Annotated[Path | None, typer.Option("--svg", help="Write a timeline SVG: compute and comm lanes per rank, "
                                             "exposed communication in red.")] = None,
    jobs: JobsOpt = None,
    max_bytes: MaxBytesOpt = _MAX_BYTES,
    slurm: Annotated[bool, typer.Option("--slurm", help="Run the analysis on every node of --nodelist through srun "
                                        "(traces on node-local disks; {node} in TRACE is the node's name) and merge "
                                        "the answers.")] = False,
    nodes: Annotated[str | None, typer.Option("--nodelist", "-w",
                                              help="--slurm: Slurm hostlist, e.g. node[001-256].")] = None,
    dsctl_path: Annotated[str, typer.Option("--dsctl", help="--slurm: dsctl as the nodes run it.")] = "dsctl",
    node_timeout: Annotated[float, typer.Option("--node-timeout-s", min=1, max=DAY_S,
                                                help="--slurm: seconds each node may take.")] = 600.0,
    partition: Annotated[str | None, typer.Option("--partition", help="--slurm: Slurm partition.")] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Compute-busy, comm-busy, overlapped and exposed communication per rank; spread and worst ranks."""
    import dsctl.output.trace  # noqa: F401  (registers the table renderers)
    from dsctl.output import stderr_console
    from dsctl.output.files import atomic_write
    from dsctl.runners.trace_files import default_jobs, expand, overlap_file, run_per_file
    from dsctl.trace.explain import explain
    from dsctl.trace.job import check_job
    from dsctl.trace.overlap import combine
    from dsctl.trace.request import OverlapRequest

    OverlapRequest(step, all_steps, slurm, nodes, svg is not None, explain_classes).check()
    if svg is not None:
        _check_out(svg, "--svg")
    classifier = _classifier(comm_pattern, add_comm_pattern, compute_pattern)
    if nodes is not None:  # with --slurm (OverlapRequest.check)
        forwarded = _forwarded(step, comm_pattern, add_comm_pattern, compute_pattern, top, jobs, max_bytes)
        with progress(f"asking the nodes {nodes} (per-node timeout {node_timeout:g} s), nodes answered", fmt,
                      total=1) as report:
            answer = _on_nodes(traces, forwarded, nodes, dsctl_path, node_timeout, partition, classifier, step,
                               report)
        show(answer, fmt, "trace overlap")
        return
    paths = expand([_fill_node(t) for t in traces])
    if svg is not None:
        _check_out(svg, "--svg", [str(p) for p in paths])
    keep_lanes = svg is not None
    with progress(_reading(paths), fmt, total=len(paths)) as report:
        per_file = run_per_file(overlap_file, [(p, i, classifier, step, all_steps, top, keep_lanes, max_bytes)
                                               for i, p in enumerate(paths)], jobs or default_jobs(), report)
    job = check_job([ident for ident, _ in per_file])
    rows = [row for _, file_rows in per_file for row in file_rows]
    if explain_classes:
        show(explain(rows, classifier.patterns, list(classifier.compute_patterns)), fmt, "trace overlap")
        return
    result = combine(rows, classifier, step, job.notes)
    if svg is not None:
        from dsctl.trace.svg import timeline_svg
        atomic_write(svg, timeline_svg(result), option="--svg")
    show(result, fmt, "trace overlap")
    if svg is not None:
        stderr_console().print(f"wrote {svg}")


def _places(ranks: Path, plan: Path | None) -> Places:
    from dsctl.commands._common import read_text_input
    from dsctl.trace.place import places_from_texts

    ranks = ranks / "ranks.csv" if ranks.is_dir() else ranks
    plan = plan / "plan.json" if plan is not None and plan.is_dir() else plan
    return places_from_texts(read_text_input(ranks, "--ranks"), str(ranks),
                             read_text_input(plan, "--plan") if plan is not None else None, str(plan))


@app.command("stragglers")
def stragglers_cmd(
    traces: TracesArg,
    step: StepOpt = None,
    align: Annotated[str, typer.Option("--align", help="Clock alignment across ranks: 'ends' (collectives end "
                                       "together; default) or 'none' (trust the trace clocks).")] = "ends",
    comm_pattern: CommOpt = None,
    add_comm_pattern: AddCommOpt = None,
    compute_pattern: ComputeOpt = None,
    top: Annotated[int, typer.Option("--top", min=1, max=1000, help="Rows per table.")] = 10,
    ranks: Annotated[Path | None, typer.Option("--ranks", help="The job's rank map (ranks.csv, or the folder "
                                               "that 'dsctl launch --out-dir' wrote): put each rank in its place "
                                               "(node, GPU, PP stage, EP/DP group) and look for concentrations."
                                               )] = None,
    plan: Annotated[Path | None, typer.Option("--plan", help="With --ranks: the fabric plan (plan.json, or the "
                                              "folder of 'dsctl topology plan --out-dir'): adds node names, NIC, "
                                              "plane and leaf switch.")] = None,
    jobs: JobsOpt = None,
    max_bytes: MaxBytesOpt = _MAX_BYTES,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Match each collective across ranks: skew, the ranks others waited for most, and the critical path."""
    import dsctl.output.trace_skew  # noqa: F401  (registers the table renderer)
    from dsctl.runners.trace_files import collectives_file, default_jobs, expand, run_per_file
    from dsctl.trace.job import check_job
    from dsctl.trace.request import check_stragglers
    from dsctl.trace.skew import stragglers

    check_stragglers(align, plan is not None, ranks is not None)
    places = _places(ranks, plan) if ranks is not None else None
    classifier = _classifier(comm_pattern, add_comm_pattern, compute_pattern)
    paths = expand(traces)
    with progress(_reading(paths), fmt, total=len(paths)) as report:
        per_file = run_per_file(collectives_file, [(p, i, classifier, step, max_bytes)
                                                   for i, p in enumerate(paths)], jobs or default_jobs(), report)
    job = check_job([ident for ident, _ in per_file])
    result = stragglers([part for _, parts in per_file for part in parts], align, top, job, places)
    show(result, fmt, "trace stragglers")


@app.command("timeline")
def timeline_cmd(
    traces: TracesArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="SVG file to write.")],
    step: StepOpt = None,
    from_us: Annotated[float | None, typer.Option("--from-us", min=0, max=1e12, help="Start, in µs after the window "
                                                  "start (the step's first kernel, or the trace's).")] = None,
    to_us: Annotated[float | None, typer.Option("--to-us", min=0, max=1e12, help="End, in µs after the window start.")]
    = None,
    comm_pattern: CommOpt = None,
    add_comm_pattern: AddCommOpt = None,
    compute_pattern: ComputeOpt = None,
    jobs: JobsOpt = None,
    max_bytes: MaxBytesOpt = _MAX_BYTES,
) -> None:
    """An SVG with one lane per rank and stream, kernels coloured by category (compute, comm, memory)."""
    from dsctl.output import stderr_console
    from dsctl.output.files import atomic_write
    from dsctl.runners.trace_files import default_jobs, expand, lanes_file, run_per_file
    from dsctl.trace.job import check_job
    from dsctl.trace.request import check_window
    from dsctl.trace.timeline import MAX_LANES, timeline

    _check_out(out, "--out")
    check_window(from_us, to_us)
    classifier = _classifier(comm_pattern, add_comm_pattern, compute_pattern)
    paths = expand(traces)
    if len(paths) > MAX_LANES:  # every file draws a lane or more: refuse before reading any
        raise InputError(f"TRACE: {len(paths):,} files; one picture holds at most {MAX_LANES:,} lanes and each "
                         "file draws one or more", hint="give fewer trace files")
    _check_out(out, "--out", [str(p) for p in paths])
    with progress(_reading(paths), OutputFormat.table, total=len(paths)) as report:
        per_file = run_per_file(lanes_file, [(p, i, classifier, step, from_us, to_us, max_bytes)
                                             for i, p in enumerate(paths)], jobs or default_jobs(), report)
    check_job([ident for ident, _ in per_file])
    ranks = [lanes for _, lanes in per_file]
    what = f"ProfilerStep#{step}" if step is not None else "whole trace"
    cut = f", {from_us or 0:g}-{to_us:g} us" if to_us is not None else (f", from {from_us:g} us" if from_us else "")
    atomic_write(out, timeline(ranks, f"Kernels (GPU) or ops (CPU) per rank and lane ({what}{cut})"), option="--out")
    stderr_console().print(f"wrote {out}")
