"""``storage doctor``: what is wrong with a running 3FS cluster, from ``admin_cli`` text output.

Inputs are the tables ``admin_cli list-chains`` and ``admin_cli list-targets`` print (format from
deepseek-ai/3FS ``src/client/cli/admin/ListChains.cc``, ``ListTargets.cc`` and ``common/Printer.cc``:
space-padded columns, a header row, one ``<tid>(<PUBLIC>-<LOCAL>)`` cell per chain member). Headers may be
missing (pasted rows); ``Encounter error`` lines are reported.

Redundancy of a chain = its SERVING members (``docs/design_notes.md``: only SERVING targets serve reads and
hold a full replica). Findings:

- ``unavailable``: no SERVING member; I/O on the chain fails (``StorageClient::NotAvailable``);
- ``lost_redundancy``: fewer SERVING members than the chain should have (the longest chain);
- ``single_point``: exactly one SERVING member: if its node fails now, the chain becomes unavailable;
- per target: OFFLINE / LASTSRV / SYNCING / WAITING, grouped by node and disk, each with what to do.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from dsctl.errors import InputError

MAX_ROWS = 1_000_000
PUBLIC_STATES = ("SERVING", "LASTSRV", "SYNCING", "WAITING", "OFFLINE", "INVALID")
LOCAL_STATES = ("UPTODATE", "ONLINE", "OFFLINE", "INVALID")
_CELL = re.compile(r"(\d{1,20})\(([A-Z]+)-([A-Z]+)\)")
_ID = re.compile(r"[0-9]{1,20}")  # ASCII digits, at most a uint64's 20 (int() refuses 4,300+ digits)


def _id(cell: str) -> bool:
    """A cell holding a whole number admin_cli can print (an id, version, index or byte count)."""
    return _ID.fullmatch(cell) is not None


_PREFERRED = re.compile(r"\[[0-9,]*\]")
_CHAIN_STATUS = re.compile(r"SERVING|SYNCING|UNAVAILABLE|SERVING\(\d+/\d+\)")


@dataclass(frozen=True)
class Member:
    target_id: int
    public: str
    local: str


@dataclass(frozen=True)
class ChainState:
    chain_id: int
    version: int
    status: str
    members: list[Member]
    line: int


@dataclass(frozen=True)
class TargetState:
    target_id: int
    chain_id: int
    role: str
    public: str
    local: str
    node_id: int | None
    disk_index: int | None
    used_bytes: int


@dataclass(frozen=True)
class DoctorFinding:
    """One thing to act on: severity (critical / warning / info), what, where and what to do."""

    severity: str
    kind: str
    subject: str
    detail: str
    action: str


@dataclass(frozen=True)
class StorageNodeReport:
    node_id: int
    targets: int
    offline: int
    lastsrv: int
    syncing: int
    waiting: int
    disks_affected: list[int]
    chains_it_alone_serves: int


@dataclass(frozen=True)
class DoctorResult:
    """Health of the chains and targets in the given admin_cli output."""

    chains_source: str
    targets_source: str | None
    num_chains: int
    num_targets: int
    replication: int
    chains_serving: int
    chains_lost_redundancy: int
    chains_unavailable: int
    chains_syncing: int
    chains_single_point: int
    state_counts: dict[str, int]
    nodes: list[StorageNodeReport]
    findings: list[DoctorFinding]
    verdict: str
    exit_code: int = field(default=0, metadata={"output": False})


def _tokens(text: str) -> list[tuple[int, list[str]]]:
    lines = [(n, line.split()) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if len(lines) > MAX_ROWS:
        raise InputError(f"more than {MAX_ROWS:,} lines of admin_cli output")
    return lines


def parse_list_chains(text: str, where: str) -> tuple[list[ChainState], list[str]]:
    """Rows of ``list-chains`` (either header variant, or none); returns chains and ``Encounter error`` lines."""
    chains: list[ChainState] = []
    errors: list[str] = []
    after_error = False
    for number, cells in _tokens(text):
        if cells[0] == "ChainId":
            continue
        if cells[0] == "Encounter" or not _id(cells[0]):
            if cells[0] == "Encounter" or after_error:  # the error line, then its optional message line
                errors.append(f"{where} line {number}: {' '.join(cells)}")
                after_error = cells[0] == "Encounter"
                continue
            raise InputError(f"{where} line {number}: not a list-chains row (ChainId ... Status PreferredOrder "
                             f"Target...): {' '.join(cells)[:80]!r}")
        pref = next((i for i, c in enumerate(cells) if _PREFERRED.fullmatch(c)), None)
        if pref is None or pref < 3 or not _CHAIN_STATUS.fullmatch(cells[pref - 1]):
            raise InputError(f"{where} line {number}: expected '... ChainVersion Status [PreferredOrder] "
                             f"Target...', got {' '.join(cells)[:80]!r}")
        members = []
        for cell in cells[pref + 1:]:
            match = _CELL.fullmatch(cell)
            if not match or match.group(2) not in PUBLIC_STATES or match.group(3) not in LOCAL_STATES:
                raise InputError(f"{where} line {number}: target cell {cell[:40]!r} is not "
                                 "'<targetId>(<PUBLIC>-<LOCAL>)'")
            members.append(Member(int(match.group(1)), match.group(2), match.group(3)))
        version = cells[pref - 2]
        if not _id(version):
            raise InputError(f"{where} line {number}: ChainVersion {version!r} is not a number")
        chains.append(ChainState(int(cells[0]), int(version), cells[pref - 1], members, number))
        after_error = False
    if not chains:
        raise InputError(f"{where}: no chains found; give the output of `admin_cli list-chains`")
    return chains, errors


def parse_list_targets(text: str, where: str) -> tuple[list[TargetState], list[str]]:
    """Rows of ``list-targets``: TargetId ChainId Role PublicState LocalState NodeId DiskIndex UsedSize."""
    targets: list[TargetState] = []
    errors: list[str] = []
    after_error = False
    for number, cells in _tokens(text):
        if cells[0] == "TargetId":
            continue
        if cells[0] == "Encounter" or (after_error and not _id(cells[0])):
            errors.append(f"{where} line {number}: {' '.join(cells)}")
            after_error = cells[0] == "Encounter"
            continue
        after_error = False
        ok = (len(cells) == 8 and _id(cells[0]) and _id(cells[1]) and cells[2] in ("HEAD", "MIDDLE", "TAIL")
              and cells[3] in PUBLIC_STATES and cells[4] in LOCAL_STATES and _id(cells[7])
              and all(_id(c) or c == "N/A" for c in cells[5:7]))
        if not ok:
            raise InputError(f"{where} line {number}: not a list-targets row (TargetId ChainId Role PublicState "
                             f"LocalState NodeId DiskIndex UsedSize): {' '.join(cells)[:80]!r}")
        targets.append(TargetState(int(cells[0]), int(cells[1]), cells[2], cells[3], cells[4],
                                   None if cells[5] == "N/A" else int(cells[5]),
                                   None if cells[6] == "N/A" else int(cells[6]), int(cells[7])))
    return targets, errors


EXAMPLES = 5  # ids named in a grouped finding


def _some(ids: list[int]) -> str:
    head = ", ".join(str(i) for i in ids[:EXAMPLES])
    return head + (f" and {len(ids) - EXAMPLES} more" if len(ids) > EXAMPLES else "")


def _chain_findings(chains: list[ChainState], by_tid: dict[int, TargetState], replication: int
                    ) -> tuple[list[DoctorFinding], Counter[int], dict[str, int]]:
    """Chain-level findings, chains each node alone serves, and chain counts by condition."""
    findings: list[DoctorFinding] = []
    alone: dict[int, list[int]] = defaultdict(list)
    lost: list[int] = []
    tally = Counter[str]()
    for chain in chains:
        serving = [m for m in chain.members if m.public == "SERVING"]
        tally["syncing"] += any(m.public == "SYNCING" for m in chain.members)
        if len(serving) >= replication:
            continue
        lost.append(chain.chain_id)
        if not serving:
            tally["unavailable"] += 1
            states = ", ".join(f"{m.target_id} {m.public}-{m.local}" for m in chain.members)
            findings.append(DoctorFinding("critical", "unavailable", f"chain {chain.chain_id}",
                                    f"no SERVING member ({states}); reads and writes on it fail "
                                    "(StorageClient::NotAvailable)",
                                    "bring back the LASTSRV member's node first: it holds the newest data"))
        elif len(serving) == 1:
            tally["single"] += 1
            t = by_tid.get(serving[0].target_id)
            alone[t.node_id if t is not None and t.node_id is not None else -1].append(chain.chain_id)
    for node, ids in sorted(alone.items()):
        name = f"node {node}" if node >= 0 else "nodes not in list-targets"
        findings.append(DoctorFinding("critical", "single_point", name,
                                f"the only SERVING member of {len(ids)} chain(s) ({_some(ids)}): if it fails now "
                                "they become unavailable", "keep it up (no restarts, no maintenance) until the other "
                                "members are SERVING again"))
    if lost:
        findings.append(DoctorFinding("warning", "lost_redundancy", f"{len(lost)} chain(s)",
                                f"fewer than {replication} SERVING members: {_some(lost)}",
                                "recover the targets and nodes listed below"))
    counts = Counter({n: len(ids) for n, ids in alone.items() if n >= 0})
    return findings, counts, {"lost": len(lost), **tally}


def _target_findings(chains: list[ChainState], by_tid: dict[int, TargetState], down_nodes: set[int]
                     ) -> list[DoctorFinding]:
    """LASTSRV per target; OFFLINE grouped by node and disk (unless the whole node is down); syncing in one line."""
    findings: list[DoctorFinding] = []
    disk_down: dict[tuple[int, int | None], list[int]] = defaultdict(list)
    unknown: list[int] = []
    recovering: list[int] = []
    transient: list[int] = []
    for chain in chains:
        for m in chain.members:
            t = by_tid.get(m.target_id)
            if m.public == "SERVING":
                if m.local == "OFFLINE":
                    transient.append(m.target_id)
            elif m.public == "LASTSRV":
                where = f"node {t.node_id} disk {t.disk_index}" if t is not None else "an unknown node"
                findings.append(DoctorFinding(
                    "critical", "lastsrv", f"target {m.target_id}",
                    f"LASTSRV-{m.local} in chain {chain.chain_id} on {where}: the last member that served, it holds "
                    "the newest data", f"bring its node back (check/restart storage_main); only if it is lost for "
                    f"good, `rotate-lastsrv {chain.chain_id}` (writes only it held are lost). Targets never created "
                    "after an upload also show LASTSRV-OFFLINE: run create_target_cmd.txt"))
            elif m.public in ("SYNCING", "WAITING") or m.local in ("ONLINE", "UPTODATE"):
                recovering.append(m.target_id)
            elif t is None or t.node_id is None:
                unknown.append(m.target_id)
            elif t.node_id not in down_nodes:
                disk_down[(t.node_id, t.disk_index)].append(m.target_id)
    for (node, disk), ids in sorted(disk_down.items(), key=lambda item: (item[0][0], item[0][1] or -1)):
        findings.append(DoctorFinding(
            "warning", "offline", f"node {node} disk {disk}",
            f"{len(ids)} target(s) OFFLINE ({_some(ids)}) while other targets of the node report",
            f"a failed or replaced disk: after a swap re-create the target dirs with `create-targets --node-id {node} "
            f"--disk-index {disk}` and restart storage_main; they then re-sync"))
    if unknown:
        findings.append(DoctorFinding("warning", "offline", f"{len(unknown)} target(s)",
                                f"OFFLINE, node unknown: {_some(unknown)}", "give --targets (list-targets output) "
                                "to see their nodes and disks"))
    if recovering:
        findings.append(DoctorFinding("info", "recovering", f"{len(recovering)} target(s)",
                                f"SYNCING/WAITING or back online: {_some(recovering)}",
                                "nothing: a chain syncs one target at a time from its last SERVING member; watch "
                                "list-chains until SERVING"))
    if transient:
        findings.append(DoctorFinding("info", "serving_offline", f"{len(transient)} target(s)",
                                f"SERVING-OFFLINE: {_some(transient)}", "mgmtd has not yet marked them failed "
                                "(normal for 2 minutes after a chain upload); check again"))
    return findings


def diagnose(chains: list[ChainState], targets: list[TargetState], errors: list[str], chains_source: str,
             targets_source: str | None) -> DoctorResult:
    """Findings over parsed ``list-chains`` (and ``list-targets``) output; exit code 1 when redundancy is lost.

    A chain (or target) listed twice, e.g. two saved outputs concatenated, is counted once (its first row) and
    reported as a ``duplicate_row`` warning."""
    first_line: dict[int, int] = {}
    unique: list[ChainState] = []
    duplicates: list[DoctorFinding] = []
    for chain in chains:
        if chain.chain_id in first_line:
            duplicates.append(DoctorFinding("warning", "duplicate_row", f"chain {chain.chain_id}",
                                      f"{chains_source} line {chain.line} repeats chain {chain.chain_id} of line "
                                      f"{first_line[chain.chain_id]}; counted once (the first row)",
                                      "save one `admin_cli list-chains` output and rerun"))
            continue
        first_line[chain.chain_id] = chain.line
        unique.append(chain)
    chains = unique
    by_tid: dict[int, TargetState] = {}
    for target in targets:
        by_tid.setdefault(target.target_id, target)
    if len(by_tid) < len(targets):
        duplicates.append(DoctorFinding("warning", "duplicate_row", f"{len(targets) - len(by_tid)} target row(s)",
                                  f"{targets_source} lists {len(targets) - len(by_tid)} target(s) twice; each "
                                  "counted once (the first row)", "save one `admin_cli list-targets` output"))
        targets = list(by_tid.values())
    replication = max(len(c.members) for c in chains)
    node_targets: dict[int, list[TargetState]] = defaultdict(list)
    for t in targets:
        if t.node_id is not None:
            node_targets[t.node_id].append(t)
    down_nodes = {n for n, ts in node_targets.items() if all(t.local == "OFFLINE" for t in ts)}
    findings = [DoctorFinding("warning", "admin_cli_error", "admin_cli", e, "rerun it; check the mgmtd addresses and "
                        "the admin token") for e in errors] + duplicates
    chain_findings, alone, tally = _chain_findings(chains, by_tid, replication)
    findings += chain_findings
    for node in sorted(down_nodes):
        findings.append(DoctorFinding("warning", "node_down", f"node {node}",
                                f"all {len(node_targets[node])} of its targets are local OFFLINE (no heartbeat)",
                                "check/restart storage_main there (`list-nodes` shows its status); its targets "
                                "re-sync when it returns"))
    findings += _target_findings(chains, by_tid, down_nodes)
    in_chains = {m.target_id for c in chains for m in c.members}
    stray = [t.target_id for t in targets if t.target_id not in in_chains]
    if stray:
        findings.append(DoctorFinding("info", "not_in_list_chains", f"{len(stray)} target(s)",
                                f"in list-targets but not in list-chains: {_some(stray)}",
                                "capture both outputs at the same time"))
    nodes = []
    for node, ts in sorted(node_targets.items()):
        states = Counter(t.public for t in ts)
        bad_disks = sorted({t.disk_index for t in ts if t.public != "SERVING" and t.disk_index is not None})
        if states["SERVING"] != len(ts) or alone[node]:
            nodes.append(StorageNodeReport(node, len(ts), states["OFFLINE"], states["LASTSRV"], states["SYNCING"],
                                    states["WAITING"], bad_disks, alone[node]))
    order = {"critical": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda f: order[f.severity])
    counts = Counter(m.public for c in chains for m in c.members)
    if tally.get("unavailable"):
        verdict = f"{tally['unavailable']} chain(s) UNAVAILABLE: I/O on them fails now"
    elif tally["lost"]:
        verdict = (f"redundancy lost on {tally['lost']} chain(s); {tally.get('single', 0)} become unavailable if "
                   "one more node fails")
    else:
        verdict = "healthy: every chain has all members SERVING"
    return DoctorResult(
        chains_source=chains_source, targets_source=targets_source, num_chains=len(chains),
        num_targets=sum(len(c.members) for c in chains), replication=replication,
        chains_serving=len(chains) - tally["lost"], chains_lost_redundancy=tally["lost"],
        chains_unavailable=tally.get("unavailable", 0), chains_syncing=tally.get("syncing", 0),
        chains_single_point=tally.get("single", 0),
        state_counts={s: counts[s] for s in PUBLIC_STATES if counts[s]}, nodes=nodes, findings=findings,
        verdict=verdict, exit_code=1 if tally["lost"] else 0,
    )


def doctor(chains_text: str, chains_source: str, targets_text: str | None, targets_source: str | None
           ) -> DoctorResult:
    """Parse the admin_cli outputs and diagnose them."""
    chains, errors = parse_list_chains(chains_text, chains_source)
    targets: list[TargetState] = []
    if targets_text is not None:
        targets, more = parse_list_targets(targets_text, targets_source or "list-targets")
        errors += more
    return diagnose(chains, targets, errors, chains_source, targets_source)
