"""dsctl health burn-in: drive every planned link at line rate, judge against the simulator, name the bad cable,
NIC or node; rehearse on a simulated fabric with --fabric-model (docs/burn-in.md)."""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dsctl.commands._common import (
    PlanArg,
    perf_report_texts,
    plan_text_of,
    profile_store,
    read_text_input,
)
from dsctl.commands.health_fleet import HealthFormat, HealthFormatOpt
from dsctl.errors import DsctlError, InputError
from dsctl.output.formats import OutputFormat
from dsctl.profiles import DEFAULT_NODE_PROFILE
from dsctl.thresholds import MAD_K, SLOW_FRACTION

if TYPE_CHECKING:
    from collections.abc import Callable

    from dsctl.health.burnin.api import BurninResult, Measure
    from dsctl.health.drain import DrainLimit
    from dsctl.topology.sim.graph import SimGraph

def node_names(nodelist: str | None) -> tuple[str, ...]:
    """``-w/--nodelist``: dsctl's hostlist grammar (no scontrol: a rehearsal needs no Slurm)."""
    if nodelist is None:
        return ()
    from dsctl.cluster import hostlist

    return tuple(hostlist.node_names(nodelist, option="--nodelist"))


def fabric_document(path: Path) -> object:
    from dsctl.profiles.textyaml import load_yaml

    return load_yaml(read_text_input(path, "--fabric-model"), f"--fabric-model {path}")


def burn_in(
    plan: PlanArg,
    fabric_model: Annotated[Path | None, typer.Option(
        "--fabric-model", help="Rehearse on a simulated fabric with the faults this YAML/JSON file injects "
        "(no Slurm, no hardware).")] = None,
    nodelist: Annotated[str | None, typer.Option("--nodelist", "-w", help="Slurm hostlist of the nodes to test "
                                                 "(default: every node of the plan).")] = None,
    fraction: Annotated[float, typer.Option("--fraction", help="Slow = below this fraction of the simulated "
                                            "expectation (and a MAD outlier of its round).")] = SLOW_FRACTION,
    mad_k: Annotated[float, typer.Option("--mad-k", help="Slow = more than this many MADs below the round's "
                                         "median (and below --fraction).")] = MAD_K,
    no_nvlink: Annotated[bool, typer.Option("--no-nvlink", help="Skip the intra-node NVLink round.")] = False,
    out: Annotated[Path | None, typer.Option("--out-dir", help="Write burnin.json, dsctl_burnin.prom and one "
                                             "SVG per plane here.")] = None,
    textfile_dir: Annotated[Path | None, typer.Option(
        "--textfile-dir", help="Also write the Prometheus text to DIR/dsctl_burnin.prom (atomically).")] = None,
    drain: Annotated[bool, typer.Option("--drain", help="Drain the nodes at fault (after the report is "
                                        "written); without it the commands are only printed.")] = False,
    max_drain: Annotated[str | None, typer.Option(
        "--max-drain", help="Circuit breaker: drain nothing when more than N "
                                           "nodes (or P% of the tested nodes) would be drained; default 10%.")]
    = None,
    partition: Annotated[str | None, typer.Option("--partition", "-p", help="Slurm partition (real runs).")]
    = None,
    backend: Annotated[str, typer.Option("--transport", help="Probe transport: gloo (CPU, TCP) or nccl (GPUs, "
                                         "NCCL_IB_HCA pinned to the plane's NIC).")] = "nccl",
    size: Annotated[str, typer.Option("--size", help="Bytes each pair exchanges per repeat (real runs).")]
    = "256MiB",
    repeats: Annotated[int, typer.Option("--repeats", help="Exchanges per pair per round (real runs).")] = 5,
    timeout: Annotated[float, typer.Option("--timeout-s", help="Seconds one round may take (real runs).")] = 300.0,
    python: Annotated[str, typer.Option("--python", help="Python on the nodes with dsctl and torch importable "
                                        "(real runs).")] = "python3",
    node_profile_name: Annotated[str | None, typer.Option(
        "--node-profile", help="Node profile for the NVLink rate (default: the plan's).")] = None,
    from_perf: Annotated[list[Path] | None, typer.Option(
        "--from-perf", help="Judge these saved perftest / nccl-tests reports instead of running the probe "
        "(repeatable; reports that name no plan node are judged, never drained).")] = None,
    fmt: HealthFormatOpt = HealthFormat.table,
) -> None:
    """Drive every planned cable at line rate round by round; slow flows (vs the simulator) localised to one
    cable, NIC or node. Exit 1 when anything was found."""
    from dsctl.health.burnin.request import BurninRequest
    from dsctl.health.drain import DEFAULT_MAX_DRAIN, parse_max_drain
    from dsctl.units import QuantityError, parse_bytes

    limit = parse_max_drain(max_drain if max_drain is not None else DEFAULT_MAX_DRAIN)
    try:
        size_bytes = int(parse_bytes(size))
    except QuantityError as exc:
        raise InputError(f"--size: {exc}") from None
    if out is not None and out.exists() and not out.is_dir():
        raise InputError(f"--out-dir {out}: exists and is not a folder")
    if textfile_dir is not None and not textfile_dir.is_dir():
        raise InputError(f"--textfile-dir {textfile_dir}: not a folder")
    request = BurninRequest(node_names(nodelist), fraction, mad_k, not no_nvlink, rehearse=fabric_model is not None,
                            reports=bool(from_perf), transport=backend, repeats=repeats, timeout_s=timeout,
                            svg=out is not None)
    request.check()
    text, source = plan_text_of(plan)
    from dsctl.topology.sim import plan_facts

    profile_name, _ = plan_facts(text, source)
    node_profile = profile_store().node(node_profile_name or profile_name or DEFAULT_NODE_PROFILE)
    request = replace(request, nvlink_bytes_per_s=node_profile.nvlink_bytes_per_s / 2)
    if from_perf:
        from dsctl.health.burnin.reports import run_reports

        texts = perf_report_texts(from_perf, "--from-perf")
        result = run_reports(text, source, request, texts, node_profile)
        finish(result, fmt, out, textfile_dir, drain, limit)
        return
    from dsctl.health.burnin.api import run
    from dsctl.output.progress import progress

    factory = None
    if fabric_model is None:
        from dsctl.runners.burnin import ProbeOptions, slurm_measure

        factory = slurm_measure(ProbeOptions(request.transport, size_bytes, request.repeats, request.timeout_s,
                                             partition, python))
        if drain:  # a name Slurm reads as several nodes (a NodeSet) is refused before the first round
            factory = _confirming_nodes(factory, request.nodes)
    else:
        request = replace(request, fabric_doc=fabric_document(fabric_model),
                          fabric_source=f"--fabric-model {fabric_model}")
    view = OutputFormat(fmt.value) if fmt is not HealthFormat.prometheus else OutputFormat.json
    with progress("burn-in", view, total=1) as report:
        result = run(text, source, request, factory,
                     on_round=lambda done, total, name: report(done, total, f"round {done + 1}/{total}: {name}"
                                                               if name != "done" else "done"))
    finish(result, fmt, out, textfile_dir, drain, limit)


def _confirming_nodes(factory: Callable[[SimGraph], Measure], names: tuple[str, ...]
                      ) -> Callable[[SimGraph], Measure]:
    """``factory`` that first has Slurm confirm each tested node (of the plan the burn-in parsed) is one node."""
    from dsctl.health.burnin.api import tested_nodes
    from dsctl.runners.slurm_nodes import confirm_single_nodes

    def confirmed(graph: SimGraph) -> Measure:
        confirm_single_nodes(tested_nodes(graph, names))
        return factory(graph)
    return confirmed


def finish(result: BurninResult, fmt: HealthFormat, out: Path | None, textfile_dir: Path | None, drain: bool,
           limit: DrainLimit) -> None:
    """Write the report, then drain (if asked), then print whatever the drain did."""
    from dsctl.commands._common import show
    from dsctl.health.burnin.api import with_drain_plan
    from dsctl.output import health_burnin as view
    from dsctl.output.emit import envelope, render_json
    from dsctl.output.files import atomic_write, write_files

    prom = view.prometheus_text(result, time.time())
    result = with_drain_plan(result, limit)  # the plan (breaker, commands) is part of the report even without --drain
    if out is not None:
        write_files(out, view.out_files(result, render_json(envelope(result, "health burn-in", result.exit_code)),
                                        prom))
    if textfile_dir is not None:
        atomic_write(textfile_dir / view.TEXTFILE_NAME, prom, option="--textfile-dir")
    failed: DsctlError | None = None  # scontrol failing (exit 3) must outlive the report's own exit status
    try:
        if drain and result.drain is not None:
            from dsctl.runners.drain import plan_and_drain

            try:
                result = replace(result, drain=plan_and_drain(result.drain_wanted(), result.fleet_size, limit))
            except DsctlError as exc:
                failed = exc
    finally:
        try:
            if fmt is HealthFormat.prometheus:
                sys.stdout.write(prom)
                sys.stdout.flush()
                if result.exit_code:
                    raise typer.Exit(result.exit_code)
            else:
                show(result, OutputFormat(fmt.value), "health burn-in")
        finally:
            if failed is not None:
                raise failed


def add_commands(app: typer.Typer) -> None:
    app.command("burn-in")(burn_in)
