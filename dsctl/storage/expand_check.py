"""The check of a table ``storage expand`` grew, made on its rows (the rendered files are never parsed again)."""

from __future__ import annotations

from dsctl.storage.chaintable import decode_target
from dsctl.storage.crosscheck import CHAINS


def grown_table_problems(rows: dict[int, tuple[int, list[tuple[int, int]]]]) -> list[str]:
    """What ``check-chains`` would find wrong in the grown table, from the rows themselves (no re-parse).

    The files are rendered from ``rows`` alone, so a table whose chains have distinct member nodes and whose
    target ids are unique, each encoding its node and disk, renders files that agree with each other.
    """
    problems: list[str] = []
    seen: dict[int, int] = {}
    for cid in sorted(rows):
        disk, members = rows[cid]
        where = f"{CHAINS} chain {cid}"
        if len({nid for _, nid in members}) != len(members):
            problems.append(f"{where}: two targets on one node")
        for t, nid in members:
            if t in seen:
                problems.append(f"{where}: target {t} also in chain {seen[t]}")
            seen.setdefault(t, cid)
            if decode_target(t) != (nid, disk):
                problems.append(f"{where}: target {t} does not encode node {nid} disk {disk}")
    return problems
