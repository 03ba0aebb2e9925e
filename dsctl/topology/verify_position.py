"""HCAs with the firmware's default description, placed by the leaf port they sit on (as ``ibdiagnet -t`` does).

An HCA described ``MT4129 ConnectX7   Mellanox Technologies`` names no host, so no description-based match can
find it. The plan still says which NIC belongs at every leaf port: an HCA with the default description on leaf
port P is taken for the plan's NIC at P when that is unambiguous:

- P is a planned node-leaf port (the plan has a NIC there);
- that NIC is seen nowhere in the dumps by name (a named HCA of that node and NIC elsewhere makes it ambiguous:
  which is the real one?), and no other default-described HCA sits at a port planned for it;
- the HCA's GUID is seen on this one port only (not a duplicate GUID, not in two places).

Everything else stays an ``unmatched_device``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from dsctl.cluster.plan_file import PlannedFabric, Port
from dsctl.topology.observed import ObservedEnd, ObservedFabric, ObservedLink
from dsctl.topology.verify_model import Key, Resolver


def _planned_nic(switch_port: Port | None, at_port: Mapping[Port, Key], tier: Mapping[str, str]) -> Port | None:
    """The planned NIC at a switch port, or None if the plan has no node-leaf cable there."""
    if switch_port is None:
        return None
    key = at_port.get(switch_port)
    if key is None:
        return None
    peer = key[1] if key[0] == switch_port else key[0]
    return peer if tier.get(peer[0]) == "node" else None


def by_position(plan: PlannedFabric, resolver: Resolver, dumps: Sequence[tuple[str, ObservedFabric]],
                at_port: Mapping[Port, Key]) -> dict[str, str]:
    """GUID (16 hex digits) -> ``"<node> <nic>"`` for each default-described HCA placed by its leaf port."""
    if not any(e.default_desc for _, f in dumps for link in f.links for e in (link.a, link.b)):
        return {}  # the usual case: one cheap pass, no resolving
    tier = plan.tier
    named: set[Port] = set()
    wanted: dict[str, list[Port | None]] = {}
    for _, fabric in dumps:
        for link in fabric.links:
            for end, peer in ((link.a, link.b), (link.b, link.a)):
                if end.default_desc and end.is_switch is False:
                    if not end.guid or end.guid in fabric.duplicate_guids or not peer.is_switch:
                        wanted.setdefault(end.guid or "?", []).append(None)
                        continue
                    switch_port, _, _ = resolver.resolve(peer)
                    wanted.setdefault(end.guid, []).append(_planned_nic(switch_port, at_port, tier))
                elif end.is_switch is not True:
                    port, _, _ = resolver.resolve(end)
                    if port is not None and tier[port[0]] == "node":
                        named.add(port)
    claims: dict[Port, int] = {}
    for ports in wanted.values():
        for nic in set(ports):
            if nic is not None:
                claims[nic] = claims.get(nic, 0) + 1
    placed: dict[str, str] = {}
    for guid, ports in wanted.items():
        nic = ports[0]
        if len(ports) == 1 and nic is not None and nic not in named and claims[nic] == 1:
            placed[guid] = f"{nic[0]} {nic[1]}"
    return placed


def _placed_end(end: ObservedEnd, placed: Mapping[str, str]) -> ObservedEnd:
    name = placed.get(end.guid) if end.default_desc else None
    if name is None:
        return end
    node, nic = name.split(" ", 1)
    return replace(end, device=node, port=nic, by_position=True)


def place(fabric: ObservedFabric, placed: Mapping[str, str]) -> ObservedFabric:
    """The fabric with each placed HCA named by its planned node and NIC (its description kept)."""
    if not placed:
        return fabric
    links = []
    for link in fabric.links:
        a, b = _placed_end(link.a, placed), _placed_end(link.b, placed)
        links.append(link if a is link.a and b is link.b else replace(link, a=a, b=b))
    return replace(fabric, links=links)


def position_note(link: ObservedLink) -> str:
    """What a finding on this link adds when an end was placed by position ("" otherwise)."""
    for end in (link.a, link.b):
        if end.by_position:
            return (f" ({end.device} {end.port} is HCA 0x{end.guid}, described {' '.join(end.desc.split())!r}: "
                    "identified by its planned leaf port, as ibdiagnet -t does)")
    return ""
