"""The expected fabric of each plane as ``ibnetdiscover`` prints it and as ibdiagnet's topology file, rendered
column-wise (:mod:`dsctl.topology.textcols`) and yielded a piece at a time, so that ft3 at 524,288 endpoints
(3.1M port lines) costs seconds and one piece of memory.

The bytes are those of :func:`dsctl.topology.observed.render_ibnetdiscover` and
:func:`dsctl.topology.ibdmtopo.render_topology_file` on the plane's cables (tests/unit/test_topology_plan_files.py
holds them to main's output by sha256); a plane those writers would print differently from these rules (a port or
NIC cabled twice, a node above a cable) is handed to them instead.

GUIDs are synthetic and unique across planes: switch ``0xb83fd20300000000 + device + 1``, a node's NIC
``0x0002c90300000000 + device * NICs per node + NIC + 1``. LIDs number the plane's NICs by their description
("<node> <nic>") and then its switches by name, from 1, as ibnetdiscover's writer sorts them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np

from dsctl.topology import ibdmtopo
from dsctl.topology.observed import render_ibnetdiscover
from dsctl.topology.plan import Plan
from dsctl.topology.textcols import ROWS_PER_PIECE, bucket_order, column, decimal, encoded, hex16, lines

SWITCH_GUID_BASE = 0xB83FD20300000000
HOST_GUID_BASE = 0x0002C90300000000
#: marks the first line of a section in a piece, so the piece splits into sections without counting bytes
_MARK = b"\x01"


class _Plane:
    """One plane's cables: a (lower) and b (upper) ends as device indices int64 [C]; at a node end the port is
    the NIC index."""

    def __init__(self, plan: Plan, plane: int) -> None:
        cab = np.flatnonzero(plan.cable_plane == plane)
        self.plan, self.plane = plan, plane
        self.a, self.a_port = plan.a_dev[cab].astype(np.int64), plan.a_port[cab].astype(np.int64)
        self.b, self.b_port = plan.b_dev[cab].astype(np.int64), plan.b_port[cab].astype(np.int64)
        self.a_node = plan.device_tier[self.a] == 0
        self.num_nics = len(plan.nic_names)

    def odd_ends(self) -> bool:
        """A node at a cable's upper end or a switch of another plane (handed to the per-link writers)."""
        tier, plane = self.plan.device_tier, self.plan.device_plane
        up = ~self.a_node
        return bool(np.any(tier[self.b] == 0) or np.any(plane[self.b] != self.plane)
                    or np.any(plane[self.a[up]] != self.plane))

    def switch_ends(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every cable end at a switch: (device, port, cable), b ends first, then the a ends of switch cables."""
        up = np.flatnonzero(~self.a_node)
        return (np.concatenate([self.b, self.a[up]]), np.concatenate([self.b_port, self.a_port[up]]),
                np.concatenate([np.arange(len(self.b)), up]))

    def links(self) -> list[tuple[str, str, str, str]]:
        names, nics = self.plan.device_names, self.plan.nic_names
        return [(names[a], nics[ap] if node else str(ap), names[b], str(bp)) for a, ap, b, bp, node in
                zip(self.a.tolist(), self.a_port.tolist(), self.b.tolist(), self.b_port.tolist(),
                    self.a_node.tolist(), strict=True)]


class Names:
    """Per-plan name tables: device and NIC names as bytes, and their ranks in sorted order (bytes order is
    Python's string order here: names are ASCII, ``dsctl.names.DEVICE``)."""

    def __init__(self, plan: Plan) -> None:
        self.devices = encoded(plan.device_names)
        self.nics = encoded(plan.nic_names)
        self.device_rank = np.empty(len(self.devices), dtype=np.int64)
        self.device_rank[np.argsort(self.devices, kind="stable")] = np.arange(len(self.devices))
        self.nic_rank = np.empty(len(self.nics), dtype=np.int64)
        self.nic_rank[np.argsort(self.nics, kind="stable")] = np.arange(len(self.nics))


def expected_ibnetdiscover_pieces(plan: Plan, plane: int, link: str, names: Names | None = None) -> Iterator[bytes]:
    """``expected-plane<plane>.ibnet`` a piece at a time (every link at ``link``, e.g. ``4xNDR``)."""
    p = _Plane(plan, plane)
    names = names or Names(plan)
    num_devices = len(plan.device_names)
    ports = plan.device_ports.astype(np.int64)
    # entities: the plane's NICs (by description), then its switches (by name); LID = position + 1
    host_cab = np.flatnonzero(p.a_node)
    host_order = bucket_order(names.device_rank[p.a[host_cab]] * p.num_nics + names.nic_rank[p.a_port[host_cab]],
                              num_devices * p.num_nics)
    e_dev, e_port, e_cable = p.switch_ends()
    present = np.zeros(num_devices, dtype=bool)
    present[e_dev] = True
    switch_dev = np.flatnonzero(present)
    switch_dev = switch_dev[np.argsort(names.device_rank[switch_dev], kind="stable")]
    n_host = len(host_cab)
    entity_of_switch = np.full(num_devices, -1, dtype=np.int64)
    entity_of_switch[switch_dev] = n_host + np.arange(len(switch_dev))
    e_owner = entity_of_switch[e_dev]
    span = int(e_port.max(initial=0)) + 1
    e_order = bucket_order((e_owner - n_host) * span + e_port, len(switch_dev) * span)
    if host_order is None or e_order is None or p.odd_ends():
        yield _old_ibnetdiscover(plan, p, link).encode()
        return
    host_cab = host_cab[host_order]
    host_dev, host_nic = p.a[host_cab], p.a_port[host_cab]
    entity_of_cable = np.full(len(p.a), -1, dtype=np.int64)  # the NIC entity at a node cable's a end
    entity_of_cable[host_cab] = np.arange(n_host)
    guid = np.concatenate([np.uint64(HOST_GUID_BASE) + (host_dev * p.num_nics + host_nic + 1).astype(np.uint64),
                           np.uint64(SWITCH_GUID_BASE) + (switch_dev + 1).astype(np.uint64)])
    full, short = hex16(guid), hex16(guid, strip_zeros=True)
    kind = np.concatenate([np.full((n_host, 2), np.frombuffer(b"H-", np.uint8)),
                           np.full((len(switch_dev), 2), np.frombuffer(b"S-", np.uint8))])
    desc = column(np.concatenate([np.strings.add(np.strings.add(names.devices[host_dev], b" "),
                                                 names.nics[host_nic]), names.devices[switch_dev]]))
    lid = decimal(np.arange(1, n_host + len(switch_dev) + 1))
    first = full[0].tobytes() if len(guid) else b"0" * 16
    yield (b"#\n# Topology file: generated by dsctl (synthetic ibnetdiscover format)\n#\n# Initiated from node "
           + first + b"\n")
    rate = link or "4xNDR"
    # switch sections: every cable end at a switch, by (switch, port); the peer is the cable's other end
    owner, e_port, cab = e_owner[e_order], e_port[e_order], e_cable[e_order]
    at_b = e_order < len(p.b)
    to_nic = at_b & p.a_node[cab]
    peer = np.where(at_b, entity_of_switch[p.a[cab]], entity_of_switch[p.b[cab]])
    peer[to_nic] = entity_of_cable[cab[to_nic]]
    peer_port = np.where(at_b, np.where(to_nic, 1, p.a_port[cab]), p.b_port[cab])
    starts = np.searchsorted(owner, n_host + np.arange(len(switch_dev) + 1))
    portguid = np.zeros((len(guid), 18), dtype=np.uint8)  # "(<port guid>)" after a NIC peer
    portguid[:n_host, 0] = ord("(")
    portguid[:n_host, 1:17] = short[:n_host]
    portguid[:n_host, 17] = ord(")")
    # what a port line says of its peer, rendered once per entity: '"<guid>"' and ']<(port guid)>\t\t# ... lid N'
    peer_guid = _stack(kind, full)
    peer_tail = _stack(portguid, '\t\t# "', desc, '" lid ', lid, f" {rate}\n")
    step = max(1, ROWS_PER_PIECE // span)
    for lo in range(0, len(switch_dev), step):
        hi = min(lo + step, len(switch_dev))
        rows = slice(starts[lo], starts[hi])
        mark = np.zeros((rows.stop - rows.start, 1), dtype=np.uint8)
        mark[starts[lo:hi] - starts[lo], 0] = 1
        who = peer[rows]
        body = lines(mark, "[", decimal(e_port[rows]), ']\t"', peer_guid[who], '"[', decimal(peer_port[rows]), "]",
                     peer_tail[who])
        ent = n_host + np.arange(lo, hi)
        heads = lines("\nvendid=0x2c9\ndevid=0xd2f0\nsysimgguid=0x", short[ent], "\nswitchguid=0x", short[ent],
                      "(", short[ent], ")\nSwitch\t", decimal(ports[switch_dev[lo:hi]]), ' "S-', full[ent],
                      '"\t\t# "', desc[ent], '" enhanced port 0 lid ', lid[ent], " lmc 0\n", _MARK_TEXT)
        yield _interleave(heads, body)
    # NIC sections: one port each, cabled to its leaf
    for lo in range(0, n_host, ROWS_PER_PIECE):
        ent = np.arange(lo, min(lo + ROWS_PER_PIECE, n_host))
        cab = host_cab[ent]
        leaf = entity_of_switch[p.b[cab]]
        yield lines("\nvendid=0x2c9\ndevid=0x1021\nsysimgguid=0x", short[ent], "\ncaguid=0x", short[ent],
                    '\nCa\t1 "H-', full[ent], '"\t\t# "', desc[ent], '"\n[1](', short[ent], ') \t"S-', full[leaf],
                    '"[', decimal(p.b_port[cab]), "]\t\t# lid ", lid[ent], ' lmc 0 "', desc[leaf], '" lid ',
                    lid[leaf], f" {rate}\n")

_MARK_TEXT = _MARK.decode()


def _stack(*columns: np.ndarray | str) -> np.ndarray:
    """The columns side by side in one NUL-padded matrix (rows keep their padding: a column for :func:`lines`)."""
    rows = next(len(c) for c in columns if not isinstance(c, str))
    parts = [np.broadcast_to(np.frombuffer(c.encode(), np.uint8), (rows, len(c))) if isinstance(c, str) else c
             for c in columns]
    return np.concatenate(parts, axis=1)


def _interleave(heads: bytes, body: bytes) -> bytes:
    """Each section's head (ending in the mark) followed by its lines (the first starting with the mark)."""
    head_parts = heads.split(_MARK)[:-1]
    body_parts = body.split(_MARK)[1:]
    return b"".join(x for pair in zip(head_parts, body_parts, strict=True) for x in pair)


def _old_ibnetdiscover(plan: Plan, p: _Plane, link: str) -> str:
    names = plan.device_names
    num_nics = p.num_nics
    guids = {names[i]: f"{SWITCH_GUID_BASE + i + 1:016x}" for i in np.flatnonzero(plan.device_tier > 0).tolist()}
    for a, ap in zip(p.a[p.a_node].tolist(), p.a_port[p.a_node].tolist(), strict=True):
        guids[f"{names[a]} {plan.nic_names[ap]}"] = f"{HOST_GUID_BASE + a * num_nics + ap + 1:016x}"
    ports = plan.device_ports.tolist()
    radix = {names[i]: ports[i] for i in np.flatnonzero((plan.device_tier > 0) & (plan.device_plane == p.plane))
             .tolist()}
    return render_ibnetdiscover(p.links(), radix, guids=guids, default_rate=link)


def topology_file_pieces(plan: Plan, plane: int, link: str, host_type: str, header: Sequence[str],
                         names: Names | None = None) -> Iterator[bytes]:
    """``expected-plane<plane>.topo`` (ibdiagnet's topology file, see :mod:`dsctl.topology.ibdmtopo`) a piece at a
    time: sections of the plane's switches in device order, then of its nodes as first cabled; ``header`` lines
    (at least one) become ``#`` comments."""
    p = _Plane(plan, plane)
    switch_ports = plan.device_ports.astype(np.int64)
    names = names or Names(plan)
    num_devices, n = len(plan.device_names), len(p.a)
    # each cable listed from both ends (a ends first); sections: switches in device order, nodes by first cable
    dev = np.concatenate([p.a, p.b])
    cabled = np.zeros(num_devices, dtype=bool)
    cabled[dev[plan.device_tier[dev] > 0]] = True
    switches = np.flatnonzero(cabled)
    first = np.full(num_devices, n, dtype=np.int64)
    node_cab = np.flatnonzero(p.a_node)
    np.minimum.at(first, p.a[node_cab], node_cab)
    nodes = np.flatnonzero(first < n)
    nodes = nodes[np.argsort(first[nodes], kind="stable")]
    section_of = np.full(num_devices, -1, dtype=np.int64)
    section_of[switches] = np.arange(len(switches))
    section_of[nodes] = len(switches) + np.arange(len(nodes))
    key = np.concatenate([np.where(p.a_node, names.nic_rank[np.where(p.a_node, p.a_port, 0)], p.a_port), p.b_port])
    span = int(key.max(initial=0)) + 1
    order = bucket_order(section_of[dev] * span + key, (len(switches) + len(nodes)) * span)
    if order is None or p.odd_ends() or not header:
        plane_switches = np.flatnonzero((plan.device_tier > 0) & (plan.device_plane == plane)).tolist()
        radix = {plan.device_names[i]: int(switch_ports[i]) for i in plane_switches}
        yield ibdmtopo.render_topology_file(p.links(), radix, host_type, link, header).encode()
        return
    arrow = ibdmtopo.arrow(link)
    yield "".join(f"# {line}\n" for line in header).encode()
    end_a = order < n  # the line is written from the cable's a end
    cable = np.where(end_a, order, order - n)
    sec = section_of[dev[order]]
    starts = np.flatnonzero(np.r_[True, sec[1:] != sec[:-1]]) if len(sec) else np.zeros(0, dtype=np.int64)
    sec_dev = dev[order[starts]]
    a_text = _port_text(p.a_port, p.a_node, names.nics)
    b_text = _port_text(p.b_port, np.zeros(n, dtype=bool), names.nics)
    a_text, b_text = _pad(a_text, b_text.shape[1]), _pad(b_text, a_text.shape[1])
    type_of = _types(plan, host_type)
    a_type = np.where(p.a_node, len(type_of) - 1, _type_index(switch_ports[p.a], type_of))
    b_type = _type_index(switch_ports[p.b], type_of)
    type_col = column(encoded(type_of))
    step = ROWS_PER_PIECE
    bounds = [*range(0, len(starts), max(1, step // 64)), len(starts)]
    for s_lo, s_hi in itertools.pairwise(bounds):
        rows = slice(starts[s_lo], starts[s_hi] if s_hi < len(starts) else len(order))
        mark = np.zeros((rows.stop - rows.start, 1), dtype=np.uint8)
        mark[starts[s_lo:s_hi] - starts[s_lo], 0] = 1
        ea, c = end_a[rows], cable[rows]
        own = np.where(ea[:, None], a_text[c], b_text[c])
        peer_dev = np.where(ea, p.b[c], p.a[c])
        peer_port = np.where(ea[:, None], b_text[c], a_text[c])
        peer_type = np.where(ea, b_type[c], a_type[c])
        body = lines(mark, "    ", own, f" {arrow} ", type_col[peer_type], " ", column(names.devices[peer_dev]),
                     " ", peer_port, "\n")
        d = sec_dev[s_lo:s_hi]
        sec_type = np.where(plan.device_tier[d] > 0, _type_index(switch_ports[d], type_of), len(type_of) - 1)
        heads = lines("\n", type_col[sec_type], " ", column(names.devices[d]), "\n", _MARK_TEXT)
        yield _interleave(heads, body)


def _pad(text: np.ndarray, width: int) -> np.ndarray:
    """``text`` (N, w) NUL-padded on the right to at least ``width`` columns."""
    if text.shape[1] >= width:
        return text
    return np.concatenate([text, np.zeros((len(text), width - text.shape[1]), dtype=np.uint8)], axis=1)


def _types(plan: Plan, host_type: str) -> list[str]:
    """``DSCTL_SW<ports>`` of every port count in the plan, then ``host_type`` (last)."""
    counts = sorted(set(plan.device_ports[plan.device_tier > 0].tolist()))
    return [*(ibdmtopo.switch_type(c) for c in counts), host_type]


def _type_index(ports: np.ndarray, types: list[str]) -> np.ndarray:
    counts = np.array([int(t.removeprefix(ibdmtopo.SWITCH_TYPE)) for t in types[:-1]], dtype=np.int64)
    return np.searchsorted(counts, ports)


def _port_text(port: np.ndarray, is_nic: np.ndarray, nics: np.ndarray) -> np.ndarray:
    """A port as the topology file names it: ``P<n>`` on a switch, ``<nic>/P1`` on a node; shape (N, w)."""
    numbers = decimal(port)
    nic = column(nics[np.where(is_nic, port, 0)]) if len(nics) else np.zeros((len(port), 0), np.uint8)
    width = 1 + numbers.shape[1] + nic.shape[1] + 3
    out = np.zeros((len(port), width), dtype=np.uint8)
    sw = ~is_nic
    out[sw, 0] = ord("P")
    out[sw, 1:1 + numbers.shape[1]] = numbers[sw]
    out[is_nic, 1 + numbers.shape[1]:width - 3] = nic[is_nic]
    out[is_nic, width - 3:] = np.frombuffer(b"/P1", np.uint8)
    return out
