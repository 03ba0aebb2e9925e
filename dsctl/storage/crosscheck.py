"""``storage check-chains DIR``: the four chain-table files checked line by line and against each other.

Every problem names its file and line. Checks:

- ``generated_chains.csv``: header ``ChainId,TargetId,..``; integer ids (chain ids 1..uint32, target ids > 0);
  every row as wide as the header; chain ids unique; each target in one chain once; members on distinct
  nodes and on one disk index; the disk index in each target id (and chain id, when it follows the upstream
  scheme) agrees with the create-target line.
- ``generated_chain_table.csv``: header ``ChainId``; every id a chain of the CSV, every chain in the table, once.
- ``create_target_cmd.txt``: every line a well-formed ``create-target``; every target created exactly once,
  with the chain id of the chain it is in; no command for a target outside the chains.
- ``remove_target_cmd.txt``: ``offline-target`` then ``remove-target`` for every target, on its node, once each.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from dsctl.names import ascii_digits
from dsctl.storage.balance import Balance, measure
from dsctl.storage.chaintable import CHAINS, CREATE, FILE_NAMES, REMOVE, TABLE, UINT32_MAX, chain_disk, decode_target
from dsctl.storage.choice import REDIRECT_LIMIT

#: the file names live with the formats in chaintable; here for the many readers that import them from here
__all__ = ["CHAINS", "CREATE", "FILE_NAMES", "REMOVE", "TABLE", "ChainProblem", "ChainRow", "CheckResult",
           "check_files", "read_checked"]
UINT64_MAX = 2**64 - 1
MAX_PROBLEMS = 1_000  # problems kept (the count of the rest is reported)
MAX_BALANCE_NODES = 10_000  # the balance figures need a node x node matrix (800 MB at this size)

_CREATE_LINE = re.compile(r"create-target --node-id ([0-9]{1,20}) --disk-index ([0-9]{1,20}) "
                          r"--target-id ([0-9]{1,20}) --chain-id ([0-9]{1,20})"
                          r"(?: +--chunk-size(?: +[0-9]+(?:B|KB|MB|GB|TB|K|M|G|T)?)+)? *(?: --use-new-chunk-engine)?")
_REMOVE_LINE = re.compile(r"(offline-target|remove-target) --node-id ([0-9]{1,20}) --target-id ([0-9]{1,20})")


@dataclass(frozen=True)
class ChainProblem:
    """One problem: the chain it concerns (0 when none) and where it was found (``file line N``)."""

    chain_id: int
    problem: str
    where: str = ""


@dataclass(frozen=True)
class CheckResult:
    """Balance of an existing chain table and the problems found in it."""

    source: str
    node_source: str
    files_checked: list[str]
    num_nodes: int
    first_node_id: int
    last_node_id: int
    num_chains: int
    problems: list[ChainProblem]
    problems_not_listed: int
    balance: Balance | None
    notes: list[str]
    exit_code: int = field(default=0, metadata={"output": False})


@dataclass(frozen=True)
class ChainRow:
    """One row of ``generated_chains.csv``: its line, chain id and member target ids (head -> tail)."""

    line: int
    chain_id: int
    targets: list[int]


class _Problems:
    def __init__(self) -> None:
        self.items: list[ChainProblem] = []
        self.dropped = 0

    def add(self, chain_id: int, problem: str, where: str) -> None:
        if len(self.items) < MAX_PROBLEMS:
            self.items.append(ChainProblem(chain_id, problem, where))
        else:
            self.dropped += 1


def _lines(text: str) -> list[tuple[int, str]]:
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]


def _read_chains(text: str, name: str, out: _Problems) -> list[ChainRow]:
    lines = _lines(text)
    if not lines:
        out.add(0, "empty; expected a header 'ChainId,TargetId,...'", f"{name} line 1")
        return []
    head_line, header = lines[0]
    cells = [h.strip() for h in header.split(",")]
    if cells[0] != "ChainId" or len(cells) < 2 or any(h != "TargetId" for h in cells[1:]):
        out.add(0, f"header must be 'ChainId' then 'TargetId' columns, got {header[:80]!r}", f"{name} line {head_line}")
        return []
    width = len(cells) - 1
    rows: list[ChainRow] = []
    for number, line in lines[1:]:
        where = f"{name} line {number}"
        cells = [c.strip() for c in line.split(",")]
        # ASCII digits only (int() also takes other scripts' digits, '+5' and '1_0'); over 20: above any uint64
        if any(len(c) > 20 or not ascii_digits(c) for c in cells):
            out.add(0, f"not a row of integer ids: {line[:80]!r}", where)
            continue
        values = [int(c) for c in cells]
        if not 1 <= values[0] <= UINT32_MAX:
            out.add(0, f"chain id {values[0]} outside 1..{UINT32_MAX}", where)
            continue
        if any(not 1 <= t <= UINT64_MAX for t in values[1:]):
            out.add(values[0], "target ids must be 1..2^64-1", where)
            continue
        if len(values) - 1 != width:
            out.add(values[0], f"{len(values) - 1} targets, the header has {width} TargetId columns", where)
            continue
        rows.append(ChainRow(number, values[0], values[1:]))
    if not rows and len(lines) == 1:
        out.add(0, "a header but no chains", f"{name} line {head_line}")
    return rows


def _read_table(text: str, name: str, out: _Problems) -> list[tuple[int, int]]:
    lines = _lines(text)
    if not lines or lines[0][1] != "ChainId":
        out.add(0, "header must be the single column 'ChainId'", f"{name} line {lines[0][0] if lines else 1}")
        return []
    ids: list[tuple[int, int]] = []
    for number, line in lines[1:]:
        if not ascii_digits(line) or len(line) > 10 or not 1 <= int(line) <= UINT32_MAX:
            out.add(0, f"not a chain id (1..{UINT32_MAX}): {line[:80]!r}", f"{name} line {number}")
            continue
        ids.append((number, int(line)))
    if not ids:
        out.add(0, "no chain ids", f"{name} line {lines[0][0]}")
    return ids


def _read_creates(text: str, name: str, out: _Problems) -> dict[int, tuple[int, int, int, int]]:
    """target id -> (line, node id, disk index, chain id)."""
    found: dict[int, tuple[int, int, int, int]] = {}
    for number, line in _lines(text):
        match = _CREATE_LINE.fullmatch(line)
        where = f"{name} line {number}"
        if not match:
            out.add(0, f"not a create-target command: {line[:80]!r}", where)
            continue
        node, disk, tid, cid = (int(g) for g in match.groups())
        if tid in found:
            out.add(cid, f"target {tid} created again (first on line {found[tid][0]})", where)
            continue
        found[tid] = (number, node, disk, cid)
    return found


def _read_removes(text: str, name: str, out: _Problems) -> dict[tuple[str, int], tuple[int, int]]:
    """(command, target id) -> (line, node id)."""
    found: dict[tuple[str, int], tuple[int, int]] = {}
    for number, line in _lines(text):
        match = _REMOVE_LINE.fullmatch(line)
        where = f"{name} line {number}"
        if not match:
            out.add(0, f"not an offline-target/remove-target command: {line[:80]!r}", where)
            continue
        kind, node, tid = match.group(1), int(match.group(2)), int(match.group(3))
        if (kind, tid) in found:
            out.add(0, f"{kind} of target {tid} again (first on line {found[(kind, tid)][0]})", where)
            continue
        found[(kind, tid)] = (number, node)
    return found


def _check_rows(rows: list[ChainRow], creates: dict[int, tuple[int, int, int, int]] | None, out: _Problems
                ) -> tuple[dict[int, int], dict[int, int]]:
    """Per-chain checks; returns target -> node id and target -> disk index."""
    node_of: dict[int, int] = {}
    disk_of: dict[int, int] = {}
    chain_of: dict[int, int] = {}
    first_line: dict[int, int] = {}
    for row in rows:
        where = f"{CHAINS} line {row.line}"
        if row.chain_id in first_line:
            out.add(row.chain_id, f"chain id appears again (first on line {first_line[row.chain_id]})", where)
        first_line.setdefault(row.chain_id, row.line)
        for t in row.targets:
            if creates is not None and t in creates:
                _, node, disk, _ = creates[t]
                dn, dd = decode_target(t)
                if (dn, dd) != (node, disk) and dn >= 1 and dd >= 0:
                    out.add(row.chain_id, f"target {t} encodes node {dn} disk {dd} but create-target puts it on "
                                          f"node {node} disk {disk} (line {creates[t][0]})", where)
            else:
                node, disk = decode_target(t)
            node_of[t], disk_of[t] = node, disk
        counts = Counter(row.targets)
        for t, n in sorted(counts.items()):
            if n > 1:
                out.add(row.chain_id, f"target {t} listed {n} times in this chain", where)
            elif t in chain_of:
                out.add(row.chain_id, f"target {t} also in chain {chain_of[t]}", where)
            chain_of.setdefault(t, row.chain_id)
        nodes = [node_of[t] for t in counts]
        dup = sorted(n for n, c in Counter(nodes).items() if c > 1)
        if dup:
            out.add(row.chain_id, f"two targets on node {dup[0]}", where)
        disks = sorted({disk_of[t] for t in row.targets})
        if len(disks) > 1:
            out.add(row.chain_id, f"members on disk indexes {disks}; a 3FS table keeps a chain on one index", where)
        coded = chain_disk(row.chain_id)
        if creates is not None and coded is not None and len(disks) == 1 and coded != disks[0]:
            out.add(row.chain_id, f"chain id encodes disk index {coded}, its targets are on {disks[0]}", where)
    return node_of, disk_of


def _cross(rows: list[ChainRow], texts: dict[str, str | None], out: _Problems) -> dict[int, tuple[int, int, int, int]]:
    chain_of = {t: row.chain_id for row in rows for t in row.targets}
    creates: dict[int, tuple[int, int, int, int]] = {}
    if texts.get(CREATE) is not None:
        creates = _read_creates(texts[CREATE] or "", CREATE, out)
        for t, (line, _, _, cid) in creates.items():
            if t not in chain_of:
                out.add(cid, f"creates target {t}, which is in no chain of {CHAINS}", f"{CREATE} line {line}")
            elif chain_of[t] != cid:
                out.add(cid, f"target {t} is in chain {chain_of[t]} of {CHAINS}", f"{CREATE} line {line}")
        for row in rows:
            missing = [t for t in row.targets if t not in creates]
            if missing:
                out.add(row.chain_id, f"no create-target for target {missing[0]}", f"{CHAINS} line {row.line}")
    if texts.get(TABLE) is not None:
        ids = _read_table(texts[TABLE] or "", TABLE, out)
        chain_line = {row.chain_id: row.line for row in rows}
        seen: dict[int, int] = {}
        for line, cid in ids:
            if cid in seen:
                out.add(cid, f"chain listed again (first on line {seen[cid]})", f"{TABLE} line {line}")
            elif cid not in chain_line:
                out.add(cid, f"chain {cid} is not in {CHAINS}", f"{TABLE} line {line}")
            seen.setdefault(cid, line)
        if ids:
            for cid, line in chain_line.items():
                if cid not in seen:
                    out.add(cid, f"chain missing from {TABLE}", f"{CHAINS} line {line}")
    if texts.get(REMOVE) is not None:
        removes = _read_removes(texts[REMOVE] or "", REMOVE, out)
        for (kind, t), (line, node) in removes.items():
            if t not in chain_of:
                out.add(0, f"{kind} of target {t}, which is in no chain", f"{REMOVE} line {line}")
            elif t in creates and creates[t][1] != node:
                out.add(chain_of[t], f"{kind} of target {t} on node {node}, created on node {creates[t][1]}",
                        f"{REMOVE} line {line}")
        for row in rows:
            for t in row.targets:
                off, rem = removes.get(("offline-target", t)), removes.get(("remove-target", t))
                if off is None or rem is None:
                    absent = "offline-target" if off is None else "remove-target"
                    out.add(row.chain_id, f"target {t} has no {absent} line, so it cannot be removed",
                            f"{CHAINS} line {row.line}")
                elif off[0] > rem[0]:
                    out.add(row.chain_id, f"target {t} is removed (line {rem[0]}) before it is offlined "
                                          f"(line {off[0]})", f"{REMOVE} line {rem[0]}")
    return creates


def check_files(texts: dict[str, str | None], source: str) -> CheckResult:
    """Check the chain-table files in ``texts`` (name -> text; None = file missing; only the CSV is required).

    Exit code 1 on any problem; the balance is measured when the chains themselves are sound.
    """
    return read_checked(texts, source)[0]


def read_checked(texts: dict[str, str | None], source: str
                 ) -> tuple[CheckResult, list[ChainRow], dict[int, int], dict[int, int]]:
    """``check_files`` plus what it read: the chain rows, target -> node id and target -> disk index."""
    out = _Problems()
    for name in FILE_NAMES[1:]:
        if name in texts and texts[name] is None:
            out.add(0, "file missing: the four files are checked against each other", name)
    rows = _read_chains(texts.get(CHAINS) or "", CHAINS, out)
    creates = _cross(rows, texts, out)
    node_of, disk_of = _check_rows(rows, creates if texts.get(CREATE) is not None else None, out)
    node_ids = sorted(set(node_of.values()))
    balance = None
    notes: list[str] = []
    if len(node_ids) > MAX_BALANCE_NODES:
        notes.append(f"{len(node_ids):,} nodes: balance not measured above {MAX_BALANCE_NODES:,} (a node x node "
                     "matrix)")
    elif rows and not out.items and len(node_ids) >= 2:
        index = {n: i for i, n in enumerate(node_ids)}
        members = np.array([[index[node_of[t]] for t in row.targets] for row in rows], dtype=np.int64)
        disks = sorted(set(disk_of.values()))
        disk_index = {d: i for i, d in enumerate(disks)}
        disk = np.array([disk_index[disk_of[row.targets[0]]] for row in rows], dtype=np.int64)
        balance = measure(members, disk, len(node_ids))
        if balance.replication > 1 and balance.redirect.max_over_ideal > REDIRECT_LIMIT:
            notes.append(f"unbalanced: after a node failure one peer takes {balance.redirect.max_over_ideal:.2f}x "
                         f"the even share of its reads (dsctl's tables stay within {REDIRECT_LIMIT}x)")
        if min(balance.pair_share_total, default=1) == 0 and balance.replication > 1:
            notes.append(f"{balance.pair_share_total[0]:,} node pairs share no chain")
    present = [name for name in FILE_NAMES if texts.get(name) is not None]
    result = CheckResult(
        source=source, node_source=CREATE if texts.get(CREATE) is not None else "target-id digits",
        files_checked=present, num_nodes=len(node_ids), first_node_id=node_ids[0] if node_ids else 0,
        last_node_id=node_ids[-1] if node_ids else 0, num_chains=len(rows), problems=out.items,
        problems_not_listed=out.dropped, balance=balance, notes=notes, exit_code=1 if out.items else 0,
    )
    return result, rows, node_of, disk_of
