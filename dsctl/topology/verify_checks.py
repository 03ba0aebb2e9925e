"""The checks of ``verify`` beyond cable matching: actions, plane coverage, link rate, GUIDs, error counters.

Link rate: ibnetdiscover prints each link's trained width x speed (``4xNDR``). A planned cable that trained
narrower than the plan's ``link`` is ``degraded_width`` (``2xNDR``, ``1xNDR``), slower is ``degraded_speed``
(``4xHDR``); both come from a dirty or damaged connector or cable far more often than from configuration.
Speeds in order: SDR < DDR < QDR < FDR10 < FDR < EDR < HDR < NDR < XDR.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from dsctl.cluster.plan_file import PlannedFabric, Port
from dsctl.errors import InputError
from dsctl.names import ascii_digits
from dsctl.topology.counters import PortCounters, Thresholds, judge
from dsctl.topology.observed import ObservedEnd, ObservedFabric, ObservedLink
from dsctl.topology.verify_model import Key, Resolver, WiringFinding, end_text, key_of
from dsctl.topology.verify_position import position_note

SPEED_ORDER = ("SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR")


def split_rate(rate: str) -> tuple[int, str]:
    """``"4xNDR"`` -> (4, "NDR"); (0, "") where unknown."""
    width, _, speed = rate.partition("x")
    return (int(width), speed) if ascii_digits(width) and speed else (0, "")


def planned_peer(end: Port, at_port: dict[Port, Key]) -> Port | None:
    key = at_port.get(end)
    if key is None:
        return None
    return key[1] if key[0] == end else key[0]


def planned_peer_text(end: Port, at_port: dict[Port, Key], tier: dict[str, str]) -> str:
    peer = planned_peer(end, at_port)
    return end_text(peer, tier) if peer is not None else "a port the plan has (none planned for it)"


def _anchor(key: Key, at_port: dict[Port, Key], tier: dict[str, str]) -> tuple[Port, Port]:
    """(end that stays, end that moves): the lower-tier end stays (a NIC is cabled to its leaf)."""
    a, b = key
    for stay, move in ((a, b), (b, a)):
        if tier[stay[0]] == "node" and stay in at_port:
            return stay, move
    return (a, b) if a in at_port else (b, a)


def is_offset(key: Key, at_port: dict[Port, Key], tier: dict[str, str]) -> bool:
    """True if the moving end sits one port away from its planned port on the planned switch."""
    stay, move = _anchor(key, at_port, tier)
    want = planned_peer(stay, at_port)
    return (want is not None and want[0] == move[0] and tier[move[0]] != "node"
            and abs(int(want[1]) - int(move[1])) == 1)


def cable_action(kind: str, key: Key, at_port: dict[Port, Key], tier: dict[str, str]) -> tuple[str, str]:
    """(action_kind, action) for a cable finding, with the plan's names."""
    if kind == "extra":
        return "remove", f"remove the cable {end_text(key[0], tier)} <-> {end_text(key[1], tier)} (not in the plan)"
    stay, move = _anchor(key, at_port, tier)
    want = planned_peer(stay, at_port)
    if want is None:
        return "check_plan", f"the plan has no cable at {end_text(stay, tier)}; remove this one or update the plan"
    what = f"the cable of {end_text(stay, tier)}" if tier[stay[0]] == "node" else f"the cable at {end_text(stay, tier)}"
    return "move", f"move {what} from {end_text(move, tier)} to {end_text(want, tier)}"


def pair_swaps(findings: list[WiringFinding], at_port: dict[Port, Key], tier: dict[str, str]) -> list[WiringFinding]:
    """Two move findings that exchange each other's ports become one action each: swap the two cables.

    Two neighbouring cables exchanged are ``swapped`` (not ``port_offset``, which is one cable one port away).
    """
    moves: dict[tuple[Port, Port], int] = {}
    ends: list[tuple[Port, Port, Port] | None] = []
    for i, f in enumerate(findings):
        if f.kind not in ("swapped", "port_offset", "cross_plane") or f.action_kind != "move":
            ends.append(None)
            continue
        key = key_of((f.a_device, f.a_port), (f.b_device, f.b_port))
        stay, move = _anchor(key, at_port, tier)
        want = planned_peer(stay, at_port)
        if want is None:
            ends.append(None)
            continue
        ends.append((stay, move, want))
        moves[(move, want)] = i
    out = list(findings)
    for i, item in enumerate(ends):
        if item is None:
            continue
        stay, move, want = item
        j = moves.get((want, move))
        if j is None or j == i:
            continue
        f = findings[i]
        other = ends[j]
        kind = "swapped" if f.kind == "port_offset" else f.kind  # two cables exchanged, not one slipped
        if other is not None and other[0][0] == stay[0] and tier[stay[0]] == "node":  # two NICs of one node
            nics = sorted((stay[1], other[0][1]))
            action = f"swap the cables of {stay[0]} {nics[0]} and {nics[1]} at the node"
        else:
            action = f"swap the two cables at {end_text(move, tier)} and {end_text(want, tier)}"
        out[i] = WiringFinding(kind, f.a_device, f.a_port, f.b_device, f.b_port, f.plane, f.expected, f.line, f.message,
                         f.source, "swap", action, f.value, f.expected_value)
    return out


#: a Linux RDMA device (CA) name as ``ibstat -l`` lists it: ``mlx5_0``, ``mlx4_1``, ``hfi1_0``
_CA_NAME = re.compile(r"[a-z][a-z0-9]{0,15}_\d{1,4}")


def rediscover_action(plane: int, nic: str, ethernet: bool) -> str:
    """How to get plane ``plane``'s dump: ``ibnetdiscover -C <CA>`` naming a real CA (``ibstat -l``), never a
    description like ``HCA-1``; ``lldpctl`` on an Ethernet (RoCE) plane."""
    if ethernet:
        return (f"run 'lldpctl -f json0 > <node>.json' on every node (one file per node, named after it) so that "
                f"NIC {nic or plane} of plane {plane} is seen, and add the files (a NIC without an LLDP neighbour "
                "also shows up here)")
    if _CA_NAME.fullmatch(nic):
        return (f"run 'ibnetdiscover -C {nic} -P 1 > plane{plane}.ibnet' on a node and add the file (a cable-less "
                "plane also shows up here)")
    what = f"the plan's NIC {nic} of plane {plane}" if nic else f"a NIC of plane {plane}"
    return (f"on a node, 'ibstat -l' lists the CA names (mlx5_0, ...): take the CA of {what} ('ibstat <CA>' "
            f"shows its link) and run 'ibnetdiscover -C <CA> -P 1 > plane{plane}.ibnet', then add the file "
            "(a cable-less plane also shows up here)")


def plane_findings(plan: PlannedFabric, unseen: Sequence[int], num_dumps: int,
                   ethernet: bool = False) -> list[WiringFinding]:
    """One ``plane_not_seen`` per planned plane no dump reached (its cables are not reported as missing).

    ``ethernet``: every dump is LLDP (a RoCE fabric), so the action names lldpctl, not InfiniBand tools."""
    out = []
    for plane in unseen:
        nic = next((n for n, p in plan.nic_plane.items() if p == plane), "")
        cables = sum(1 for c in plan.cables if c[0] == plane and (not ethernet or c[1] == "node-leaf"))
        out.append(WiringFinding(
            "plane_not_seen", f"plane {plane}", "", "", "", str(plane), f"plan: {cables} cables", None,
            f"no dump reaches plane {plane} ({num_dumps} dump(s) given)", "", "rediscover",
            rediscover_action(plane, nic, ethernet), "", str(cables)))
    return out


def rate_findings(plan: PlannedFabric, links: Sequence[tuple[Key, ObservedLink]],
                  tier: dict[str, str]) -> list[WiringFinding]:
    """``degraded_width``/``degraded_speed`` for matched cables that trained below the plan's ``link``."""
    want_width, want_speed = split_rate(plan.link)
    if not want_width:
        return []
    want_rank = SPEED_ORDER.index(want_speed) if want_speed in SPEED_ORDER else -1
    out = []
    for key, link in links:
        width, speed = split_rate(link.rate)
        if not width:
            continue
        slow = speed in SPEED_ORDER and want_rank >= 0 and SPEED_ORDER.index(speed) < want_rank
        if width >= want_width and not slow:
            continue
        kind = "degraded_width" if width < want_width else "degraded_speed"
        a, b = key
        cable = f"{end_text(a, tier)} <-> {end_text(b, tier)}"
        out.append(WiringFinding(
            kind, a[0], a[1], b[0], b[1], str(plan.nic_plane.get(a[1], plan.plane.get(a[0], -1))), "", link.line,
            f"{cable}: trained at {link.rate}, planned {plan.link}" + position_note(link), link.source, "reseat",
            f"re-seat the cable {cable} (clean the connectors); replace the cable or transceiver if it trains at "
            f"{link.rate} again", link.rate, plan.link))
    return out


def device_name(end: ObservedEnd, port: Port, tier: dict[str, str]) -> str:
    """The name a node-name map gives this device: "<node> <nic>" for a NIC (port 1), the switch name."""
    if tier[port[0]] == "node":
        return f"{port[0]} {port[1].split('/')[0]}"
    return port[0]


def guid_map(resolved: Sequence[tuple[ObservedEnd, Port]], tier: dict[str, str]) -> dict[str, str]:
    """GUID -> plan name for every matched end with a GUID (what ``--record-guids`` writes)."""
    return {end.guid: device_name(end, port, tier) for end, port in resolved if end.guid}


def identity_findings(dumps: Sequence[tuple[str, ObservedFabric]], resolved: Sequence[tuple[ObservedEnd, Port]],
                      recorded: dict[str, str], tier: dict[str, str]) -> list[WiringFinding]:
    """``duplicate_guid`` per GUID on two devices; ``guid_changed`` per planned device whose GUID is not the
    recorded one (a replaced HCA or switch: not a wiring error)."""
    out = []
    for name, fabric in dumps:
        for guid, descs in sorted(fabric.duplicate_guids.items()):
            shown = sorted(set(descs))
            out.append(WiringFinding(
                "duplicate_guid", shown[0], "", shown[-1] if len(shown) > 1 else "", "", "", "", None,
                f"GUID 0x{guid} is on {len(descs)} devices: {', '.join(shown)}", name, "replace_hca",
                f"give one of {', '.join(shown)} its own GUID (re-burn the firmware GUIDs) or replace it; "
                "the subnet manager routes only one of them", f"0x{guid}", "unique"))
    names: dict[str, set[str]] = {}
    flagged = {g for _, fabric in dumps for g in fabric.duplicate_guids}
    for end, port in resolved:
        if end.guid and end.guid not in flagged:
            names.setdefault(end.guid, set()).add(device_name(end, port, tier))
    for guid, seen in sorted(names.items()):
        if len(seen) > 1:  # the same GUID in two planes' dumps (each subnet alone cannot tell)
            shown = sorted(seen)
            out.append(WiringFinding(
                "duplicate_guid", shown[0], "", shown[-1], "", "", "", None,
                f"GUID 0x{guid} is on {len(shown)} devices in different dumps: {', '.join(shown)}", "",
                "replace_hca", f"give one of {', '.join(shown)} its own GUID (re-burn the firmware GUIDs) or "
                "replace it", f"0x{guid}", "unique"))
    if not recorded:
        return out
    by_name = {v: k for k, v in recorded.items()}
    done: set[str] = set()
    shared = {g for _, fabric in dumps for g in fabric.duplicate_guids}  # reported as duplicate_guid
    for end, port in resolved:
        name = device_name(end, port, tier)
        old = by_name.get(name)
        if not end.guid or old is None or old == end.guid or name in done or end.guid in shared:
            continue
        done.add(name)
        what = "HCA" if tier[port[0]] == "node" else "switch"
        out.append(WiringFinding(
            "guid_changed", port[0], port[1] if tier[port[0]] == "node" else "", "", "", "", "", None,
            f"{name}: GUID 0x{end.guid}, recorded 0x{old} (the {what} was replaced)", "", "check_plan",
            f"confirm the {what} of {name} was replaced on purpose, then re-record with --record-guids "
            "(the cabling itself is checked as usual)", f"0x{end.guid}", f"0x{old}"))
    return out


def _stem(name: str) -> str:
    return name.replace("\\", "/").rsplit("/", 1)[-1].split(".", 1)[0]


def _dump_for(source: str, dumps: Sequence[tuple[str, ObservedFabric]]) -> ObservedFabric:
    """The dump a counters file belongs to: the only one, or the one named alike (plane3.perfquery, plane3.ibnet).

    Each plane is its own subnet with its own LIDs, so a LID means nothing without its plane.
    """
    if len(dumps) == 1:
        return dumps[0][1]
    for name, fabric in dumps:
        if _stem(name) == _stem(source):
            return fabric
    raise InputError(f"{source}: no dump is named like it; LIDs differ per plane, so name each "
                     "counters file like its plane's dump (plane3.perfquery for plane3.ibnet)", field="counters")


def counter_findings(plan: PlannedFabric, dumps: Sequence[tuple[str, ObservedFabric]],
                     counters: Sequence[object], thresholds: object | None, resolver: Resolver) -> list[WiringFinding]:
    """``error_counters``/``link_downed`` per port whose counters break ``thresholds``, named by plan cable.

    A counter row names its port by LID (perfquery); the dump of its plane maps the LID to a device.
    """
    tier = plan.tier
    limits = thresholds if isinstance(thresholds, Thresholds) else Thresholds()
    index: dict[int, tuple[dict[tuple[str, int], tuple[ObservedEnd, ObservedLink]], dict[int, int]]] = {}
    out = []
    for row in counters:
        if not isinstance(row, PortCounters) or not judge(row, limits):
            continue
        if row.guid:  # named by node GUID (ibdiagnet): the dump that has it
            fabric = next((f for _, f in dumps if any(e.guid == row.guid for lk in f.links for e in (lk.a, lk.b))),
                          dumps[0][1])
        else:
            fabric = _dump_for(row.source, dumps)
        if id(fabric) not in index:
            ends: dict[tuple[str, int], tuple[ObservedEnd, ObservedLink]] = {}
            ca_port: dict[int, int] = {}
            for link in fabric.links:
                for end in (link.a, link.b):
                    ends[(end.guid, end.port_num)] = (end, link)
                    if end.is_switch is False and end.lid:
                        ca_port[end.lid] = end.port_num
            index[id(fabric)] = (ends, ca_port)
        ends, ca_port = index[id(fabric)]
        guid, port_num = row.guid, row.port
        if not guid and row.lid in fabric.lids:
            guid, is_switch = fabric.lids[row.lid]
            if not is_switch:
                port_num = ca_port.get(row.lid, port_num)
        found = ends.get((guid, port_num))
        if found is None:
            continue
        end, link = found
        here, _, _ = resolver.resolve(end)
        if here is None:
            continue
        peer_end = link.b if end is link.a else link.a
        there, _, _ = resolver.resolve(peer_end)
        cable = f"{end_text(here, tier)} <-> {end_text(there, tier)}" if there else end_text(here, tier)
        b_dev, b_port = there if there else ("", "")
        by_kind: dict[str, list[tuple[float, float, str]]] = {}
        for kind, value, limit, what in judge(row, limits):
            by_kind.setdefault(kind, []).append((value, limit, what))
        for kind, items in by_kind.items():  # one finding per port and kind, every counter over its limit
            what = ", ".join(w for _, _, w in items)
            action = (f"re-seat the cable {cable}; replace it (cable, then transceiver) if {what} keep rising "
                      "after clearing the counters (perfquery -x -R)")
            out.append(WiringFinding(kind, here[0], here[1], b_dev, b_port,
                               str(plan.nic_plane.get(here[1], plan.plane.get(here[0], -1))), "", row.line,
                               f"{cable}: " + ", ".join(f"{w} {v:g} (limit {lim:g})" for v, lim, w in items)
                               + f" at {end_text(here, tier)}", row.source, "reseat", action,
                               ", ".join(f"{w}={v:g}" for v, _, w in items),
                               ", ".join(f"{w}<={lim:g}" for _, lim, w in items)))
    return out
