"""plan.json, the planned fabric that ``dsctl topology plan --out-dir DIR`` writes: its schema and its reader.

Schema ``"schema": "dsctl.topology.plan/1"``:

- ``spec``: the inputs (kind, num_nodes, num_nics_per_node, num_gpus_per_node, num_planes, radix, port_gbps, ...).
- ``summary``: what ``dsctl topology plan --format json`` prints.
- ``nics``: NIC names by NIC index; ``nic_plane``: the plane of each NIC index.
- ``device_columns`` / ``devices``: one row per device ``[name, tier, plane, pod, ports]``; tier is node, leaf,
  spine or core; plane and pod are 0-based, -1 where they do not apply. Nodes come first, in node-index order.
- ``cable_columns`` / ``cables``: one row per cable ``[plane, kind, a_device, a_port, b_device, b_port]``; the
  a end is the lower tier; a node's port is its NIC name, a switch port a whole number 1..ports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from dsctl.errors import InputError
from dsctl.names import DEVICE, NODE_NAME_RULE, plain_node_name, shown
from dsctl.textjson import load_json

PLAN_SCHEMA = "dsctl.topology.plan/1"
CABLE_COLUMNS = ("plane", "kind", "a_device", "a_port", "b_device", "b_port")
DEVICE_COLUMNS = ("name", "tier", "plane", "pod", "ports")
CABLE_KINDS = ("node-leaf", "leaf-spine", "spine-core")
TIER_NAMES = ("node", "leaf", "spine", "core")
REGENERATE = "regenerate it with 'dsctl topology plan --out-dir DIR'"
#: most NIC endpoints (nodes x NICs per node) a plan may hold, and most nodes and GPUs (nodes x GPUs per node):
#: the largest fabric ``topology plan`` writes. Checked from the lists' lengths before any per-node table is built
#: (burn-in, ``topology simulate`` and ``trace --plan`` allocate arrays of nodes x NICs and nodes x GPUs)
MAX_ENDPOINTS = 4 * 1024 * 1024
#: most NICs per node (``nics``) and GPUs per node (``spec.num_gpus_per_node``; node profiles allow 64 GPUs)
MAX_NICS_PER_NODE = 256
MAX_GPUS_PER_NODE = 64
#: longest device or NIC name (an InfiniBand node description holds 64 bytes)
MAX_DEVICE_NAME_CHARS = 64
DEVICE_NAME_RULE = "letters, digits and '._:/@+-' (at most 64, no spaces, quotes or control characters)"

Port = tuple[str, str]
"""One end of a cable: (device name, port label); a node's port label is its NIC name, a switch's the number."""


@dataclass(frozen=True)
class PlannedFabric:
    """The devices and cables of a plan.json, keyed by name.

    ``tier``/``plane``/``ports``: per device (insertion order = plan order, nodes first); a switch's ports are
    numbered 1..``ports[name]``. ``nic_plane``: the plane of each NIC name (insertion order = NIC index).
    ``cables``: ``(plane, kind, a_end, b_end)`` with a the lower tier. ``spec``: the plan's ``spec`` object
    (numbers as written; :attr:`port_gbps` and :attr:`num_gpus_per_node` read the two most used).
    """

    tier: dict[str, str]
    plane: dict[str, int]
    nic_plane: dict[str, int]
    cables: list[tuple[int, str, Port, Port]]
    kind: str = ""
    ports: dict[str, int] = field(default_factory=dict)
    spec: dict[str, object] = field(default_factory=dict)

    @cached_property
    def nodes(self) -> tuple[str, ...]:
        """Node names in node-index order (node ``i`` of ranks.csv is ``nodes[i]``)."""
        return tuple(n for n, t in self.tier.items() if t == "node")

    @cached_property
    def nics(self) -> tuple[str, ...]:
        """NIC names in NIC-index order (GPU ``i`` of a node is paired with NIC ``i``)."""
        return tuple(self.nic_plane)

    @cached_property
    def num_planes(self) -> int:
        return max(self.nic_plane.values(), default=-1) + 1

    @cached_property
    def uplink(self) -> dict[Port, Port]:
        """The switch end of every node-leaf cable, by its node end: ``(node, nic) -> (leaf, port)``."""
        return {a: b for _, kind, a, b in self.cables if kind == "node-leaf"}

    def number(self, key: str, default: float = 0.0) -> float:
        """A numeric ``spec`` field, or ``default`` where absent or not a number."""
        value = self.spec.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return default
        return float(value)

    @property
    def port_gbps(self) -> float:
        return self.number("port_gbps")

    @cached_property
    def link(self) -> str:
        """Width x speed every port should train at, as ibnetdiscover prints it (``4xNDR``; ``""`` if unknown).

        The plan's ``spec.link`` (from the switch profile's ``link``), else inferred from ``port_gbps`` as a
        4-lane link: 800 XDR, 400 NDR, 200 HDR, 100 EDR, 40 QDR (older plans carry no ``link``).
        """
        text = self.spec.get("link")
        if isinstance(text, str) and text:
            return text
        return {800.0: "4xXDR", 400.0: "4xNDR", 200.0: "4xHDR", 100.0: "4xEDR", 40.0: "4xQDR"}.get(self.port_gbps, "")

    @property
    def num_gpus_per_node(self) -> int:
        return int(self.number("num_gpus_per_node", float(len(self.nic_plane))))


def _describe(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, (int, float)):
        return str(value)
    return f"a JSON {type(value).__name__.replace('dict', 'object').replace('list', 'array')}"


class _PlanChecker:
    """Field-by-field checks of a plan.json document; every failure names the key path."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, expected: str, value: object) -> InputError:
        return InputError(f"{self.source}: {key} must be {expected}, got {_describe(value)}", hint=REGENERATE)

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

    def too_many(self, key: str, found: str, limit: str) -> InputError:
        return InputError(f"{self.source}: {key}: {found}; dsctl reads plans of at most {limit}",
                          hint="a plan that large is not one 'dsctl topology plan' writes; plan one pod or plane "
                               "at a time")

    def device_name(self, value: object, key: str) -> str:
        """A switch or NIC name: :data:`dsctl.names.DEVICE` in full, at most MAX_DEVICE_NAME_CHARS (it reaches
        topology.conf, CSV, DOT and SVG)."""
        name = self.name(value, key)
        if len(name) > MAX_DEVICE_NAME_CHARS or not DEVICE.fullmatch(name):
            raise self.fail(key, f"a device name ({DEVICE_NAME_RULE})", value)
        return name

    def node_name(self, value: object, key: str) -> str:
        """A node name: one plain Slurm node (:func:`dsctl.names.plain_node_name`); drains name it to scontrol."""
        name = self.name(value, key)
        if not plain_node_name(name):
            raise self.fail(key, f"a plain node name ({NODE_NAME_RULE})", value)
        return name

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


def _gpus_per_node(check: _PlanChecker, spec: object) -> int:
    """``spec.num_gpus_per_node`` where given (1..MAX_GPUS_PER_NODE), else 0."""
    value = spec.get("num_gpus_per_node") if isinstance(spec, dict) else None
    if value is None:
        return 0
    return check.integer(value, "spec.num_gpus_per_node", 1, MAX_GPUS_PER_NODE)


def load_plan(text: str, source: str = "plan.json") -> PlannedFabric:
    """Read and validate a plan.json text.

    InputError (naming the key, e.g. ``cables[12][5] (b_port)``) if it is not a plan or a field is missing,
    null or out of range: node names plain Slurm node names (:func:`dsctl.names.plain_node_name`: never ``ALL``
    or a hostlist), switch and NIC names :data:`dsctl.names.DEVICE` names of at most MAX_DEVICE_NAME_CHARS, every
    name unique, tiers node/leaf/spine/core, nodes listed before the switches, NIC names listed in ``nics``,
    switch ports whole numbers 1..the switch's ports, cables between listed devices; at most MAX_NICS_PER_NODE
    NICs, MAX_GPUS_PER_NODE GPUs per node and MAX_ENDPOINTS nodes x max(NICs, GPUs), counted before the nodes'
    rows are read on.
    """
    doc = load_json(text, source)
    if not isinstance(doc, dict) or doc.get("schema") != PLAN_SCHEMA:
        raise InputError(f"{source} is not a dsctl topology plan (expected \"schema\": \"{PLAN_SCHEMA}\")",
                         hint="write one with 'dsctl topology plan --out-dir DIR'")
    check = _PlanChecker(source)
    if doc.get("cable_columns") != list(CABLE_COLUMNS):
        raise check.fail("cable_columns", str(list(CABLE_COLUMNS)), doc.get("cable_columns"))
    tier: dict[str, str] = {}
    plane: dict[str, int] = {}
    ports: dict[str, int] = {}
    num_nodes = 0  # nodes so far (they come first), counted once rather than per row
    raw_nics = check.array(doc, "nics")
    if len(raw_nics) > MAX_NICS_PER_NODE:
        raise check.too_many("nics", f"{len(raw_nics):,} NICs per node", f"{MAX_NICS_PER_NODE} NICs per node")
    nics = [check.device_name(n, f"nics[{i}]") for i, n in enumerate(raw_nics)]
    gpus = _gpus_per_node(check, doc.get("spec"))
    for i, raw in enumerate(check.array(doc, "devices")):
        row = check.row(raw, f"devices[{i}]", DEVICE_COLUMNS)
        if row[1] not in TIER_NAMES:
            raise check.fail(f"devices[{i}][1] (tier)", "one of " + ", ".join(TIER_NAMES), row[1])
        key = f"devices[{i}][0] (name)"
        name = check.node_name(row[0], key) if row[1] == "node" else check.device_name(row[0], key)
        if name in tier:
            raise check.fail(key, "a name not used by an earlier device", name)
        if row[1] == "node" and len(tier) != num_nodes:
            raise check.fail(f"devices[{i}][1] (tier)", "a switch tier (nodes are listed before switches)",
                             row[1])
        if row[1] == "node" and (num_nodes + 1) * max(len(nics), gpus, 1) > MAX_ENDPOINTS:
            raise check.too_many("devices", f"more than {num_nodes:,} nodes of {len(nics)} NICs and {gpus} GPUs",
                                 f"{MAX_ENDPOINTS:,} endpoints (nodes x the larger of NICs and GPUs per node)")
        tier[name] = str(row[1])
        num_nodes += row[1] == "node"
        plane[name] = check.integer(row[2], f"devices[{i}][2] (plane)", -1)
        check.integer(row[3], f"devices[{i}][3] (pod)", -1)
        ports[name] = check.integer(row[4], f"devices[{i}][4] (ports)", 1)
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
    spec = spec if isinstance(spec, dict) else {}
    return PlannedFabric(tier, plane, nic_plane, cables, str(spec.get("kind", "")), ports, dict(spec))
