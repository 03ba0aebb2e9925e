"""Writes the doctor fixtures: `admin_cli list-chains` / `list-targets` output for one 3FS cluster in each state.

Format (deepseek-ai/3FS @e2cef822): src/client/cli/admin/ListChains.cc (header `ChainId ReferencedBy ChainVersion
Status PreferredOrder Target...`, target cell `<tid>(<PUBLIC>-<LOCAL>)`, status SYNCING > SERVING > UNAVAILABLE >
SERVING(n/m)), ListTargets.cc (`TargetId ChainId Role PublicState LocalState NodeId DiskIndex UsedSize`, role by
position) and common/Printer.cc (every column but the last padded to its widest cell + 2 spaces). mgmtd moves failed
members to the end of the chain and bumps ChainVersion (src/mgmtd/service/updateChain.cc). Cluster: 5 storage nodes
10001..10005, 2 disks, replication 3, ids as the deploy guide's gen_chain_table.py makes them.
Run: python tests/data/storage/doctor/make_fixtures.py
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
NODES = [10001, 10002, 10003, 10004, 10005]
DESIGN = [(0, 1, 2), (1, 2, 3), (2, 3, 4), (3, 4, 0), (4, 0, 1)]  # node indexes of the 5 chains per disk


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[c]) + 2 for r in rows if len(r) > c) for c in range(max(map(len, rows)))]
    return "".join("".join(cell if c == len(r) - 1 else cell.ljust(widths[c]) for c, cell in enumerate(r)) + "\n"
                   for r in rows)


def cluster() -> list[tuple[int, int, list[tuple[int, int]]]]:
    """(chain id, disk, [(target id, node)]) of the healthy cluster."""
    out = []
    for disk in (0, 1):
        used = {n: 0 for n in NODES}
        for c, members in enumerate(DESIGN, start=1):
            cid = (9 * 1000 + disk + 1) * 100_000 + c
            targets = []
            for i in members:
                node = NODES[i]
                used[node] += 1
                targets.append((((1 * 1_000_000 + node) * 1000 + disk + 1) * 100 + used[node], node))
            out.append((cid, disk, targets))
    return out


def write(name: str, state: dict[int, tuple[str, str]], version_bump: int = 1) -> None:
    """``state``: target id -> (public, local) for targets that are not SERVING-UPTODATE."""
    order = {"SERVING": 0, "LASTSRV": 1, "SYNCING": 2, "WAITING": 3, "OFFLINE": 4}
    chains = [["ChainId", "ReferencedBy", "ChainVersion", "Status", "PreferredOrder", "Target", "Target", "Target"]]
    targets = [["TargetId", "ChainId", "Role", "PublicState", "LocalState", "NodeId", "DiskIndex", "UsedSize"]]
    for cid, disk, members in cluster():
        cells = [(t, node, *state.get(t, ("SERVING", "UPTODATE"))) for t, node in members]
        changed = any(t in state for t, _ in members)
        cells.sort(key=lambda c: order[c[2]])
        pubs = [c[2] for c in cells]
        serving = pubs.count("SERVING")
        status = ("SYNCING" if "SYNCING" in pubs else "SERVING" if serving == 3 else "UNAVAILABLE" if serving == 0
                  else f"SERVING({serving}/3)")
        chains.append([str(cid), "1", str(1 + (version_bump if changed else 0)), status, "[]",
                       *[f"{t}({p}-{loc})" for t, _, p, loc in cells]])
        for i, (t, node, p, loc) in enumerate(cells):
            role = "HEAD" if i == 0 else "TAIL" if i == 2 else "MIDDLE"
            empty = p == "OFFLINE" and name == "disk_replaced"
            used = "0" if empty else "13613465600"
            targets.append([str(t), str(cid), role, p, loc, str(node), str(disk), used])
    folder = HERE / name
    folder.mkdir(exist_ok=True)
    (folder / "list-chains.txt").write_text(table(chains))
    (folder / "list-targets.txt").write_text(table(targets))


def on(nodes: set[int], disks: set[int] | None = None) -> list[tuple[int, int]]:
    return [(t, cid) for cid, disk, members in cluster() for t, node in members
            if node in nodes and (disks is None or disk in disks)]


def main() -> None:
    write("healthy", {})
    write("node_down", {t: ("OFFLINE", "OFFLINE") for t, _ in on({10003})})
    write("two_nodes_down", {t: ("OFFLINE", "OFFLINE") for t, _ in on({10002, 10003})}, version_bump=2)
    # every member of the chains on 10001..10003 failed: the first SERVING one became LASTSRV
    three = {t: ("OFFLINE", "OFFLINE") for t, _ in on({10001, 10002, 10003})}
    for _, _, members in cluster():
        down = [t for t, node in members if node in (10001, 10002, 10003)]
        if len(down) == 3:
            three[down[0]] = ("LASTSRV", "OFFLINE")
    write("lastsrv_unavailable", three, version_bump=3)
    sync = {t: ("WAITING", "ONLINE") for t, _ in on({10003})}
    for _, cid in on({10003})[::2]:
        first = next(t for t, c in on({10003}) if c == cid)
        sync[first] = ("SYNCING", "ONLINE")
    write("syncing", sync, version_bump=2)
    write("disk_replaced", {t: ("OFFLINE", "OFFLINE") for t, _ in on({10004}, {1})})


if __name__ == "__main__":
    main()
