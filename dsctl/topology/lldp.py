"""RoCE planes: a node's LLDP neighbours (``lldpctl -f json``, lldpd 1.x) as observed NIC-to-leaf cables.

lldpd's JSON (shape as in lldpd's own integration tests, ``tests/integration/test_lldpcli.py``)::

    {"lldp": {"interface": {"eth0": {"via": "LLDP", "chassis": {"p3-leaf04": {"id": {...}, "descr": "..."}},
                                     "port": {"id": {"type": "ifname", "value": "swp17"}, "descr": "swp17"}}}}}

``interface`` is an object keyed by the local interface, or (several interfaces, some versions) a list of
one-key objects; ``chassis`` is keyed by the neighbour's system name (or holds ``id`` only when it sends none).
The file comes from one node and does not name it: the node is the file name's stem (``node0001.json``, as
the fleet runner saves per-node output). The local interface must be a NIC name of the plan (plan RoCE NICs
by their netdev names, ``--nic-name``); the switch port is the last number of the neighbour's port id (else
its description): ``swp17``, ``Eth1/17`` and ``17`` are port 17. (SONiC's ``Ethernet68`` numbers lanes, not
face-plate ports: map it first.)
"""

from __future__ import annotations

from typing import Any

from dsctl.errors import InputError
from dsctl.names import bounded_int, last_digit_run, shown
from dsctl.textjson import load_json
from dsctl.topology.observed import ObservedEnd, ObservedFabric, ObservedLink

#: digits of a switch port number (a face-plate port; SONiC's lane numbers stay below 1,000)
PORT_DIGITS = 9


def looks_like_lldp(text: str) -> bool:
    """True if the text is a JSON object whose first key is ``lldp`` (what ``lldpctl -f json`` prints)."""
    head = text.lstrip()[:200]
    return head.startswith("{") and '"lldp"' in head


def node_of(source: str) -> str:
    """The node an LLDP file describes: its file name without folders and extensions."""
    return source.replace("\\", "/").rsplit("/", 1)[-1].split(".", 1)[0]


def _items(value: Any) -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, list):
        return [item for entry in value if isinstance(entry, dict) for item in entry.items()]
    return []


def _text(value: Any) -> str:
    if isinstance(value, dict):
        value = value.get("value", "")
    if isinstance(value, list) and value:
        return _text(value[0])
    return value if isinstance(value, str) else ""


def parse_lldp(text: str, source: str = "LLDP") -> ObservedFabric:
    """Every neighbour of one node's ``lldpctl -f json`` output as a link (node, interface) <-> (switch, port).

    InputError if it is not lldpctl JSON; a neighbour without a system name or port number is kept with the
    raw chassis id / port text so that ``verify`` reports it as ``unmatched_device``.
    """
    doc = load_json(text, source)
    if not isinstance(doc, dict) or not isinstance(doc.get("lldp"), (dict, list)):
        raise InputError(f"{source} is not 'lldpctl -f json' output (no \"lldp\" object)")
    node = node_of(source)
    lldp = doc["lldp"]
    interfaces = lldp.get("interface") if isinstance(lldp, dict) else None
    links: list[ObservedLink] = []
    for number, (ifname, detail) in enumerate(_items(interfaces), 1):
        if not isinstance(detail, dict):
            continue
        chassis = detail.get("chassis")
        names = [k for k, v in _items(chassis) if isinstance(v, dict) and k not in ("id", "descr")]
        switch = names[0] if names else (_text(chassis.get("id")) if isinstance(chassis, dict) else "")
        raw_port = detail.get("port")
        port: dict[str, Any] = raw_port if isinstance(raw_port, dict) else {}
        label = _text(port.get("id")) or _text(port.get("descr"))
        descr = _text(port.get("descr"))
        run, text = last_digit_run(label), label
        if run is None:
            run, text = last_digit_run(descr), descr
        port_number = 0
        if run is not None:
            port_number = bounded_int(text[run[0]:run[1]], f"{source}: interface {shown(ifname)} neighbour port "
                                      f"{shown(text)}", PORT_DIGITS)
        port_text = str(port_number) if run is not None else (label or "?")
        links.append(ObservedLink(ObservedEnd(node, ifname, f"{node} {ifname}", "", False, 1),
                                  ObservedEnd(switch or "?", port_text, switch, "", True, port_number),
                                  number, "", source))
    return ObservedFabric(links, "lldp")
