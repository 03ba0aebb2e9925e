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

from dsctl.errors import InputError
from dsctl.textjson import load_json
from dsctl.topology.export import CABLE_COLUMNS, DEVICE_COLUMNS, PLAN_SCHEMA
from dsctl.topology.naming import short_repr
from dsctl.topology.observed import ObservedEnd, ObservedFabric
from dsctl.topology.plan import CABLE_KINDS, TIER_NAMES

FINDING_KINDS = ("missing", "extra", "swapped", "cross_plane", "unmatched_device")
Port = tuple[str, str]  # (device, port label)
Key = tuple[Port, Port]


@dataclass(frozen=True)
class ExpectedFabric:
    """The planned cables of a plan.json: device tier/plane, NIC planes, and cables by both ends.

    ``ports`` is the number of ports of each device (a switch's ports are numbered 1..ports).
    """

    tier: dict[str, str]
    plane: dict[str, int]
    nic_plane: dict[str, int]
    cables: list[tuple[int, str, Port, Port]]
    kind: str = ""
    ports: dict[str, int] = field(default_factory=dict)


def _describe(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return short_repr(value)
    if isinstance(value, (int, float)):
        return str(value)
    return f"a JSON {type(value).__name__.replace('dict', 'object').replace('list', 'array')}"


class _PlanChecker:
    """Field-by-field checks of a plan.json document; every failure names the key path."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, expected: str, value: object) -> InputError:
        return InputError(f"{self.source}: {key} must be {expected}, got {_describe(value)}",
                          hint="regenerate it with 'dsctl topology plan --out DIR'")

    def array(self, doc: dict[str, object], key: str) -> list[object]:
        value = doc.get(key)
        if not isinstance(value, list):
            raise self.fail(key, "an array", value)
        return value

    def row(self, value: object, key: str, columns: tuple[str, ...]) -> list[object]:
        if not isinstance(value, list) or len(value) != len(columns):
            raise self.fail(key, f"an array of {len(columns)} values ({', '.join(columns)})", value)
        return value

    def name(self, value: object, key: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(key, "a non-empty name", value)
        return value

    def integer(self, value: object, key: str, low: int, high: int | None = None, of: str = "") -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None
                                                                                  and value > high):
            expected = f"a whole number {low}..{high}" if high is not None else f"a whole number >= {low}"
            raise self.fail(key, expected + of, value)
        return value


def _port_ok(port: object, device_tier: str | None, device_ports: int, nic_plane: dict[str, int]) -> bool:
    if device_tier == "node":
        return isinstance(port, str) and port in nic_plane
    return type(port) is int and 1 <= port <= device_ports


def _fast_cable(raw: object, tier: dict[str, str], ports: dict[str, int],
                nic_plane: dict[str, int]) -> tuple[int, str, Port, Port] | None:
    """The cable of a well-formed row, or None (then ``_checked_cable`` names the bad field)."""
    if type(raw) is not list or len(raw) != 6:
        return None
    plane, kind, a_dev, a_port, b_dev, b_port = raw
    if (type(plane) is int and plane >= 0 and kind in CABLE_KINDS and type(a_dev) is str and type(b_dev) is str
            and a_dev in tier and b_dev in tier and _port_ok(a_port, tier[a_dev], ports[a_dev], nic_plane)
            and _port_ok(b_port, tier[b_dev], ports[b_dev], nic_plane)):
        return plane, kind, (a_dev, str(a_port)), (b_dev, str(b_port))
    return None


def _checked_cable(check: _PlanChecker, i: int, raw: object, tier: dict[str, str], ports: dict[str, int],
                   nic_plane: dict[str, int]) -> tuple[int, str, Port, Port]:
    """Field-by-field check of cable row ``i``; raises InputError naming the first bad key."""
    row = check.row(raw, f"cables[{i}]", CABLE_COLUMNS)
    cable_plane = check.integer(row[0], f"cables[{i}][0] (plane)", 0)
    if row[1] not in CABLE_KINDS:
        raise check.fail(f"cables[{i}][1] (kind)", "one of " + ", ".join(CABLE_KINDS), row[1])
    ends: list[Port] = []
    for col in (2, 4):
        device = check.name(row[col], f"cables[{i}][{col}] ({CABLE_COLUMNS[col]})")
        if device not in tier:
            raise check.fail(f"cables[{i}][{col}] ({CABLE_COLUMNS[col]})", "a device listed in devices", device)
        key, port = f"cables[{i}][{col + 1}] ({CABLE_COLUMNS[col + 1]})", row[col + 1]
        if tier[device] == "node":
            if not (isinstance(port, str) and port in nic_plane):
                raise check.fail(key, f"a NIC name listed in nics (node {device})", port)
            ends.append((device, port))
        else:
            ends.append((device, str(check.integer(port, key, 1, ports[device], f" (a port of {device})"))))
    return cable_plane, str(row[1]), ends[0], ends[1]


def load_plan_json(text: str, source: str = "plan.json") -> ExpectedFabric:
    """Read and validate the parts of a plan.json that verification needs.

    InputError (naming the key, e.g. ``cables[12][5] (b_port)``) if it is not a plan or a field is missing,
    null or out of range: device names non-empty and unique, tiers node/leaf/spine/core, NIC names listed in
    ``nics``, switch ports whole numbers 1..the switch's ports, cables between listed devices.
    """
    doc = load_json(text, source)
    if not isinstance(doc, dict) or doc.get("schema") != PLAN_SCHEMA:
        raise InputError(f"{source} is not a dsctl topology plan (expected \"schema\": \"{PLAN_SCHEMA}\")",
                         hint="write one with 'dsctl topology plan --out DIR'")
    check = _PlanChecker(source)
    if doc.get("cable_columns") != list(CABLE_COLUMNS):
        raise check.fail("cable_columns", str(list(CABLE_COLUMNS)), doc.get("cable_columns"))
    tier: dict[str, str] = {}
    plane: dict[str, int] = {}
    ports: dict[str, int] = {}
    for i, raw in enumerate(check.array(doc, "devices")):
        row = check.row(raw, f"devices[{i}]", DEVICE_COLUMNS)
        name = check.name(row[0], f"devices[{i}][0] (name)")
        if name in tier:
            raise check.fail(f"devices[{i}][0] (name)", "a name not used by an earlier device", name)
        if row[1] not in TIER_NAMES:
            raise check.fail(f"devices[{i}][1] (tier)", "one of " + ", ".join(TIER_NAMES), row[1])
        tier[name] = str(row[1])
        plane[name] = check.integer(row[2], f"devices[{i}][2] (plane)", -1)
        check.integer(row[3], f"devices[{i}][3] (pod)", -1)
        ports[name] = check.integer(row[4], f"devices[{i}][4] (ports)", 1)
    nics = [check.name(n, f"nics[{i}]") for i, n in enumerate(check.array(doc, "nics"))]
    nic_planes = check.array(doc, "nic_plane")
    if len(nic_planes) != len(nics):
        raise check.fail("nic_plane", f"an array of {len(nics)} planes (one per NIC in nics)",
                         f"{len(nic_planes)} values")
    nic_plane = {n: check.integer(p, f"nic_plane[{i}]", 0) for i, (n, p) in enumerate(zip(nics, nic_planes,
                                                                                           strict=True))}
    cables: list[tuple[int, str, Port, Port]] = []
    for i, raw in enumerate(check.array(doc, "cables")):
        cable = _fast_cable(raw, tier, ports, nic_plane)
        cables.append(cable if cable is not None else _checked_cable(check, i, raw, tier, ports, nic_plane))
    spec = doc.get("spec", {})
    kind = str(spec.get("kind", "")) if isinstance(spec, dict) else ""
    return ExpectedFabric(tier, plane, nic_plane, cables, kind, ports)


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

    def __init__(self, plan: ExpectedFabric) -> None:
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


def check_csv_ports(plan: ExpectedFabric, observed: ObservedFabric, observed_name: str = "OBSERVED") -> None:
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
                digits = end.port.isascii() and end.port.isdigit()
                if not digits or not 1 <= int(end.port) <= (radix or int(end.port)):
                    valid = f"1..{radix}" if radix else "from 1"
                    raise InputError(f"{where} of switch {short_repr(device)} is not a port number {valid}",
                                     hint="switch ports are numbered 1..radix, as on the face plate")
            elif _NUMBER.fullmatch(end.port) and int(end.port) < 1:
                raise InputError(f"{where} is not a port: ports are numbered from 1 (switch ports 1..radix)")


def _key(a: Port, b: Port) -> Key:
    return (a, b) if a <= b else (b, a)


def _text(port: Port, tier: dict[str, str]) -> str:
    return f"{port[0]} {port[1]}" if tier.get(port[0]) == "node" else f"{port[0]} port {port[1]}"


def verify(plan: ExpectedFabric, observed: ObservedFabric, plan_name: str = "plan",
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
