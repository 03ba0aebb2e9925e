"""Compare a plan (plan.json text) with an observed fabric and name every difference.

Finding kinds, each with the cable's both ends as observed (or as planned, for ``missing``):

- ``cross_plane``       an observed cable joins two planes (e.g. NIC mlx5_3 plugged into a plane-4 leaf).
- ``swapped``           an observed cable has one end where the plan puts it and the other on a different
                        port or switch (two cables exchanged on a switch show up as two of these).
- ``extra``             an observed cable the plan does not have, touching no planned cable's port.
- ``missing``           a planned cable not seen and not explained by a finding above.
- ``unmatched_device``  an observed cable with an end whose device (or NIC) the plan does not know.

Planned cables explained by a ``cross_plane`` or ``swapped`` finding (they share a port with it) are not
reported again as ``missing``; the finding's ``expected`` text says what the plan has at those ports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from dsctl.cluster.plan_file import PlannedFabric, Port
from dsctl.errors import InputError
from dsctl.topology.naming import short_repr
from dsctl.topology.observed import ObservedEnd, ObservedFabric

FINDING_KINDS = ("missing", "extra", "swapped", "cross_plane", "unmatched_device")
Key = tuple[Port, Port]


@dataclass(frozen=True)
class Finding:
    """One difference between plan and fabric. ``line`` is the observed file's line (None for ``missing``)."""

    kind: str
    a_device: str
    a_port: str
    b_device: str
    b_port: str
    plane: str
    expected: str
    line: int | None
    message: str


@dataclass(frozen=True)
class VerifyResult:
    """Outcome of ``dsctl topology verify``; ``exit_code`` 1 when any finding exists."""

    plan: str
    observed: str
    observed_format: str
    expected_cables: int
    observed_cables: int
    matched_cables: int
    counts: dict[str, int]
    unmatched_devices: list[str]
    plan_devices_not_seen: int
    findings: list[Finding] = field(default_factory=list)
    exit_code: int = 0


_SPLIT = re.compile(r"[\s;:/,|]+")


class _Resolver:
    """Maps observed ends to planned (device, port label) and plane."""

    def __init__(self, plan: PlannedFabric) -> None:
        self.plan = plan

    def device(self, end: ObservedEnd) -> str | None:
        if end.device in self.plan.tier:
            return end.device
        for token in _SPLIT.split(end.desc or end.device):
            if token in self.plan.tier:
                return token
        return None

    def resolve(self, end: ObservedEnd) -> tuple[Port | None, int | None, str]:
        """((device, port), plane, why-not) for an observed end."""
        device = self.device(end)
        if device is None:
            return None, None, f"device {short_repr(end.desc or end.device, 60)} is not in the plan"
        if self.plan.tier[device] == "node":
            port = end.port
            if port not in self.plan.nic_plane:
                return None, None, f"NIC {short_repr(port, 60)} of {device} is not in the plan"
            return (device, port), self.plan.nic_plane[port], ""
        try:
            number = int(end.port)
        except ValueError:
            return None, None, f"switch {device} port {short_repr(end.port, 20)} is not a port number"
        return (device, str(number)), self.plan.plane[device], ""


_NUMBER = re.compile(r"[+-]?\d+")


def check_csv_ports(plan: PlannedFabric, observed: ObservedFabric, observed_name: str = "OBSERVED") -> None:
    """Raise InputError (file, line, field, valid range) for a malformed port in a links CSV.

    A port of a switch the plan has must be a whole number 1..that switch's ports; a number below 1 is
    malformed on any device (no device has such a port). Text ports of devices the plan does not know are
    left to ``verify`` (reported as ``unmatched_device``). ibnetdiscover input is range-checked by its parser.
    """
    if observed.source_format != "csv":
        return
    resolver = _Resolver(plan)
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


def _key(a: Port, b: Port) -> Key:
    return (a, b) if a <= b else (b, a)


def _text(port: Port, tier: dict[str, str]) -> str:
    return f"{port[0]} {port[1]}" if tier.get(port[0]) == "node" else f"{port[0]} port {port[1]}"


def verify(plan: PlannedFabric, observed: ObservedFabric, plan_name: str = "plan",
           observed_name: str = "observed") -> VerifyResult:
    """Compare; every cable and port is looked at once (dicts keyed by (device, port)).

    InputError for a malformed port of a links CSV (see ``check_csv_ports``).
    """
    check_csv_ports(plan, observed, observed_name)
    tier = plan.tier
    expected: dict[Key, int] = {}
    at_port: dict[Port, Key] = {}
    for plane, _, end_a, end_b in plan.cables:
        key = _key(end_a, end_b)
        expected[key] = plane
        at_port[end_a] = key
        at_port[end_b] = key
    findings: list[Finding] = []
    unmatched: dict[str, None] = {}
    seen_devices: set[str] = set()
    observed_keys: dict[Key, tuple[int, int, int]] = {}
    resolver = _Resolver(plan)
    for link in observed.links:
        a, a_plane, why_a = resolver.resolve(link.a)
        b, b_plane, why_b = resolver.resolve(link.b)
        for port in (a, b):
            if port is not None:
                seen_devices.add(port[0])
        if a is None or b is None:
            for end, why in ((link.a, why_a), (link.b, why_b)):
                if why:
                    unmatched[end.desc or end.device] = None
            findings.append(Finding(
                "unmatched_device", link.a.device, link.a.port, link.b.device, link.b.port, "",
                "", link.line, "; ".join(w for w in (why_a, why_b) if w)))
            continue
        key = _key(a, b)
        if key not in observed_keys:
            observed_keys[key] = (link.line, a_plane if a_plane is not None else -1,
                                  b_plane if b_plane is not None else -1)
    matched = [k for k in observed_keys if k in expected]
    missing = {k for k in expected if k not in observed_keys}
    explained: set[Key] = set()

    def expected_at(key: Key) -> tuple[str, list[Key]]:
        found = [at_port[p] for p in key if p in at_port and at_port[p] in missing]
        found = list(dict.fromkeys(found))
        words = [f"{_text(k[0], tier)} <-> {_text(k[1], tier)}" for k in found]
        return ("plan: " + "; ".join(words)) if words else "plan: these ports are unused", found

    for key in [k for k in observed_keys if k not in expected]:
        line, pa, pb = observed_keys[key]
        end_a, end_b = key
        note, explains = expected_at(key)
        if pa != pb:
            kind, plane_text = "cross_plane", f"{pa}/{pb}"
            msg = f"cable joins plane {pa} and plane {pb}"
        elif explains:
            kind, plane_text = "swapped", str(pa)
            msg = "cable is on a different port than planned"
        else:
            kind, plane_text = "extra", str(pa)
            msg = "cable is not in the plan"
        explained.update(explains if kind != "extra" else [])
        findings.append(Finding(kind, end_a[0], end_a[1], end_b[0], end_b[1], plane_text, note, line,
                                f"{_text(end_a, tier)} <-> {_text(end_b, tier)}: {msg}"))
    for key in sorted(missing - explained, key=lambda k: (expected[k], k)):
        end_a, end_b = key
        findings.append(Finding("missing", end_a[0], end_a[1], end_b[0], end_b[1], str(expected[key]), "", None,
                                f"{_text(end_a, tier)} <-> {_text(end_b, tier)}: planned cable not found"))
    order = {k: i for i, k in enumerate(("cross_plane", "swapped", "missing", "extra", "unmatched_device"))}
    findings.sort(key=lambda f: (order[f.kind], f.line if f.line is not None else 0, f.a_device, f.a_port))
    counts = {k: sum(1 for f in findings if f.kind == k) for k in FINDING_KINDS}
    not_seen = sum(1 for d in tier if d not in seen_devices)
    return VerifyResult(plan_name, observed_name, observed.source_format, len(expected), len(observed.links),
                        len(matched), counts, list(unmatched), not_seen, findings, 1 if findings else 0)
