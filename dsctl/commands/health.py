"""dsctl health check|record|show: GPU, NVLink and RDMA health through NVML and sysfs, live or from a record."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dsctl.commands._common import FormatOpt, profile_store, read_input, read_text_input, show
from dsctl.commands._record_values import check_record_numbers
from dsctl.commands.health_burnin import add_commands as add_burnin_commands
from dsctl.commands.health_fleet import (
    HealthFormat,
    HealthFormatOpt,
    TextfileOpt,
    add_commands,
    drain_self,
    emit_health,
    record_path,
    slurm_check_interval,
)
from dsctl.errors import InputError
from dsctl.output.formats import OutputFormat

if TYPE_CHECKING:
    from dsctl.health.backends.base import GpuBackend, RdmaSource
    from dsctl.health.model import HostFacts, NodeSnapshot

app = typer.Typer(
    name="health",
    help="GPU, NVLink and RDMA health through NVML and sysfs (live, or replayed from a recorded node).",
    no_args_is_help=True,
)

NodeOpt = Annotated[str | None, typer.Option("--node", help="Node profile with the expected counts "
                                             "(default: chosen from the GPU SKU, e.g. h800-hgx).")]
SysfsOpt = Annotated[Path | None, typer.Option("--sysfs-root", help="Read sysfs under this folder instead of /.")]
IntervalOpt = Annotated[float | None, typer.Option("--interval", help="Seconds between the two counter samples "
                                                   "(default 10 live; a record carries its own); 0 takes one "
                                                   "sample and skips the rate checks.")]
RecordOpt = Annotated[Path | None, typer.Option("--from-record", help="Replay a recorded (or hand-written) "
                                                "fake-node YAML instead of reading this machine.")]


MAX_INTERVAL_S = 3600.0  # counters are sampled twice this far apart; longer is a typo (the command would just wait)


def load_record(path: Path) -> dict[str, Any]:
    """Parse a fake-node YAML file into a dict (validated later by the fake and the renderer)."""

    text = read_text_input(path, "--from-record", hint="give a YAML file written by dsctl health record")
    from dsctl.profiles.textyaml import load_yaml

    data = load_yaml(text, f"--from-record {path}")
    if not isinstance(data, dict):
        raise InputError(f"--from-record {path}: expected a mapping of fake-node keys (hostname, gpus, nics, ...)",
                         hint="write one with 'dsctl health record --out node.yaml'")
    check_record_numbers(data, f"--from-record {path}")
    return data


@dataclass
class Sources:
    gpus: GpuBackend | None
    rdma: RdmaSource | None
    wait: Callable[[float], None]
    interval_s: float
    hostname: str
    host: HostFacts | None
    kernel_log: str | None = None


@contextmanager
def open_sources(from_record: Path | None, sysfs_root: Path | None, interval_s: float | None,
                 areas: tuple[str, ...]) -> Iterator[Sources]:
    """Live NVML + sysfs, or a record replayed through the real adapter over the fake NVML module and a sysfs
    tree rendered into a temporary folder (removed afterwards)."""
    from dsctl.health.backends.host import read_host_facts
    from dsctl.health.backends.nvml import backend_from_record, live_backend
    from dsctl.health.backends.sysfs import SysfsReader, render_sysfs, write_counters
    from dsctl.health.model import HostFacts
    from dsctl.health.record.format import normalize

    want_gpus = bool({"gpu", "nvlink"} & set(areas))
    if from_record is not None and sysfs_root is not None:
        raise InputError("--sysfs-root and --from-record exclude each other",
                         hint="a record carries its own sysfs view; drop --sysfs-root")
    if from_record is not None and interval_s is not None and interval_s != 0:
        raise InputError("--interval does not apply to --from-record (except 0: replay the first sample only)",
                         hint="the record carries the interval its two counter samples were taken apart (interval_s)")
    if from_record is not None:
        data = load_record(from_record)
        node = normalize(data, str(from_record))
        backend, fake = backend_from_record(data, source=str(from_record))
        with tempfile.TemporaryDirectory(prefix="dsctl-health-") as tmp:
            render_sysfs(node, Path(tmp))

            def advance(_: float) -> None:
                fake.advance()
                write_counters(node, Path(tmp), "t1")

            yield Sources(backend if want_gpus else None, SysfsReader(tmp), advance,
                          float(node["interval_s"]) if interval_s is None else 0.0, node["hostname"],
                          HostFacts(**node["host"]) if node["host"] is not None else None, node["kernel_log"])
        return
    root = sysfs_root if sysfs_root is not None else Path("/")
    if sysfs_root is not None and not sysfs_root.is_dir():
        raise InputError(f"--sysfs-root {sysfs_root}: not a folder")
    host = read_host_facts()
    yield Sources(live_backend() if want_gpus else None, SysfsReader(root), time.sleep,
                  10.0 if interval_s is None else interval_s, host.hostname or "unknown-host", host)


def take_snapshot(from_record: Path | None, sysfs_root: Path | None, interval_s: float | None,
                  areas: tuple[str, ...], fmt: OutputFormat | None = None) -> NodeSnapshot:
    """One snapshot of this node or the record; live sampling shows progress on a terminal for table ``fmt``."""
    from dsctl.health.sample import sample_node
    from dsctl.output.progress import progress, sleep_reporting

    if interval_s is not None and not 0 <= interval_s <= MAX_INTERVAL_S:  # also rejects nan
        raise InputError(f"--interval must be 0 (one sample, rate checks skipped) or a number of seconds up to "
                         f"{MAX_INTERVAL_S:g}, got {interval_s:g}")
    with open_sources(from_record, sysfs_root, interval_s, areas) as src, \
            progress("sampling counters", fmt if from_record is None else None, total=src.interval_s) as report:
        wait = src.wait if from_record is not None else lambda seconds: sleep_reporting(seconds, report)
        try:
            return sample_node(src.gpus, src.rdma, src.interval_s, wait, hostname=src.hostname, host=src.host,
                               kernel_log=src.kernel_log)
        except (ValueError, TypeError, OverflowError, KeyError, IndexError, AttributeError) as exc:
            if from_record is None:
                raise
            # a replayed record is data: a value of the wrong type (a word, null or NaN where NVML returns a whole
            # number, an integer beyond 64 bits) is bad input, not a bug
            raise InputError(f"--from-record {from_record}: a value has the wrong type for its field "
                             f"({type(exc).__name__}: {str(exc)[:120]})",
                             hint="counters, widths, generations and limits are whole numbers"
                             ) from None


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
    slurm: Annotated[bool, typer.Option("--slurm", help="Slurm HealthCheckProgram mode: drain this node "
                                        "(SLURMD_NODENAME) with dsctl's reason on a CRIT finding.")] = False,
    textfile_dir: TextfileOpt = None,
    fmt: HealthFormatOpt = HealthFormat.table,
) -> None:
    """Run every health check; exit 0 healthy, 1 on a finding at/above --fail-on, 2 bad input, 3 no NVML."""
    from dsctl.health import api

    from_record = record_path(from_record)
    if slurm and from_record is None:
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
    if slurm:
        drain_self(report)
    emit_health(report, fmt, "health check", textfile_dir)


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
    import yaml

    from dsctl.health import api
    from dsctl.health.record.write import snapshot_record
    from dsctl.output.files import atomic_write

    if out.is_dir():
        raise InputError(f"--out {out}: is a folder; give a file name such as {out / 'node.yaml'}")
    snap = take_snapshot(from_record, sysfs_root, interval, api.AREAS, fmt)
    data = snapshot_record(snap)
    text = "# dsctl health record: replay with dsctl health check --from-record FILE\n" + yaml.safe_dump(
        data, sort_keys=False, default_flow_style=None, width=120)
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
