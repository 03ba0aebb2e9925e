"""Table views of dsctl topology results."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from dsctl.output.registry import table_renderer
from dsctl.topology.api import PlanResult
from dsctl.topology.sizing import Comparison
from dsctl.topology.verify import VerifyResult

MAX_FINDING_ROWS = 60


def _bisection(gbps: float) -> str:
    """A bisection in the README's one bandwidth unit, decimal GB/s, with the line-rate figure in Tb/s beside it
    (``2,500.0 GB/s (20.0 Tb/s)``), as ``topology simulate`` prints it."""
    return f"{gbps / 8:,.1f} GB/s ({gbps / 1000:,.1f} Tb/s)"


def _usd(value: float) -> str:
    return f"${value / 1e6:,.2f}M" if abs(value) >= 1e6 else f"${value:,.0f}"


@table_renderer(PlanResult)
def _plan(result: PlanResult) -> Iterable[RenderableType]:
    s = result.summary
    table = Table(title=f"{s.kind} plan: {s.num_nodes:,} x {s.node_profile} ({s.num_gpus:,} GPUs), "
                  f"{s.radix}-port {s.switch_profile}", show_header=False, title_justify="left")
    table.add_column("item", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    tiers = f"{s.leaves_per_plane:,} leaves, {s.spines_per_plane:,} spines"
    if s.cores_per_plane:
        tiers += f", {s.cores_per_plane:,} cores in {s.pods_per_plane:,} pods"
    rows = [
        ("planes", f"{s.num_planes} ({s.rails_per_plane} NIC(s) per node per plane)"),
        ("per plane", tiers),
        ("switches", f"{s.num_switches:,}"),
        ("cables node-leaf", f"{s.cables.node_leaf:,}"),
        ("cables leaf-spine", f"{s.cables.leaf_spine:,}"),
    ]
    if s.cables.spine_core:
        rows.append(("cables spine-core", f"{s.cables.spine_core:,}"))
    rows += [
        ("cables total / optics", f"{s.cables.total:,} / {s.cables.num_transceivers:,} transceivers"),
        ("cost", f"{_usd(s.cost.total_usd)} (switches {_usd(s.cost.switches_usd)}, links "
                 f"{_usd(s.cost.inter_switch_links_usd)}, NIC cables {_usd(s.cost.endpoint_links_usd)}); "
                 f"${s.cost.per_gpu_usd:,.0f} per GPU"),
        ("bisection",
         f"{_bisection(s.bisection_gbps_per_plane)} per plane, {_bisection(s.bisection_gbps_total)} total"),
        ("max switch hops", str(s.max_switch_hops)),
        ("oversubscription", "non-blocking" if s.oversubscription == 1 else f"{s.oversubscription:g}:1"),
        ("unused switch ports", f"{s.unused_ports.total:,} (leaf NIC side {s.unused_ports.leaf_down:,}, leaf up "
                                f"{s.unused_ports.leaf_up:,}, spine {s.unused_ports.spine:,}"
                                + (f", core {s.unused_ports.core:,})" if s.cores_per_plane else ")")),
        ("growth", s.growth),
    ]
    for note in s.notes:
        rows.append(("note", note))
    for key, value in rows:
        table.add_row(key, value)
    yield table
    if result.files:
        names = [_relative(f, result.out_dir) for f in result.files]
        yield Text(f"wrote {len(result.files)} files to {result.out_dir}: " + ", ".join(names))


def _relative(path: str, folder: str | None) -> str:
    """``ibnl/DSCTL_SW64.ibnl`` for a file inside ``folder``'s subfolder; the base name otherwise."""
    from pathlib import PurePath

    if folder:
        try:
            return PurePath(path).relative_to(PurePath(folder)).as_posix()
        except ValueError:
            pass
    return path.rsplit("/", 1)[-1]


@table_renderer(Comparison)
def _compare(result: Comparison) -> Iterable[RenderableType]:
    table = Table(title=f"Topologies with {result.radix}-port switches (${result.switch_usd:,.0f} per switch, "
                  f"${result.link_usd:,.0f} per switch-to-switch link)", title_justify="left")
    for col in ("topology", "endpoints", "switches", "links", "cost (M$)", "cost/endpoint (k$)"):
        table.add_column(col, justify="left" if col == "topology" else "right")
    for row in result:
        table.add_row(row.name, f"{row.endpoints:,}", f"{row.switches:,}", f"{row.links:,}",
                      f"{row.cost_usd / 1e6:,.2f}", f"{row.cost_per_endpoint_usd / 1e3:,.2f}")
    yield table
    yield Text("links = switch-to-switch links; cost = switches x switch cost + links x link cost "
               "(NIC cables excluded, as in the paper). SF is formula-sized (q need not be a prime power).",
               style="dim")


def _end(device: str, port: str) -> str:
    """A cable end as a person reads it: ``p0-leaf01 port 3`` on a switch, ``node0001 mlx5_0`` on a node."""
    return f"{device} port {port}" if port.isascii() and port.isdigit() else f"{device} {port}"


@table_renderer(VerifyResult)
def _verify(result: VerifyResult) -> Iterable[RenderableType]:
    ok = result.exit_code == 0
    head = (f"{result.matched_cables:,} of {result.expected_cables:,} planned cables found "
            f"({result.observed_format}, {result.observed_cables:,} observed links"
            + (f", planes {', '.join(map(str, result.planes_checked))}" if len(result.planes_checked) > 1 else "")
            + (f", expected {result.expected_link}" if result.expected_link else "") + ")")
    yield Text(("OK: " if ok else "MISMATCH: ") + head, style="green" if ok else "bold red")
    for warning in result.warnings:
        yield Text(f"warning: {warning}", style="bold yellow")
    if result.switch_internal_links:
        yield Text(f"{result.switch_internal_links:,} switch-internal links (SHARP aggregation nodes, management "
                   "ports) left out: they are no cables", style="dim")
    if result.matched_by_position:
        shown = ", ".join(result.matched_by_position[:5]) + (", ..." if len(result.matched_by_position) > 5 else "")
        yield Text(f"{len(result.matched_by_position):,} HCAs with the default description identified by their "
                   f"planned leaf port, as ibdiagnet -t does ({shown}); set their node description or give "
                   "--node-name-map (--record-guids writes one)", style="yellow")
    if len(result.dumps) > 1:
        for dump in result.dumps:
            other = (", also " + ", ".join(f"{n} devices of plane {p}" for p, n in dump.other_planes.items())
                     if dump.other_planes else "")
            yield Text(f"  {dump.name}: plane {dump.plane}, {dump.num_links:,} links{other}",
                       style="yellow" if dump.other_planes else "dim")
    if ok:
        return
    counts = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in result.counts.items() if v)
    yield Text(counts)
    # four columns so that 80 terminal columns suffice: the three short ones never wrap, and the cable
    # column holds both ends as found plus, dimmed underneath, what the plan has and what to do
    table = Table(title="findings", title_justify="left")
    table.add_column("kind", no_wrap=True)
    table.add_column("plane", no_wrap=True)
    table.add_column("line", justify="right", no_wrap=True)
    table.add_column("cable / action", overflow="fold")
    for f in result.findings[:MAX_FINDING_ROWS]:
        if f.b_device:
            cell = Text(f"{_end(f.a_device, f.a_port)} <-> {_end(f.b_device, f.b_port)}")
        else:
            cell = Text(f.message)
        if f.kind in ("unmatched_device", "degraded_width", "degraded_speed", "error_counters", "link_downed"):
            cell.append("\n" + f.message, style="dim")
        if f.expected:
            for part in f.expected.removeprefix("plan: ").split("; "):
                cell.append("\nplan: " + part, style="dim")
        if f.action:
            cell.append("\n-> " + f.action, style="cyan")
        table.add_row(f.kind, f.plane, "" if f.line is None else str(f.line), cell)
    yield table
    if len(result.findings) > MAX_FINDING_ROWS:
        yield Text(f"... {len(result.findings) - MAX_FINDING_ROWS} more; use --format json for all of them")
    yield Text("cable: as found (missing: as planned); plan: what the plan has at those ports; ->: what to do",
               style="dim")
    if result.unmatched_devices:
        yield Text("devices not in the plan: " + ", ".join(result.unmatched_devices[:20]))
