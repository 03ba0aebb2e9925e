"""dsctl health check|record|show: GPU, NVLink and RDMA health through NVML and sysfs, live or from a record."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dsctl.commands._common import FormatOpt, profile_store, read_input, read_text_input, show
from dsctl.commands.health_burnin import add_commands as add_burnin_commands
from dsctl.commands.health_fleet import (
    HealthFormat,
    HealthFormatOpt,
    TextfileOpt,
    add_commands,
    drain_self,
    emit_health,
    record_path,
)
from dsctl.commands.health_perf import add_commands as add_perf_commands
from dsctl.errors import DsctlError, InputError
from dsctl.output.formats import OutputFormat

if TYPE_CHECKING:
    from dsctl.health.model import NodeSnapshot

#: request field (named by dsctl.health's errors) -> the option that sets it
FIELD_OPTIONS: dict[str, str] = {
    **{name: "--" + name.replace("_", "-") for name in (
        "only", "fail_on", "sysfs_root", "from_record", "interval_s", "fraction", "timeout_s", "launch_timeout_s")},
    "slurm_healthcheck": "--slurm-healthcheck",
    # dsctl.health.burnin.request's fields
    "burn-in out": "--out-dir", "burn-in nodes": "--nodelist", "burn-in mad_k": "--mad-k",
    "burn-in nvlink": "--no-nvlink", "burn-in rehearse": "--fabric-model", "burn-in reports": "--from-perf",
    "burn-in transport": "--transport", "burn-in repeats": "--repeats", "burn-in timeout_s": "--timeout-s",
}

app = typer.Typer(
    name="health",
    help="GPU, NVLink and RDMA health through NVML and sysfs (live, or replayed from a recorded node).",
    no_args_is_help=True,
)

NodeOpt = Annotated[str | None, typer.Option("--node-profile", help="Node profile with the expected counts "
                                             "(default: chosen from the GPU SKU, e.g. h800-hgx).")]
SysfsOpt = Annotated[Path | None, typer.Option("--sysfs-root", help="Read sysfs under this folder instead of /.")]
IntervalOpt = Annotated[float | None, typer.Option("--interval-s", help="Seconds between the two counter samples "
                                                   "(default 10 live; a record carries its own); 0 takes one "
                                                   "sample and skips the rate checks.")]
RecordOpt = Annotated[Path | None, typer.Option("--from-record", help="Replay a recorded (or hand-written) "
                                                "fake-node YAML instead of reading this machine.")]


def load_record(path: Path) -> Any:
    """The parsed ``--from-record`` YAML (validated by :func:`dsctl.health.source.choose_source`)."""
    from dsctl.profiles.textyaml import load_yaml

    text = read_text_input(path, "--from-record", hint="give a YAML file written by dsctl health record")
    return load_yaml(text, f"--from-record {path}")


def take_snapshot(from_record: Path | None, sysfs_root: Path | None, interval_s: float | None,
                  areas: tuple[str, ...], fmt: OutputFormat | None = None) -> NodeSnapshot:
    """One snapshot of this node or the record; live sampling shows progress on a terminal for table ``fmt``."""
    from dsctl.health.backends.source import open_source
    from dsctl.health.sample import sample_sources
    from dsctl.health.source import check_interval, choose_source
    from dsctl.output.progress import progress, sleep_reporting

    check_interval(interval_s)
    choice = choose_source(record_name=str(from_record) if from_record is not None else None,
                           read_record=(lambda: load_record(from_record)) if from_record is not None else None,
                           sysfs_root=str(sysfs_root) if sysfs_root is not None else None, interval_s=interval_s)
    with progress("sampling counters", fmt if choice.live else None, total=choice.interval_s) as report, \
            open_source(choice, areas, sleep=lambda seconds: sleep_reporting(seconds, report)) as src:
        return sample_sources(src)


@app.command("check")
def check(
    node: NodeOpt = None,
    sysfs_root: SysfsOpt = None,
    interval: IntervalOpt = None,
    from_record: RecordOpt = None,
    only: Annotated[str | None, typer.Option("--only", help="Comma list of areas: gpu, nvlink, rdma.")] = None,
    fail_on: Annotated[str, typer.Option("--fail-on", help="Exit 1 on findings at or above: crit or warn.")] = "crit",
    kernel_log: Annotated[Path | None, typer.Option("--kernel-log", help="Text of journalctl -k / dmesg to scan "
                                                    "for Xids (G22).")] = None,
    expect_gpus: Annotated[int | None, typer.Option("--expect-gpus", min=0, max=64,
                                                    help="GPUs this node must have (overrides the node profile's "
                                                    "count; G2).")] = None,
    slurm: Annotated[bool, typer.Option("--slurm-healthcheck", help="Slurm HealthCheckProgram mode: drain this node "
                                        "(SLURMD_NODENAME) with dsctl's reason on a CRIT finding.")] = False,
    textfile_dir: TextfileOpt = None,
    fmt: HealthFormatOpt = HealthFormat.table,
) -> None:
    """Run every health check; exit 0 healthy, 1 on a finding at/above --fail-on, 2 bad input, 3 no NVML."""
    from dsctl.health import api

    from_record = record_path(from_record)
    if slurm and from_record is None:
        from dsctl.health.fleet import slurm_check_interval

        interval = slurm_check_interval(interval)
    areas = api.parse_only(only)
    threshold = api.parse_fail_on(fail_on)
    log_text = None
    if kernel_log is not None:
        log_text = read_input(kernel_log, "--kernel-log").decode("utf-8", errors="replace")
    profile = profile_store().node(node) if node else None
    progress_fmt = OutputFormat.table if fmt == HealthFormat.table else None  # progress on a terminal, tables only
    snap = take_snapshot(from_record, sysfs_root, interval, areas, progress_fmt)
    exp = api.choose_expectations(snap, profile, profile_store().node, expect_gpus=expect_gpus)
    report = api.run_checks(snap, exp, areas=areas, fail_on=threshold, kernel_log=log_text)
    failed: DsctlError | None = None  # scontrol failing (exit 3) comes after the report, not instead of it
    if slurm:
        try:
            drain_self(report)
        except DsctlError as exc:
            failed = exc
    try:
        emit_health(report, fmt, "health check", textfile_dir)
    finally:
        if failed is not None:
            raise failed


@dataclass(frozen=True)
class RecordResult:
    """What ``dsctl health record`` wrote."""

    path: str
    hostname: str
    num_gpus: int
    num_nics: int
    interval_s: float


@app.command("record")
def record(
    out: Annotated[Path, typer.Option("--out", "-o", help="Fake-node YAML to write (atomically).")],
    sysfs_root: SysfsOpt = None,
    interval: IntervalOpt = None,
    from_record: RecordOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Sample this node (NVML + sysfs, counters twice) into a fake-node YAML that --from-record replays."""
    from dsctl.health import api
    from dsctl.health.record.write import snapshot_record
    from dsctl.output.files import atomic_write
    from dsctl.output.yamltext import dump_yaml

    if out.is_dir():
        raise InputError(f"--out {out}: is a folder; give a file name such as {out / 'node.yaml'}")
    from dsctl.output.files import check_target

    check_target(out, "--out")  # before sampling: a link, device or FIFO is never replaced
    snap = take_snapshot(from_record, sysfs_root, interval, api.AREAS, fmt)
    data = snapshot_record(snap)
    text = "# dsctl health record: replay with dsctl health check --from-record FILE\n" + dump_yaml(data)
    atomic_write(out, text, option="--out")
    show(RecordResult(str(out), snap.hostname, len(snap.gpus), len(snap.nics), snap.interval_s), fmt,
         "health record")


@app.command("show")
def show_inventory(
    sysfs_root: SysfsOpt = None,
    from_record: RecordOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Inventory: GPUs, NVLinks, RDMA NICs and the GPU<->NIC pairing (nearest NIC and its PCIe level)."""
    from dsctl.health import api, inventory

    snap = take_snapshot(from_record, sysfs_root, 0.0 if from_record is None else None, api.AREAS)
    show(inventory.build(snap), fmt, "health show")


@app.command("checks")
def checks(fmt: FormatOpt = OutputFormat.table) -> None:
    """Every check of health check: its id (G1..G22 GPU and NVLink, R1..R12 RDMA), name, what it reads and how it
    judges (thresholds and their sources)."""
    from dsctl.health.check_catalog import check_catalog

    show(check_catalog(), fmt, "health checks")


@app.command("topo")
def topo(
    node: NodeOpt = None,
    sysfs_root: SysfsOpt = None,
    from_record: RecordOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """GPU/NIC PCIe matrix like nvidia-smi topo -m (X, NV#, PIX, PXB, PHB, NODE, SYS) and the network plane each
    compute NIC serves. Without NVML the GPUs come from sysfs (bus order, no NVLink counts)."""
    from dsctl.health import api
    from dsctl.health.backends.base import LibraryMissing
    from dsctl.health.topo import build_topo
    from dsctl.output import health_topo as _topo_view  # noqa: F401  (registers the table view)

    profile = profile_store().node(node) if node else None
    try:
        snap = take_snapshot(from_record, sysfs_root, 0.0, api.AREAS)
    except LibraryMissing:
        snap = take_snapshot(from_record, sysfs_root, 0.0, ("rdma",))
    show(build_topo(snap, api.choose_expectations(snap, profile, profile_store().node)), fmt, "health topo")


add_commands(app)  # dsctl health fleet (dsctl/commands/health_fleet.py)
add_burnin_commands(app)  # dsctl health burn-in (dsctl/commands/health_burnin.py)
add_perf_commands(app)  # dsctl health perf (dsctl/commands/health_perf.py)
