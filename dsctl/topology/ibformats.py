"""infiniband-diags text formats beside the default ibnetdiscover output: the ports report and node-name maps.

``ibnetdiscover -p`` (ports report) prints one line per port end; a connected port::

    CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( 'o0001 HCA-1' - 'ib-i1l1s01' )

(type, LID, port, port GUID, width, speed, then the same for the peer, then both NodeDescriptions); an
unconnected port has no peer: ``SW  2052 37 0x506b4b03005c2740 4x ???   'ib-i4l1s01'`` (rdma-core quotes the
description; older infiniband-diags print it bare: ``SW   479 22 0x0002c9020040f161 4x QDR   Infiniscale-IV
Mellanox Technologies``) and is skipped, so a report of unconnected ports only holds no links. The GUID printed
is the port GUID (a CA's differs from its node GUID; a switch's is its node GUID).

A node-name map (``--node-name-map`` of infiniband-diags and opensm's ``node_name_map``) is one node per line,
``<guid> "<name>"`` (GUID with or without ``0x``; the name quoted, or one unquoted word); ``#`` starts a
comment. The name replaces the device's NodeDescription. ``dsctl topology verify --record-guids`` writes one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from dsctl.errors import InputError
from dsctl.topology.observed import ObservedFabric, ObservedLink, make_end

#: a connected port up to the descriptions' opening quote; the descriptions are split by :func:`_ports_line`
_PORTS_HEAD = re.compile(
    r"^(CA|SW|RT)\s+(\d{1,5})\s+(\d{1,3})\s+0x([0-9a-fA-F]{1,16})\s+(\d{1,2}x)\s+(\S+)\s+-\s+"
    r"(CA|SW|RT)\s+(\d{1,5})\s+(\d{1,3})\s+0x([0-9a-fA-F]{1,16})\s+\(\s*'")
#: where ``' - '`` (the separator of the two descriptions) starts: a lookahead, so that overlapping ones are found
_DESC_SEPARATOR = re.compile(r"(?='\s+-\s+')")
_SEPARATOR_AT = re.compile(r"'\s+-\s+'")
#: an unconnected port: no peer, then the description quoted (rdma-core) or bare (older infiniband-diags), never
#: starting with the ``-`` that opens a peer (a connected line that failed to parse is not taken for one)
_PORTS_OPEN = re.compile(r"^(CA|SW|RT)\s+(\d{1,5})\s+(\d{1,3})\s+0x([0-9a-fA-F]{1,16})\s+(\S{1,8})\s+(\S{1,16})"
                         r"(?:\s+([^\s-].*))?$")
_MAP_LINE = re.compile(r'^(?:0x)?([0-9a-fA-F]{1,16})\s+(?:"([^"]*)"|(\S+))\s*(?:#.*)?$')


def _ports_line(line: str) -> tuple[str, ...] | None:
    """The 12 fields of a connected ``ibnetdiscover -p`` line (the 10 of both ends, then both descriptions), else
    None. The descriptions split at the LAST ``' - '`` as the greedy regex ``'(.*)'\\s+-\\s+'(.*)'\\s*\\)`` did,
    but by one scan: that regex backtracked quadratically on a line of many ``' - '`` (6 s for 40 KB)."""
    head = _PORTS_HEAD.match(line)
    if head is None:
        return None
    tail = line[head.end():].rstrip()
    if not tail.endswith(")"):
        return None
    tail = tail[:-1].rstrip()
    if not tail.endswith("'"):
        return None
    inner = tail[:-1]
    cut = -1
    for found in _DESC_SEPARATOR.finditer(inner):
        cut = found.start()
    if cut < 0:
        return None
    sep = _SEPARATOR_AT.match(inner, cut)  # the lookahead matched here
    return (*head.groups(), inner[:cut], inner[sep.end():]) if sep else None


def is_ports_report(text: str) -> bool:
    """True if the first non-blank line is an ``ibnetdiscover -p`` line."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped:
            return bool(_ports_line(stripped) or _PORTS_OPEN.match(stripped))
    return False


def guid16(text: str) -> str:
    """A GUID as 16 lower-case hex digits (the form used in ``H-<guid>``/``S-<guid>``)."""
    return text.lower().removeprefix("0x").rjust(16, "0")


def parse_ports_report(text: str, source: str = "OBSERVED") -> ObservedFabric:
    """Parse ``ibnetdiscover -p``. Each link is printed from both ends and counted once; InputError names a bad line."""
    links: list[ObservedLink] = []
    seen: set[tuple[tuple[str, int], tuple[str, int]]] = set()
    lids: dict[int, tuple[str, bool]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or _PORTS_OPEN.match(stripped):
            continue
        g = _ports_line(stripped)
        if g is None:
            raise InputError(f"{source} line {number} is not an 'ibnetdiscover -p' line: {stripped[:80]!r}",
                             hint="expected 'CA|SW <lid> <port> 0x<guid> <width> <speed> - CA|SW <lid> <port> "
                                  "0x<guid> ( '<desc>' - '<peer desc>' )'")
        a_switch, b_switch = g[0] == "SW", g[6] == "SW"
        a_guid, b_guid = guid16(g[3]), guid16(g[9])
        a_port, b_port, a_lid, b_lid = int(g[2]), int(g[8]), int(g[1]), int(g[7])
        lids[a_lid] = (a_guid, a_switch)
        lids[b_lid] = (b_guid, b_switch)
        a_key, b_key = (a_guid, a_port), (b_guid, b_port)
        key = (a_key, b_key) if a_key <= b_key else (b_key, a_key)
        if key in seen:
            continue
        seen.add(key)
        speed = g[5]
        links.append(ObservedLink(make_end(a_switch, a_guid, g[10], a_port, a_lid),
                                  make_end(b_switch, b_guid, g[11], b_port, b_lid), number,
                                  g[4] + ("" if speed == "???" else speed), source))
    return ObservedFabric(links, "ibnetdiscover-p", {}, lids)


def parse_node_name_map(text: str, source: str = "--node-name-map") -> dict[str, str]:
    """GUID (16 lower-case hex digits) -> name. InputError names a malformed line or a GUID given twice."""
    names: dict[str, str] = {}
    where: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        found = _MAP_LINE.match(stripped)
        if found is None or not (found.group(2) or found.group(3)):
            raise InputError(f"{source} line {number} is not '<guid> \"<name>\"': {stripped[:80]!r}",
                             hint="node-name-map lines read like: 0x0002c90300001234 \"node0001 mlx5_0\"")
        guid = guid16(found.group(1))
        if guid in names:
            raise InputError(f"{source} line {number}: GUID 0x{guid} is already named on line {where[guid]}")
        names[guid] = found.group(2) if found.group(2) is not None else found.group(3)
        where[guid] = number
    return names


def render_node_name_map(names: Mapping[str, str], title: str = "") -> str:
    """A node-name map file (sorted by name), readable by opensm, ibnetdiscover and ``verify --guids``."""
    out = ["# node-name-map written by dsctl topology verify --record-guids"]
    if title:
        out.append(f"# {title}")
    for guid, name in sorted(names.items(), key=lambda item: (item[1], item[0])):
        out.append(f'0x{guid} "{name}"')
    return "\n".join(out) + "\n"
