"""RoCE planes: a node's LLDP neighbours (``lldpctl -f json`` or ``-f json0``, lldpd 1.x) as NIC-to-leaf cables.

lldpd prints two JSON shapes (as in lldpd's own integration tests, ``tests/integration/test_lldpcli.py``).
``-f json`` keys objects by name and drops one-element lists::

    {"lldp": {"interface": {"eth0": {"via": "LLDP", "chassis": {"p3-leaf04": {"id": {...}, "descr": "..."}},
                                     "port": {"id": {"type": "ifname", "value": "swp17"}, "descr": "swp17"}}}}}

(``interface`` is a list of one-key objects when there are several, in some versions; ``chassis`` holds ``id``
only when the neighbour sends no name). ``-f json0``, the shape lldpd documents for scripts, is the same data
with every value a list and names as fields::

    {"lldp": [{"interface": [{"name": "eth0", "via": "LLDP",
                              "chassis": [{"id": [{"type": "mac", "value": "..."}], "name": [{"value": "p3-leaf04"}]}],
                              "port": [{"id": [{"type": "mac", "value": "..."}], "descr": [{"value": "swp17"}]}]}]}]}

The file comes from one node and does not name it: the node is the file name's stem (``node0001.json``, as
the fleet runner saves per-node output). The local interface must be a NIC name of the plan (plan RoCE NICs
by their netdev names, ``--nic-name``). The switch port is the last number of the neighbour's port name: the port
id when its subtype names the port (``ifname``, ``ifalias``, or none given), else (subtype ``mac``, ``local``,
``ip``, ...: a MAC address or an opaque index, never a port number) the port description, which switches set to
the port's name. ``swp17``, ``Eth1/17`` and ``17`` are port 17. (SONiC's ``Ethernet68`` numbers lanes, not
face-plate ports: map it first.) A neighbour whose port name holds no number keeps its raw text, and verify
reports it as ``unmatched_device``. A file with no neighbour, or of another shape, is refused (one line).
"""

from __future__ import annotations

from typing import Any

from dsctl.errors import InputError
from dsctl.names import bounded_int, last_digit_run, shown
from dsctl.textjson import load_json
from dsctl.topology.observed import ObservedEnd, ObservedFabric, ObservedLink

#: digits of a switch port number (a face-plate port; SONiC's lane numbers stay below 1,000)
PORT_DIGITS = 9
#: port id subtypes whose value is the port's name (lldpd's names; "" when the output gives none)
NAMED_SUBTYPES = ("ifname", "ifalias", "")
#: most interfaces one node's file may list (a node has tens; the check comes before any work per interface)
MAX_INTERFACES = 4096
_HINT = "expected 'lldpctl -f json0' (or '-f json') output of one node: {\"lldp\": ... \"interface\": ...}"


def looks_like_lldp(text: str) -> bool:
    """True if the text is a JSON object whose first key is ``lldp`` (what ``lldpctl -f json``/``json0`` print)."""
    head = text.lstrip()[:200]
    return head.startswith("{") and '"lldp"' in head


def node_of(source: str) -> str:
    """The node an LLDP file describes: its file name without folders and extensions."""
    return source.replace("\\", "/").rsplit("/", 1)[-1].split(".", 1)[0]


def _text(value: Any) -> str:
    """A leaf value of either shape: ``"x"``, ``{"value": "x"}``, ``[{"value": "x"}]``; "" if none."""
    if isinstance(value, list):
        value = value[0] if value else ""
    if isinstance(value, dict):
        value = value.get("value", "")
    return value if isinstance(value, str) else ""


def _one(value: Any) -> dict[str, Any]:
    """A json0 one-element list of an object, or the object itself (json); {} otherwise."""
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    return value if isinstance(value, dict) else {}


def _interfaces(doc: Any, source: str) -> list[tuple[str, dict[str, Any]]]:
    """(local interface, its detail) of each neighbour, from either shape; InputError for any other shape."""
    lldp = doc.get("lldp") if isinstance(doc, dict) else None
    if isinstance(lldp, list):  # json0: [{"interface": [...]}]
        if len(lldp) > 1:
            raise InputError(f"{source}: \"lldp\" holds {len(lldp)} objects; 'lldpctl -f json0' prints one",
                             hint=_HINT)
        lldp = lldp[0] if lldp else {}
    if not isinstance(lldp, dict):
        raise InputError(f"{source} is not 'lldpctl -f json' or '-f json0' output (no \"lldp\" object)", hint=_HINT)
    raw = lldp.get("interface")
    if raw is None:
        raise InputError(f"{source}: no LLDP neighbour on any interface (\"lldp\" has no \"interface\")",
                         hint="run 'lldpctl -f json0' once lldpd has heard the switches (LLDP on, 30 s after start); "
                              "a node without neighbours cannot be checked")
    entries = raw if isinstance(raw, list) else [raw] if isinstance(raw, dict) else None
    if entries is None:
        raise InputError(f"{source}: \"interface\" is neither an object nor a list", hint=_HINT)
    if len(entries) > MAX_INTERFACES:
        raise InputError(f"{source}: {len(entries):,} interface entries; a node's file holds at most "
                         f"{MAX_INTERFACES:,}", hint=_HINT)
    out: list[tuple[str, dict[str, Any]]] = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise InputError(f"{source}: an \"interface\" entry is not an object", hint=_HINT)
        name = entry.get("name")
        if isinstance(name, str) and ("chassis" in entry or "port" in entry):  # json0: the name is a field
            out.append((name, entry))
            continue
        if len(out) + len(entry) > MAX_INTERFACES:
            raise InputError(f"{source}: more than {MAX_INTERFACES:,} interfaces", hint=_HINT)
        for ifname, detail in entry.items():  # json: keyed by interface name
            if not isinstance(detail, dict):
                raise InputError(f"{source}: interface {shown(ifname)} is not an object", hint=_HINT)
            out.append((ifname, detail))
    return out


def _switch_name(chassis: Any) -> str:
    """The neighbour's system name (json: the key; json0: ``name``), else its chassis id; "" if neither."""
    if isinstance(chassis, list):
        chassis = _one(chassis)
    if not isinstance(chassis, dict):
        return ""
    if "name" in chassis or "id" in chassis:  # json0, or json without a system name
        return _text(chassis.get("name")) or _text(chassis.get("id"))
    names = [k for k, v in chassis.items() if isinstance(v, dict)]
    return names[0] if names else ""


def _port_name(port: dict[str, Any]) -> tuple[str, str]:
    """(the port's name, where it came from): the id if its subtype names the port, else the description."""
    raw_id = port.get("id")
    subtype = _one(raw_id).get("type", "") if isinstance(raw_id, (dict, list)) else ""
    subtype = subtype if isinstance(subtype, str) else "?"
    ident, descr = _text(raw_id), _text(port.get("descr"))
    if subtype in NAMED_SUBTYPES and ident:
        return ident, "port id"
    if descr:
        return descr, "port description"
    return (f"{subtype} {ident}".strip() if ident else ""), f"port id of subtype {subtype or '?'}"


def parse_lldp(text: str, source: str = "LLDP") -> ObservedFabric:
    """Every neighbour of one node's ``lldpctl -f json0`` / ``-f json`` output as a link (node, interface) <->
    (switch, port).

    InputError (one line) if it is not lldpctl JSON of either shape, names no neighbour, or an interface has no
    ``port``. A neighbour without a system name or a port name with a number is kept with its raw text so that
    ``verify`` reports it as ``unmatched_device``; a MAC-subtype port id never becomes a port number.
    """
    doc = load_json(text, source)
    node = node_of(source)
    interfaces = _interfaces(doc, source)
    links: list[ObservedLink] = []
    for number, (ifname, detail) in enumerate(interfaces, 1):
        port = _one(detail.get("port"))
        if not port:
            raise InputError(f"{source}: interface {shown(ifname)} has no neighbour \"port\"", hint=_HINT)
        switch = _switch_name(detail.get("chassis"))
        name, origin = _port_name(port)
        run = last_digit_run(name) if origin in ("port id", "port description") else None
        port_number = 0
        if run is not None:
            port_number = bounded_int(name[run[0]:run[1]], f"{source}: interface {shown(ifname)} neighbour "
                                      f"{origin} {shown(name)}", PORT_DIGITS)
        port_text = str(port_number) if run is not None else (name or "?")
        links.append(ObservedLink(ObservedEnd(node, ifname, f"{node} {ifname}", "", False, 1),
                                  ObservedEnd(switch or "?", port_text, switch, "", True, port_number),
                                  number, "", source))
    if not links:
        raise InputError(f"{source}: no LLDP neighbour on any interface",
                         hint="run 'lldpctl -f json0' once lldpd has heard the switches; a node without neighbours "
                              "cannot be checked")
    return ObservedFabric(links, "lldp")
