"""Table views of dsctl storage results."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import RenderableType
from rich.table import Table

from dsctl.output.registry import table_renderer
from dsctl.storage.api import ChainsResult
from dsctl.storage.balance import Balance, LoadSpread
from dsctl.storage.crosscheck import CheckResult
from dsctl.storage.doctor import DoctorResult
from dsctl.storage.expand import ExpandResult
from dsctl.storage.sizing import SizingResult
from dsctl.units import human_bytes

MAX_PROBLEM_ROWS = 40
_NAMES = {"ssd": "SSDs", "storage_nic": "storage NICs", "client_nic": "client NICs"}


def _rate(bytes_per_s: float) -> str:
    """Bandwidth in decimal GB/s (the tables' one unit for bandwidth), line-rate bits in parentheses."""
    return f"{bytes_per_s / 1e9:,.2f} GB/s ({bytes_per_s * 8 / 1e9:,.0f} Gb/s)"


def _kv(title: str) -> Table:
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("item", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    return table


@table_renderer(SizingResult)
def _size(result: SizingResult) -> Iterable[RenderableType]:
    r = result
    table = _kv(f"3FS sizing: {r.num_nodes} x {r.profile}, replication {r.replication}, "
                f"{r.targets_per_ssd} targets per SSD")
    clients = f"{r.num_clients:,}" if r.num_clients else "not given (client side not modelled)"
    table.add_row("clients", clients)
    table.add_row("raw capacity", human_bytes(r.raw_capacity_bytes))
    table.add_row("usable capacity", f"{human_bytes(r.usable_capacity_bytes)} (fill {r.fill:g}, / {r.replication})")
    table.add_row("chains", f"{r.num_chains:,}" + (f" ({r.unused_targets} target slots unused)"
                                                   if r.unused_targets else ""))
    for label, ceiling in (("read ceiling", r.read), ("write ceiling", r.write),
                           ("read, one node down", r.degraded_read)):
        table.add_row(label, f"{_rate(ceiling.bytes_per_s)}, bound by {_NAMES.get(ceiling.bound_by, ceiling.bound_by)}")
    table.add_row("per storage node", f"read {_rate(r.per_node_read_bytes_per_s)}, "
                                      f"write {_rate(r.per_node_write_bytes_per_s)}")
    table.add_row("SSDs", f"{r.num_ssds:,}")
    loss = r.one_node_loss
    if loss is not None:
        table.add_row("losing one node", f"capacity -{human_bytes(loss.raw_capacity_bytes)} raw, "
                                         f"-{human_bytes(loss.usable_capacity_bytes)} usable; read "
                                         f"-{loss.read_loss_fraction:.1%} to {_rate(loss.degraded_read_bytes_per_s)}")
        table.add_row("rebuild of its replicas", f"{human_bytes(loss.data_bytes)} at "
                                                 f"{_rate(loss.recovery_bytes_per_s)} ({loss.recovery_bound_by}): "
                                                 f"{loss.rebuild_s / 3600:,.1f} h")
    yield table
    if r.targets:
        checks = Table(title="targets", title_justify="left")
        for column in ("target", "required", "this cluster", "met", "smallest node count"):
            checks.add_column(column)
        for t in r.targets:
            fmt = {"bytes": human_bytes, "bytes/s": lambda x: _rate(x), "s": lambda x: f"{x:,.1f} s"}[t.unit]
            checks.add_row(t.name, fmt(t.required), fmt(t.available), "yes" if t.met else "[red]NO[/red]",
                           f"{t.min_nodes:,}" if t.min_nodes is not None else "n/a")
        yield checks
        if r.min_nodes_for_targets is not None:
            yield f"smallest node count meeting every target: {r.min_nodes_for_targets:,}"
    for note in r.notes:
        yield f"note: {note}"


def _spread(s: LoadSpread) -> str:
    return f"{s.max:g} / {s.min:g} / {s.ideal:.2f}"


def _hist(hist: dict[int, int]) -> str:
    return ", ".join(f"{k}:{v}" for k, v in hist.items())


def _balance_rows(table: Table, b: Balance) -> None:
    table.add_row("chains / targets", f"{b.num_chains:,} / {b.num_targets:,}")
    table.add_row("ideal pair-share per disk", f"{b.ideal_pair_share_per_disk:.2f}")
    table.add_row("pair-share, one disk index", _hist(b.pair_share_disk0))
    table.add_row("pair-share, all disks", _hist(b.pair_share_total))
    table.add_row("redirect max/min/ideal", _spread(b.redirect))
    table.add_row("sync source max/min/ideal", _spread(b.sync_source))
    table.add_row("head max/min/ideal", _spread(b.head))
    table.add_row("tail max/min/ideal", _spread(b.tail))


@table_renderer(ChainsResult)
def _chains(result: ChainsResult) -> Iterable[RenderableType]:
    r = result
    table = _kv(f"chain table {r.chain_table_id}: {r.num_nodes} nodes ({r.first_node_id}..{r.last_node_id}) x "
                f"{r.ssds_per_node} SSDs, replication {r.replication}, {r.targets_per_ssd} targets per SSD")
    table.add_row("construction", f"{r.method}, {'rotated' if r.rotated else 'ascending node order'}; "
                                  f"{r.chains_per_disk:,} chains per disk index")
    _balance_rows(table, r.balance)
    yield table
    for note in r.notes:
        yield f"note: {note}"
    if r.files:
        yield "wrote " + ", ".join(r.files)
        yield "upload (admin_cli prefix omitted):"
        for i, step in enumerate(r.upload):
            yield f"  {i}. {step}"
    else:
        yield "no files written (give --out-dir DIR)"


@table_renderer(CheckResult)
def _check(result: CheckResult) -> Iterable[RenderableType]:
    r = result
    plural = "s" if r.num_nodes != 1 else ""
    title = (f"chain table {r.source}: {r.num_chains:,} chains over {r.num_nodes} node{plural} "
             f"({r.first_node_id}..{r.last_node_id}), nodes from {r.node_source}")
    if r.balance is not None:
        table = _kv(title)
        _balance_rows(table, r.balance)
        yield table
    else:
        yield title
        yield ("balance not measured: " + ("fix the problems below first" if r.problems
                                           else "it needs chains over at least 2 nodes"))
    yield "files checked: " + ", ".join(r.files_checked)
    for note in r.notes:
        yield f"note: {note}"
    if r.problems:
        total = len(r.problems) + r.problems_not_listed
        problems = Table(title=f"{total} problems", title_justify="left")
        problems.add_column("where")
        problems.add_column("chain id")
        problems.add_column("problem")
        for p in r.problems[:MAX_PROBLEM_ROWS]:
            problems.add_row(p.where, str(p.chain_id) if p.chain_id else "", p.problem)
        yield problems
        if total > MAX_PROBLEM_ROWS:
            yield f"... {total - MAX_PROBLEM_ROWS:,} more (use --format json for the first 1,000)"
    else:
        yield ("no problems: ids well formed, every chain the same length on distinct nodes, "
               + ("and the files agree with each other" if len(r.files_checked) > 1 else "one file checked"))


MAX_STEP_ROWS = 12


@table_renderer(ExpandResult)
def _expand(result: ExpandResult) -> Iterable[RenderableType]:
    r = result
    table = _kv(f"expand {r.source}: {r.old_nodes} + {r.added_nodes} = {r.new_nodes} nodes "
                f"(new ids from {r.first_new_node_id}), {r.ssds_per_node} SSDs, replication {r.replication}")
    table.add_row("targets per SSD", f"{r.old_targets_per_ssd} -> {r.new_targets_per_ssd}")
    table.add_row("chains", f"{r.chains_unchanged:,} unchanged, {r.chains_changed:,} with replacements, "
                            f"{r.chains_added:,} new (empty)")
    table.add_row("targets kept in place", f"{r.targets_kept:,}")
    table.add_row("replacements", f"{r.replacements:,} in {r.waves} wave(s), {human_bytes(r.bytes_per_target)} each")
    table.add_row("data moved", f"{human_bytes(r.moved_bytes)} = {r.moved_over_bound:.3f} x lower bound "
                                f"{human_bytes(r.lower_bound_bytes)}")
    table.add_row("lower bound", r.bound)
    _balance_rows(table, r.balance)
    table.add_row("check-chains on the result", "passes" if not r.check_problems else
                  f"{len(r.check_problems)} problems: {r.check_problems[0]}")
    yield table
    if r.steps:
        steps = Table(title=f"migration: first {min(MAX_STEP_ROWS, len(r.steps))} of {len(r.steps):,} steps",
                      title_justify="left")
        for column in ("step", "wave", "chain", "old target (node)", "new target (node)", "copies"):
            steps.add_column(column)
        for s in r.steps[:MAX_STEP_ROWS]:
            steps.add_row(str(s.step), str(s.wave), str(s.chain_id), f"{s.old_target} ({s.old_node})",
                          f"{s.new_target} ({s.new_node})", human_bytes(s.bytes))
        yield steps
    for note in r.notes:
        yield f"note: {note}"
    if r.files:
        yield "wrote " + ", ".join(r.files)
        yield ("order: create_new_chain_targets_cmd.txt, upload-chains new_chains.csv, upload-chain-table "
               "generated_chain_table.csv (new version), then migration_steps.txt wave by wave")
    else:
        yield "no files written (give --out-dir DIR)"


MAX_FINDING_ROWS = 30


@table_renderer(DoctorResult)
def _doctor(result: DoctorResult) -> Iterable[RenderableType]:
    r = result
    table = _kv(f"3FS doctor: {r.num_chains:,} chains, {r.num_targets:,} targets, replication {r.replication}")
    table.add_row("verdict", r.verdict)
    table.add_row("chains", f"{r.chains_serving:,} fully serving, {r.chains_lost_redundancy:,} lost redundancy "
                            f"({r.chains_unavailable:,} unavailable, {r.chains_single_point:,} on one member), "
                            f"{r.chains_syncing:,} syncing")
    table.add_row("target states", ", ".join(f"{k} {v:,}" for k, v in r.state_counts.items()))
    yield table
    if r.nodes:
        nodes = Table(title="nodes needing attention", title_justify="left")
        for column in ("node", "targets", "offline", "lastsrv", "syncing", "waiting", "disks",
                       "chains it alone serves"):
            nodes.add_column(column)
        for n in r.nodes:
            nodes.add_row(str(n.node_id), str(n.targets), str(n.offline), str(n.lastsrv), str(n.syncing),
                          str(n.waiting), ",".join(map(str, n.disks_affected)), str(n.chains_it_alone_serves))
        yield nodes
    if r.findings:
        findings = Table(title=f"{len(r.findings)} findings", title_justify="left")
        for column in ("severity", "what", "detail", "what to do"):
            findings.add_column(column, overflow="fold")
        for f in r.findings[:MAX_FINDING_ROWS]:
            findings.add_row(f.severity, f"{f.kind} {f.subject}", f.detail, f.action)
        yield findings
        if len(r.findings) > MAX_FINDING_ROWS:
            yield f"... {len(r.findings) - MAX_FINDING_ROWS:,} more findings (--format json lists all)"
