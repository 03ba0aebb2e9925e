"""Compare a plan (plan.json) with one or more observed fabrics (one dump per plane) and name every difference.

Cable findings, each with the cable's both ends as observed (as planned, for ``missing``):

- ``cross_plane``       an observed cable joins two planes (e.g. NIC mlx5_3 plugged into a plane-4 leaf).
- ``swapped``           one end is where the plan puts it, the other on a different port or switch (two cables
                        exchanged show up as two of these, and their action says "swap").
- ``port_offset``       as ``swapped``, but on the planned switch one port away from the planned port.
- ``impossible_port``   a switch port beyond the plan's radix for that switch (a split-mode switch checked
                        against a non-split plan, or a wrong port map): never called swapped.
- ``extra``             an observed cable the plan does not have, touching no planned cable's port, or of a kind
                        the plan never has (leaf to leaf, NIC to spine).
- ``missing``           a planned cable not seen and not explained by a finding above.
- ``unmatched_device``  an observed cable with an end whose device (or NIC) the plan does not know.

Identity and quality findings (see ``verify_checks``): ``degraded_width``, ``degraded_speed``, ``guid_changed``,
``duplicate_guid``, ``error_counters``, ``link_downed``, ``plane_not_seen``.

Planned cables explained by a ``cross_plane``/``swapped``/``port_offset``/``impossible_port`` finding (they
share a port with it) are not reported again as ``missing``; the finding's ``expected`` says what the plan has.

Switch-internal links (a Quantum switch's SHARP aggregation node on its last port, a management HCA in the
switch's system) are no cables: they are counted in ``switch_internal_links`` and give no finding. An HCA with
the firmware's default description (no host name) is placed by position, as ``ibdiagnet -t`` does: if the leaf
port it sits on is a planned NIC port and that NIC is seen nowhere else by name, it is that NIC (listed in
``matched_by_position``, and a finding on its cable says so); otherwise it is an ``unmatched_device``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from dsctl.cluster.plan_file import PlannedFabric, Port
from dsctl.errors import InputError
from dsctl.progress_count import Report, each
from dsctl.topology import verify_checks as checks
from dsctl.topology.naming import short_repr
from dsctl.topology.observed import ObservedEnd, ObservedFabric, ObservedLink, rename
from dsctl.topology.verify_model import FINDING_KINDS, Key, Resolver, WiringFinding, end_text, key_of, plan_text
from dsctl.topology.verify_position import by_position, place, position_note


@dataclass(frozen=True)
class DumpInfo:
    """One observed file: the plane its devices belong to (majority; -1 if none), and devices of other planes."""

    name: str
    format: str
    num_links: int
    plane: int
    other_planes: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class VerifyResult:
    """Outcome of ``dsctl topology verify``; ``exit_code`` 1 when any finding exists.

    ``guids``: node GUID -> plan name ("node0001 mlx5_0" for a NIC, the switch name) of every device matched,
    what ``--record-guids`` writes. ``expected_link``: the rate every planned cable should train at.
    """

    plan: str
    observed: str
    observed_format: str
    expected_cables: int
    observed_cables: int
    matched_cables: int
    counts: dict[str, int]
    unmatched_devices: list[str]
    plan_devices_not_seen: int
    findings: list[WiringFinding] = field(default_factory=list)
    exit_code: int = 0
    dumps: list[DumpInfo] = field(default_factory=list)
    planes_checked: list[int] = field(default_factory=list)
    expected_link: str = ""
    guids: dict[str, str] = field(default_factory=dict)
    #: "is this the right plan?" notes: the dumps cover a small share of the plan, or most of their devices are not
    #: in it (a 10-node dump checked against a 16,384-GPU plan reads as 32,000 missing cables otherwise)
    warnings: list[str] = field(default_factory=list)
    #: links to a switch-internal CA (SHARP aggregation node, management HCA): seen, not cables, no finding
    switch_internal_links: int = 0
    #: "<node> <nic> (0x<guid>)" of every default-described HCA placed by the planned NIC at its leaf port
    matched_by_position: list[str] = field(default_factory=list)


#: below this share of the planned cables (on the planes the dumps cover) in the dumps, verify asks "wrong plan?"
MIN_COVERAGE = 0.5


def plan_fit_warnings(expected_cables: int, observed_cables: int, observed_devices: int,
                      unmatched_devices: int) -> list[str]:
    """Warnings that the dumps and the plan may not describe the same fabric: ``observed_cables`` (links in the
    dumps) below ``MIN_COVERAGE`` of ``expected_cables`` (the planned cables on the planes the dumps cover, so that
    one plane's dump checked alone is not "wrong"), or more than half of the dumps' devices unknown to the plan."""
    warnings = []
    if expected_cables and observed_cables < MIN_COVERAGE * expected_cables:
        warnings.append(f"the dumps hold {observed_cables:,} links for {expected_cables:,} planned cables on "
                        f"their planes ({observed_cables / expected_cables:.1%}): is this the plan of this fabric, "
                        "and is every plane's dump given?")
    if observed_devices and unmatched_devices > observed_devices / 2:
        warnings.append(f"{unmatched_devices:,} of {observed_devices:,} devices in the dumps are not in the plan: "
                        "wrong plan, or default descriptions that need --node-name-map?")
    return warnings


@dataclass(frozen=True)
class VerifyOptions:
    """What besides the dumps goes into a verify.

    ``name_map``: GUID -> name (``--node-name-map``); ``recorded_guids``: GUID -> name of an earlier verified
    fabric (``--guids``), used to resolve ends and to flag replaced devices; ``counters``: per-port error
    counters (``verify_checks.PortCounters``); ``thresholds``: their limits.
    """

    name_map: dict[str, str] = field(default_factory=dict)
    recorded_guids: dict[str, str] = field(default_factory=dict)
    counters: tuple[object, ...] = ()
    thresholds: object | None = None


_NUMBER = re.compile(r"[+-]?\d+")


def check_csv_ports(plan: PlannedFabric, observed: ObservedFabric, observed_name: str = "OBSERVED") -> None:
    """Raise InputError (file, line, field, valid range) for a malformed port in a links CSV.

    A port of a switch the plan has must be a whole number 1..that switch's ports; a number below 1 is
    malformed on any device (no device has such a port). Text ports of devices the plan does not know are
    left to ``verify`` (reported as ``unmatched_device``). ibnetdiscover input is range-checked by its parser.
    """
    if observed.source_format != "csv":
        return
    resolver = Resolver(plan)
    for link in observed.links:
        for end, field_name in ((link.a, "a_port"), (link.b, "b_port")):
            device = resolver.device(end)
            where = f"{observed_name} line {link.line}: {field_name} {short_repr(end.port, 20)}"
            if device is not None and plan.tier[device] != "node":
                radix = plan.ports.get(device)
                digits = end.port.isascii() and end.port.isdigit() and len(end.port) <= 9
                if not digits or not 1 <= int(end.port) <= (radix or int(end.port)):
                    valid = f"1..{radix}" if radix else "from 1"
                    raise InputError(f"{where} of switch {short_repr(device)} is not a port number {valid}",
                                     hint="switch ports are numbered 1..radix, as on the face plate")
            elif _NUMBER.fullmatch(end.port) and len(end.port) <= 9 and int(end.port) < 1:
                raise InputError(f"{where} is not a port: ports are numbered from 1 (switch ports 1..radix)")


def _note(keys: list[Key], tier: dict[str, str]) -> str:
    words = [f"{plan_text(k[0], tier)} <-> {plan_text(k[1], tier)}" for k in keys]
    return ("plan: " + "; ".join(words)) if words else "plan: these ports are unused"


_TIER_RANK = {"node": 0, "leaf": 1, "spine": 2, "core": 3}


def _plannable(a: Port, b: Port, tier: dict[str, str]) -> bool:
    """True if a cable between these tiers can exist in a plan (adjacent tiers: node-leaf, leaf-spine, ...)."""
    ranks = sorted((_TIER_RANK.get(tier[a[0]], 9), _TIER_RANK.get(tier[b[0]], 9)))
    return ranks[1] - ranks[0] == 1


@dataclass
class _Seen:
    link: ObservedLink
    ends: Key
    planes: tuple[int, int]


def _dump_plane(plan: PlannedFabric, resolver: Resolver, fabric: ObservedFabric) -> tuple[int, dict[int, int]]:
    votes: dict[int, int] = {}
    for link in fabric.links:
        for end in (link.a, link.b):
            device = resolver.device(end)
            if device is not None and plan.tier[device] != "node":
                votes[plan.plane[device]] = votes.get(plan.plane[device], 0) + 1
    if not votes:
        return -1, {}
    plane = max(votes, key=lambda p: (votes[p], -p))
    return plane, {p: n for p, n in sorted(votes.items()) if p != plane}


def verify(plan: PlannedFabric, observed: ObservedFabric | Sequence[tuple[str, ObservedFabric]],
           plan_name: str = "plan", observed_name: str = "observed",
           options: VerifyOptions | None = None, report: Report | None = None) -> VerifyResult:
    """Compare; every cable and port is looked at once (dicts keyed by (device, port)).

    ``observed`` is one fabric or ``(name, fabric)`` per dump (one per plane; a cable printed in two dumps is
    counted once). When every dump is LLDP (RoCE, one per node) only NIC-to-leaf cables are expected.
    InputError for a malformed port of a links CSV (see ``check_csv_ports``). ``report(done, total)`` every 4,096
    observed links; the findings after them count as half as many links again (they take about that long).
    """
    opts = options or VerifyOptions()
    dumps = [(observed_name, observed)] if isinstance(observed, ObservedFabric) else list(observed)
    names = {**opts.recorded_guids, **opts.name_map}
    dumps = [(name, rename(fabric, names)) for name, fabric in dumps]
    tier = plan.tier
    internal_links = sum(1 for _, f in dumps for link in f.links if link.a.internal or link.b.internal)
    dumps = [(name, replace(f, links=[k for k in f.links if not (k.a.internal or k.b.internal)]))
             if any(k.a.internal or k.b.internal for k in f.links) else (name, f) for name, f in dumps]
    expected: dict[Key, int] = {}
    at_port: dict[Port, Key] = {}
    hosts_only = bool(dumps) and all(f.source_format == "lldp" for _, f in dumps)  # RoCE: NIC-leaf cables only
    for plane, kind, end_a, end_b in plan.cables:
        if hosts_only and kind != "node-leaf":
            continue
        key = key_of(end_a, end_b)
        expected[key] = plane
        at_port[end_a] = key
        at_port[end_b] = key
    findings: list[WiringFinding] = []
    unmatched: dict[str, None] = {}
    seen_devices: set[str] = set()
    seen: dict[Key, _Seen] = {}
    resolver = Resolver(plan)
    placed = by_position(plan, resolver, dumps, at_port)
    dumps = [(name, place(fabric, placed)) for name, fabric in dumps]
    infos: list[DumpInfo] = []
    explained: set[Key] = set()
    resolved_ends: list[tuple[ObservedEnd, Port]] = []
    links_total = sum(len(f.links) for _, f in dumps)
    tick = each(report, links_total + links_total // 2, every=4096)
    links_done = 0
    for name, fabric in dumps:
        check_csv_ports(plan, fabric, name)
        dump_plane, others = _dump_plane(plan, resolver, fabric)
        infos.append(DumpInfo(name, fabric.source_format, len(fabric.links), dump_plane, others))
        for link in fabric.links:
            links_done += 1
            tick(links_done)
            a, a_plane, why_a = resolver.resolve(link.a)
            b, b_plane, why_b = resolver.resolve(link.b)
            for port, end in ((a, link.a), (b, link.b)):
                if port is not None:
                    seen_devices.add(port[0])
                    resolved_ends.append((end, port))
            if a is None or b is None:
                for end, why in ((link.a, why_a), (link.b, why_b)):
                    if why:
                        unmatched[end.desc or end.device] = None
                planned_here = [at_port[p] for p in (a, b) if p is not None and p in at_port]
                findings.append(WiringFinding(
                    "unmatched_device", link.a.device, link.a.port, link.b.device, link.b.port, "",
                    _note(planned_here, tier) if planned_here else "", link.line,
                    "; ".join(w for w in (why_a, why_b) if w), name, "check_plan",
                    "add the device to the plan, or give its GUID a name with --node-name-map"))
                continue
            bad = next((p for p in (a, b) if tier[p[0]] != "node" and int(p[1]) > plan.ports[p[0]]), None)
            if bad is not None:
                good = b if bad == a else a
                explains = [at_port[good]] if good in at_port else []
                explained.update(explains)
                note = _note(explains, tier)
                findings.append(WiringFinding(
                    "impossible_port", a[0], a[1], b[0], b[1], str(a_plane), note, link.line,
                    f"{end_text(bad, tier)} is beyond the {plan.ports[bad[0]]} ports the plan gives {bad[0]}",
                    name, "check_plan",
                    f"{bad[0]} reports port {bad[1]} but the plan has ports 1..{plan.ports[bad[0]]}: if the switch "
                    "runs split ports, plan it with a split-port switch profile (e.g. --switch ib-ndr-128-split); "
                    f"else move the cable to {checks.planned_peer_text(good, at_port, tier)}",
                    bad[1], f"1..{plan.ports[bad[0]]}"))
                continue
            key = key_of(a, b)
            if key not in seen:
                planes = (a_plane if a_plane is not None else -1, b_plane if b_plane is not None else -1)
                seen[key] = _Seen(link, key, planes if key == (a, b) else (planes[1], planes[0]))
    matched = [k for k in seen if k in expected]
    missing = {k for k in expected if k not in seen}

    def explaining(key: Key) -> list[Key]:
        found = [at_port[p] for p in key if p in at_port and at_port[p] in missing]
        return list(dict.fromkeys(found))

    for key in [k for k in seen if k not in expected]:
        item = seen[key]
        end_a, end_b = key
        pa, pb = item.planes
        explains = explaining(key)
        note = _note(explains, tier)
        if pa != pb:
            kind, plane_text, msg = "cross_plane", f"{pa}/{pb}", f"cable joins plane {pa} and plane {pb}"
        elif not _plannable(end_a, end_b, tier):
            kind, plane_text, msg = "extra", str(pa), f"a {tier[end_a[0]]}-{tier[end_b[0]]} cable is never planned"
            explains, note = [], "plan: never a cable between these tiers"
        elif explains:
            kind, plane_text, msg = "swapped", str(pa), "cable is on a different port than planned"
            if checks.is_offset(key, at_port, tier):
                kind, msg = "port_offset", "cable is one port away from its planned port"
        else:
            kind, plane_text, msg = "extra", str(pa), "cable is not in the plan"
        explained.update(explains)
        action_kind, action = checks.cable_action(kind, key, at_port, tier)
        findings.append(WiringFinding(kind, end_a[0], end_a[1], end_b[0], end_b[1], plane_text, note, item.link.line,
                                f"{end_text(end_a, tier)} <-> {end_text(end_b, tier)}: {msg}"
                                + position_note(item.link), item.link.source, action_kind, action))
    checked = sorted({plan.plane[d] if tier[d] != "node" else -1 for d in seen_devices} - {-1})
    unseen_planes = sorted(set(plan.nic_plane.values()) | {p for d, p in plan.plane.items() if tier[d] != "node"
                                                           and p >= 0}) if dumps else []
    unseen_planes = [p for p in unseen_planes if p not in checked]
    for key in sorted(missing - explained, key=lambda k: (expected[k], k)):
        if expected[key] in unseen_planes:
            continue
        end_a, end_b = key
        findings.append(WiringFinding("missing", end_a[0], end_a[1], end_b[0], end_b[1], str(expected[key]), "", None,
                                f"{end_text(end_a, tier)} <-> {end_text(end_b, tier)}: planned cable not found",
                                "", "plug", f"plug a cable between {end_text(end_a, tier)} and "
                                            f"{end_text(end_b, tier)} (or re-seat it if it is there: no link)"))
    findings += checks.plane_findings(plan, unseen_planes, len(dumps), ethernet=hosts_only)
    findings = checks.pair_swaps(findings, at_port, tier)
    findings += checks.rate_findings(plan, [(k, seen[k].link) for k in matched], tier)
    guids = checks.guid_map(resolved_ends, tier)
    findings += checks.identity_findings(dumps, resolved_ends, opts.recorded_guids, tier)
    if opts.counters:
        findings += checks.counter_findings(plan, dumps, opts.counters, opts.thresholds, resolver)
    order = {k: i for i, k in enumerate(FINDING_KINDS)}
    findings.sort(key=lambda f: (order[f.kind], f.source, f.line if f.line is not None else 0, f.a_device,
                                 f.a_port))
    counts = {k: sum(1 for f in findings if f.kind == k) for k in FINDING_KINDS}
    not_seen = sum(1 for d in tier if d not in seen_devices)
    formats = sorted({fabric.source_format for _, fabric in dumps})
    observed_links = sum(len(f.links) for _, f in dumps)
    observed_devices = len(seen_devices) + len(unmatched)
    covered = set(checked)
    expected_covered = sum(1 for plane in expected.values() if plane in covered or plane < 0)
    warnings = plan_fit_warnings(expected_covered, observed_links, observed_devices, len(unmatched))
    tick(links_total + links_total // 2)
    return VerifyResult(plan_name, ", ".join(n for n, _ in dumps), "+".join(formats), len(expected),
                        observed_links, len(matched), counts, list(unmatched), not_seen,
                        findings, 1 if findings else 0, infos, checked, plan.link, guids, warnings,
                        internal_links, [f"{v} (0x{k})" for k, v in sorted(placed.items(), key=lambda kv: kv[1])])
