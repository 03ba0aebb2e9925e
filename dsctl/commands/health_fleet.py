"""dsctl health fleet, and the Slurm and Prometheus pieces of dsctl health check (--slurm-healthcheck,
--format prometheus, --textfile-dir, --from-record templates with ``{node}``)."""

from __future__ import annotations

import os
import socket
import time
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dsctl.commands._common import show
from dsctl.errors import DsctlError, InputError
from dsctl.output.formats import OutputFormat

if TYPE_CHECKING:
    from dsctl.health.api import HealthReport
    from dsctl.health.fleet import FleetReport
    from dsctl.runners.fleet import NodeAnswer

NODE_PLACEHOLDER = "{node}"


class HealthFormat(str, Enum):
    """``--format`` of health check and fleet: the common formats plus Prometheus text exposition."""

    table = "table"
    json = "json"
    yaml = "yaml"
    prometheus = "prometheus"


HealthFormatOpt = Annotated[HealthFormat, typer.Option(
    "--format", "-f", case_sensitive=False, show_default=True,
    help="Output format: table for people, json or yaml for scripts, prometheus for node_exporter.")]
TextfileOpt = Annotated[Path | None, typer.Option(
    "--textfile-dir", help="Also write the Prometheus text to DIR/dsctl_health.prom (atomically), for "
    "node_exporter's --collector.textfile.directory.")]


def node_name() -> str:
    """This node's Slurm name: ``SLURMD_NODENAME`` (set by slurmd for tasks and HealthCheckProgram), else the
    short host name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def record_path(from_record: Path | None) -> Path | None:
    """``--from-record records/{node}.yaml``: ``{node}`` becomes this node's Slurm name (a plain name only)."""
    if from_record is None or NODE_PLACEHOLDER not in str(from_record):
        return from_record
    from dsctl.runners.fleet import valid_node_name

    name = node_name()
    if not valid_node_name(name):
        raise InputError(f"--from-record {from_record}: node name {name!r} cannot fill {{node}}",
                         hint="node names are letters, digits, '.', '_' and '-'")
    text = str(from_record)
    if text.replace(NODE_PLACEHOLDER, "").count("{") or text.replace(NODE_PLACEHOLDER, "").count("}"):
        raise InputError(f"--from-record {from_record}: only {{node}} may appear in braces")
    return Path(text.replace(NODE_PLACEHOLDER, name))


def emit_health(result: HealthReport | FleetReport, fmt: HealthFormat, command: str,
                textfile_dir: Path | None) -> None:
    """Print ``result`` in ``fmt``; with ``textfile_dir`` also write its Prometheus text there; exit with its code."""
    if fmt is HealthFormat.prometheus or textfile_dir is not None:
        text = prometheus_text(result)
        if textfile_dir is not None:
            write_textfile(textfile_dir, text)
        if fmt is HealthFormat.prometheus:
            from dsctl.output.emit import emit_text

            emit_text(text)
            if result.exit_code:
                raise typer.Exit(result.exit_code)
            return
    show(result, OutputFormat(fmt.value), command)


def prometheus_text(result: HealthReport | FleetReport) -> str:
    from dsctl.health.fleet import FleetReport
    from dsctl.output import prometheus

    now = time.time()
    if isinstance(result, FleetReport):
        return prometheus.render_fleet(result, now)
    return prometheus.render_check(result, now)


def write_textfile(folder: Path, text: str) -> None:
    from dsctl.output.files import atomic_write
    from dsctl.output.prometheus import TEXTFILE_NAME

    if not folder.is_dir():
        raise InputError(f"--textfile-dir {folder}: not a folder",
                         hint="give node_exporter's --collector.textfile.directory (it must exist)")
    atomic_write(folder / TEXTFILE_NAME, text, option="--textfile-dir")


def drain_self(report: HealthReport) -> None:
    """NHC's convention: a CRIT finding drains this node with dsctl's reason; a healthy node is left alone, and a
    node already drained for another reason (an operator's) keeps that reason."""
    from dsctl.health.drain import is_ours
    from dsctl.health.fleet import self_drain_reason
    from dsctl.output import stderr_console
    from dsctl.runners.fleet import drain_node, node_drain_state

    why = self_drain_reason(report)
    if why is None:
        return
    name = node_name()
    drained, reason = node_drain_state(name)
    if reason and reason not in ("none", "(null)") and not is_ours(reason):
        state = "already drained" if drained else "carrying another reason"
        stderr_console().print(f"{name} is {state} ({reason}); not changing it", markup=False)
        return
    error = drain_node(name, why)
    if error:
        stderr_console().print(f"error: could not drain {name}: {error}", markup=False)
    else:
        stderr_console().print(f"drained {name}: {why}", markup=False)


#: key of a digested answer that is not a readable health check report (its value says why)
_UNREADABLE = "dsctl_unreadable"


def _digest_report(document: Any, digest: Any, read_node_report: Any) -> dict[str, Any]:
    """Check a node's answer as a ``health check`` report (schema version, command, error envelope), then keep
    only its digest; an unreadable answer keeps only the reason."""
    report = read_node_report("", document, "health check")
    if report.data is None:
        return {_UNREADABLE: report.reason}
    return digest(report.data)


def fleet(
    nodelist: Annotated[str, typer.Option("--nodelist", "-w", help="Slurm hostlist, e.g. 'node[001-256]'.")],
    partition: Annotated[str | None, typer.Option("--partition", "-p", help="Slurm partition to run in.")] = None,
    interval: Annotated[float | None, typer.Option("--interval-s", help="Seconds between the two counter samples "
                                                   "on each node (default 10; a record carries its own).")] = None,
    timeout: Annotated[float, typer.Option("--timeout-s", help="Seconds each node may take; later it is "
                                           "unreachable.")] = 120.0,
    launch_timeout: Annotated[float, typer.Option("--launch-timeout-s", help="Seconds to get the nodes and start "
                                                  "the tasks.")] = 60.0,
    drain: Annotated[bool, typer.Option("--drain", help="Drain every critical node (scontrol update); without "
                                        "it the commands are only printed.")] = False,
    max_drain: Annotated[str | None, typer.Option(
        "--max-drain", help="Circuit breaker: drain nothing when more than N "
                                           "nodes (or P% of them) would be drained; default 10%.")] = None,
    from_record: Annotated[str | None, typer.Option("--from-record", help="Each node replays a record; {node} "
                                                    "becomes its Slurm name (records/{node}.yaml).")] = None,
    node: Annotated[str | None, typer.Option("--node-profile", help="Node profile with the expected counts.")] = None,
    only: Annotated[str | None, typer.Option("--only", help="Comma list of areas: gpu, nvlink, rdma.")] = None,
    dsctl_path: Annotated[str, typer.Option("--dsctl", help="dsctl on the nodes (name on PATH or absolute "
                                            "path).")] = "dsctl",
    srun_arg: Annotated[list[str] | None, typer.Option("--srun-arg", help="Extra srun option, repeatable, e.g. "
                                                       "--srun-arg=--reservation=maint.")] = None,
    textfile_dir: TextfileOpt = None,
    fmt: HealthFormatOpt = HealthFormat.table,
) -> None:
    """Run dsctl health check on every node through srun; one verdict, the nodes to drain; exit 1 when a node is
    critical or unreachable."""
    from dsctl.cluster.hostlist import node_names
    from dsctl.health import api
    from dsctl.health.drain import DEFAULT_MAX_DRAIN, parse_max_drain
    from dsctl.health.fleet import NodeInput, aggregate, check_fleet_options, digest, with_drain_results
    from dsctl.launch.engines.slurm_options import reserved_prefix
    from dsctl.output import health_fleet as _renderer  # noqa: F401  (registers the table view)
    from dsctl.output.envelope import read_node_report
    from dsctl.runners.drain import plan_and_drain
    from dsctl.runners.fleet import FIXED_SRUN_OPTIONS, run_on_nodes

    limit = parse_max_drain(max_drain if max_drain is not None else DEFAULT_MAX_DRAIN)

    if only is not None:
        api.parse_only(only)
    check_fleet_options(timeout, launch_timeout, interval, from_record is not None)
    command = [dsctl_path, "health", "check", "--format", "json"]
    if from_record is not None:
        command += ["--from-record", _absolute(Path(from_record))]
    for option, value in (("--interval-s", interval), ("--node-profile", node), ("--only", only)):
        if value is not None:
            command += [option, f"{value:g}" if isinstance(value, float) else str(value)]
    extra = list(srun_arg or [])
    for arg in extra:
        name = arg.split("=", 1)[0]
        if (not arg.startswith("--") or len(name) < 3
                or reserved_prefix(name[2:], [o[2:] for o in FIXED_SRUN_OPTIONS]) is not None):
            raise InputError(f"--srun-arg {arg!r}: give a long srun option (--name=value) that dsctl does not set",
                             hint="dsctl sets " + ", ".join(sorted(FIXED_SRUN_OPTIONS)))
    names = node_names(nodelist, option="--nodelist")
    from dsctl.output.progress import progress

    with progress(f"asking {len(names)} nodes (per-node timeout {timeout:g} s), nodes answered",
                  OutputFormat.table if fmt.value == "table" else None, total=len(names)) as answered:
        run = run_on_nodes(names, command, timeout_s=timeout, launch_timeout_s=launch_timeout,
                           partition=partition, ok_exit_codes=(0, 1), job_name="dsctl-health", extra_srun_args=extra,
                           digest=lambda doc: _digest_report(doc, digest, read_node_report), report=answered)
    items = [NodeInput(a.node, None, a.document[_UNREADABLE])
             if a.document is not None and _UNREADABLE in a.document
             else NodeInput(a.node, a.document, missing_dsctl_reason(a, dsctl_path)) for a in run.answers]
    report = aggregate(items, timeout_s=timeout, wall_s=run.wall_s)
    if drain and report.drain:
        if textfile_dir is not None:  # the report is on disk before any node is drained
            write_textfile(textfile_dir, prometheus_text(report))
            textfile_dir = None
        failed: DsctlError | None = None  # scontrol failing (exit 3) must outlive the report's own exit status
        try:
            plan = plan_and_drain([(d.node, d.reason) for d in report.drain], len(names), limit)
            results = {s.node: (None if s.done else s.error) for s in plan.steps if s.done is not None}
            report = with_drain_results(report, results, plan.message)
        except DsctlError as exc:
            failed = exc
        finally:  # printed whatever the drain did
            try:
                emit_health(report, fmt, "health fleet", textfile_dir)
            finally:
                if failed is not None:
                    raise failed
        return
    emit_health(report, fmt, "health fleet", textfile_dir)


def _absolute(path: Path) -> str:
    """``path`` from the node's point of view (its own working folder differs); a relative path needs this
    folder, which may have been deleted under the shell (exit 2, not a traceback)."""
    try:
        return str(path.absolute())
    except OSError as exc:
        raise InputError(f"--from-record {path}: the current folder is gone ({exc.strerror or exc}); give an "
                         "absolute path") from None


def missing_dsctl_reason(answer: NodeAnswer, dsctl_path: str) -> str:
    """The node's reason, with the way out when it could not run dsctl (exit 127: not found, 126: not executable;
    ``timeout: failed to run command 'dsctl'``): name ``--dsctl PATH``."""
    if answer.exit_code not in (126, 127):
        return answer.reason
    program = Path(dsctl_path).name
    if answer.stderr_tail and program not in answer.stderr_tail:
        return str(answer.reason)  # another program is missing (e.g. coreutils' timeout)
    what = "is not on PATH" if answer.exit_code == 127 else "is not executable"
    if Path(dsctl_path).is_absolute():
        what = "does not exist" if answer.exit_code == 127 else "is not executable"
    return (f"exit {answer.exit_code}: {dsctl_path} {what} on the node; install dsctl there, or give its path "
            "with --dsctl PATH (e.g. --dsctl /opt/dsctl/bin/dsctl)")


def add_commands(app: typer.Typer) -> None:
    app.command("fleet")(fleet)
