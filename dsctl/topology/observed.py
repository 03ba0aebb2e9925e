"""What was actually cabled: parsers for ibnetdiscover output and links CSV, and a writer for the former.

All functions take and return text; the command layer reads the files.

ibnetdiscover (infiniband-diags / rdma-core) prints one block per node::

    vendid=0x2c9
    switchguid=0x...(...)
    Switch  64 "S-<guid>"   # "<NodeDescription>" enhanced port 0 lid 3 lmc 0
    [1]     "H-<guid>"[1](<portguid>)   # "<peer NodeDescription>" lid 5 4xNDR
    [33]    "S-<guid>"[1]               # "<peer NodeDescription>" lid 9 4xNDR

    caguid=0x...
    Ca      1 "H-<guid>"    # "node0001 mlx5_0"
    [1](<portguid>)  "S-<guid>"[1]   # lid 5 lmc 0 "<peer NodeDescription>" lid 3 4xNDR

Devices are named by NodeDescription. A CA's description is "<hostname> <ibdev>" (the Linux default), so
its end is device <hostname>, port <ibdev> (``<ibdev>/<n>`` for HCA port n > 1). A switch's end is its
description and the port number. Each link appears twice (once from each end) and is counted once.

Two kinds of CA are not named from their description:

- an HCA still carrying the firmware's default description (``MT4129 ConnectX7   Mellanox Technologies``: no
  host set one) is device ``H-<guid>``, port ``<n>``, with ``default_desc`` set; ``verify`` places it by the leaf
  port it sits on, as ``ibdiagnet -t`` does;
- a switch-internal CA (``internal``): the SHARP aggregation node on the last port of a Quantum switch
  (``Mellanox Technologies Aggregation Node``), or any CA in the same system (``sysimgguid``) as a switch, e.g.
  a managed switch's management HCA. Their links are not cables.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from dsctl.errors import InputError
from dsctl.names import shown
from dsctl.progress_count import Report, each

REPORT_EVERY_LINES = 8192  # progress granularity of parse_ibnetdiscover


@dataclass(frozen=True)
class ObservedEnd:
    """One end of an observed cable: ``device`` name, ``port`` label, raw ``desc`` and ``guid`` if known.

    ``is_switch`` is True/False from ibnetdiscover, None from a CSV (decided by the plan).
    """

    device: str
    port: str
    desc: str = ""
    guid: str = ""
    is_switch: bool | None = None
    port_num: int = 0
    lid: int = 0
    #: the HCA's description is the firmware default (no host name in it)
    default_desc: bool = False
    #: a CA inside a switch (SHARP aggregation node, management port): its link is no cable
    internal: bool = False
    #: named by ``verify`` from the planned NIC at the leaf port it sits on (default description)
    by_position: bool = False


@dataclass(frozen=True)
class ObservedLink:
    """A cable seen in the fabric, with the 1-based line of the file it was read from.

    ``rate`` is the trained width and speed as ibnetdiscover prints it (``4xNDR``; ``""`` where unknown, as in
    a links CSV); ``source`` names the dump the cable was read from.
    """

    a: ObservedEnd
    b: ObservedEnd
    line: int
    rate: str = ""
    source: str = ""


@dataclass(frozen=True)
class ObservedFabric:
    """Every cable of an observed fabric; ``source_format`` is ``ibnetdiscover``, ``ibnetdiscover-p`` or ``csv``.

    ``duplicate_guids``: node GUIDs (16 hex digits) seen on two devices, with the descriptions seen.
    ``lids``: LID -> (GUID, is_switch) for every port whose LID the dump prints (perfquery names ports by LID).
    """

    links: list[ObservedLink]
    source_format: str
    duplicate_guids: dict[str, list[str]] = field(default_factory=dict)
    lids: dict[int, tuple[str, bool]] = field(default_factory=dict)


_HEADER = re.compile(r'^(Switch|Ca|Rt)\s+(\d{1,9})\s+"([SHR])-([0-9a-fA-F]+)"\s*(?:#\s*"(.*?)"(.*))?$')
_PORT = re.compile(
    r'^\[(\d{1,9})\](?:\(([0-9a-fA-F]+)\))?(?:\[ext \d+\])?\s+"([SHR])-([0-9a-fA-F]+)"\[(\d{1,9})\](?:\[ext \d+\])?'
    r'\s*(?:\(([0-9a-fA-F]+)\))?\s*(?:#(.*))?$')
_KEYVAL = re.compile(r"^(vendid|devid|sysimgguid|switchguid|caguid|rtguid)=\S*", re.IGNORECASE)
_SYSIMG = re.compile(r"^sysimgguid=0x([0-9a-fA-F]{1,16})\s*$", re.IGNORECASE)
_QUOTED = re.compile(r'"(.*?)"')
_PLAIN = ("Non-Chassis Nodes", "Chassis ", "Hostname:")


#: most characters of a NodeDescription looked at (the field holds 64 bytes; a longer text is not one)
MAX_DESC_CHARS = 256
_DEFAULT_MODEL = re.compile(r"MT\d{1,6}")
_VENDOR_WORDS = ("Mellanox", "NVIDIA", "ConnectX", "BlueField")
_AGGREGATION = "Aggregation Node"


def is_default_desc(desc: str) -> bool:
    """True for the description an HCA's firmware gives before a host sets one: ``MT<model> <product> ...
    Technologies`` (``MT4129 ConnectX7   Mellanox Technologies``): it names no host, so no device of a plan."""
    tokens = desc[:MAX_DESC_CHARS].split()
    return (len(tokens) >= 2 and bool(_DEFAULT_MODEL.fullmatch(tokens[0]))
            and any(word in tokens for word in _VENDOR_WORDS))


def is_aggregation_node(desc: str) -> bool:
    """True for a SHARP aggregation node's description (``Mellanox Technologies Aggregation Node``)."""
    return _AGGREGATION in " ".join(desc[:MAX_DESC_CHARS].split())


def make_end(is_switch: bool, guid: str, desc: str, port: int, lid: int = 0, *,
             internal: bool = False) -> ObservedEnd:
    """An end named from its description: a switch by the whole description, a CA "<host> <ibdev>"; a CA with
    the default description as ``H-<guid>`` port ``<n>`` (its description is never split into the two)."""
    if is_switch:
        return ObservedEnd(desc or f"S-{guid}", str(port), desc, guid, True, port, lid)
    if internal or is_aggregation_node(desc):
        return ObservedEnd(f"H-{guid}", str(port), desc, guid, False, port, lid, internal=True)
    if is_default_desc(desc):
        return ObservedEnd(f"H-{guid}", str(port), desc, guid, False, port, lid, default_desc=True)
    tokens = desc.split()
    device = tokens[0] if tokens else f"H-{guid}"
    ibdev = tokens[1] if len(tokens) > 1 else "port"
    label = ibdev if port == 1 else f"{ibdev}/{port}"
    return ObservedEnd(device, label, desc, guid, False, port, lid)


def _end(node_type: str, guid: str, desc: str, port: int, lid: int = 0, internal: bool = False) -> ObservedEnd:
    return make_end(node_type == "S", guid, desc, port, lid, internal=internal)


def rename(fabric: ObservedFabric, names: Mapping[str, str]) -> ObservedFabric:
    """The fabric with each end whose GUID is in ``names`` (16 lower-case hex digits -> name) renamed.

    A name map replaces the NodeDescription, as ``--node-name-map`` does in infiniband-diags. A GUID that two
    devices of this fabric share names neither (each keeps the description printed on its line).
    """
    if not names:
        return fabric

    def one(end: ObservedEnd) -> ObservedEnd:
        name = names.get(end.guid)
        if name is None or name == end.desc or end.is_switch is None or end.guid in fabric.duplicate_guids:
            return end
        return make_end(end.is_switch, end.guid, name, end.port_num, end.lid, internal=end.internal)

    links = []
    for link in fabric.links:
        a, b = one(link.a), one(link.b)
        links.append(link if a is link.a and b is link.b else replace(link, a=a, b=b))
    return replace(fabric, links=links)


_RATE = re.compile(r"\b(\d{1,2}x)([A-Z][A-Z0-9]*|\?\?\?)\s*$")
_LID = re.compile(r"\blid\s+(\d{1,5})\b")


def _rate(comment: str) -> str:
    found = _RATE.search(comment)
    return found.group(1) + found.group(2) if found else ""


_COMMENT = re.compile(r'^\s*(?:lid (\d{1,5}) lmc \d+\s+)?"([^"]*)"\s+lid (\d{1,5})\s+'  # LIDs: 16 bits, 5 digits
                      r'(\d{1,2}x)([A-Z][A-Z0-9]*|\?\?\?)\s*$')
_Raw = tuple[int, str, str, str, int, str, str, int, str, str, int, int]


def _port_entry(number: int, current: tuple[str, str, str, int], port: re.Match[str],
                lids: dict[int, tuple[str, bool]]) -> _Raw:
    """One ``[port]`` line: (line, my type, my GUID, my desc, my port, peer type, peer GUID, peer port,
    peer desc, rate, my LID, peer LID); records the LIDs it shows in ``lids``."""
    comment = port.group(7) or ""
    fast = _COMMENT.match(comment)
    if fast:  # the usual shape: one regex for description, LIDs and rate
        lid_list = [int(x) for x in (fast.group(1), fast.group(3)) if x]
        peer_desc, rate = fast.group(2), fast.group(4) + fast.group(5)
    else:
        quoted = _QUOTED.search(comment)
        lid_list = [int(x) for x in _LID.findall(comment)]
        peer_desc, rate = (quoted.group(1) if quoted else ""), _rate(comment)
    my_lid, peer_lid = current[3], 0
    peer_type, peer_guid = port.group(3), port.group(4).lower()
    if current[0] != "S" and lid_list:
        my_lid = lid_list[0]
        lids[my_lid] = (current[1], False)
        peer_lid = lid_list[1] if len(lid_list) > 1 else 0
    elif lid_list:
        peer_lid = lid_list[-1]
        if peer_type != "S":
            lids[peer_lid] = (peer_guid, False)
    return (number, current[0], current[1], current[2], int(port.group(1)), peer_type, peer_guid,
            int(port.group(5)), peer_desc, rate, my_lid, peer_lid)


def parse_ibnetdiscover(text: str, source: str = "OBSERVED", report: Report | None = None) -> ObservedFabric:
    """Parse ibnetdiscover's default topology output. Raises InputError naming the line of a malformed entry.

    A node GUID printed in two ``Switch``/``Ca`` blocks, or one CA port reached from two different peer ports,
    is a duplicate GUID (``duplicate_guids``); the ends of such a device are named by the description printed
    on each line rather than by the (ambiguous) GUID. ``report(lines_read, lines)`` every ``REPORT_EVERY_LINES``.
    """
    # pass 1: node headers (descriptions by GUID) and raw port lines
    descs: dict[str, str] = {}
    num_ports: dict[str, int] = {}
    dup: dict[str, list[str]] = {}
    lids: dict[int, tuple[str, bool]] = {}
    raw: list[_Raw] = []
    images: dict[str, str] = {}  # node id -> system image GUID (a switch's CAs share its image)
    pending_image = ""
    current: tuple[str, str, str, int] | None = None
    lines = text.splitlines()
    tick = each(report, len(lines), every=REPORT_EVERY_LINES)
    for number, line in enumerate(lines, 1):
        tick(number)
        stripped = line.strip()
        port = _PORT.match(stripped) if stripped[:1] == "[" else None
        if port:
            if current is None:
                raise InputError(f"{source} line {number}: port line before any 'Switch' or 'Ca' line: "
                                 f"{stripped[:80]!r}")
            raw.append(_port_entry(number, current, port, lids))
            continue
        if not stripped or stripped.startswith("#") or stripped.startswith(_PLAIN):
            continue
        if _KEYVAL.match(stripped):
            image = _SYSIMG.match(stripped)
            if image:
                pending_image = image.group(1).lower().rjust(16, "0")
            continue
        header = _HEADER.match(stripped)
        if header:
            node_type = header.group(3)
            guid = header.group(4).lower()
            node_id = f"{node_type}-{guid}"
            desc = header.group(5) or ""
            if node_id in descs:
                dup.setdefault(guid, [descs[node_id]]).append(desc)
            descs[node_id] = desc
            if pending_image:
                images[node_id] = pending_image
                pending_image = ""
            num_ports[node_id] = int(header.group(2))
            lid_found = _LID.search(header.group(6) or "")
            lid = int(lid_found.group(1)) if lid_found else 0
            if lid and node_type == "S":
                lids[lid] = (guid, True)
            current = (node_type, guid, desc, lid)
            continue
        raise InputError(
            f"{source} line {number} is not ibnetdiscover output: {stripped[:80]!r}",
            hint="expected 'Switch N \"S-<guid>\" # \"desc\" ...', 'Ca N \"H-<guid>\" # \"desc\"', "
                 "'[port] \"S-<guid>\"[port] ...', an 'ibnetdiscover -p' ports report or a links CSV with "
                 "header a_device,a_port,b_device,b_port")
    if not descs:
        raise InputError(f"{source} has no 'Switch' or 'Ca' blocks; is it ibnetdiscover output?")
    switch_images = {image for node_id, image in images.items() if node_id[0] == "S"}
    internal = {node_id for node_id, image in images.items() if node_id[0] != "S" and image in switch_images}
    # a CA port reached from two different peer ports: two CAs share the GUID
    reached: dict[tuple[str, int], tuple[str, int]] = {}
    for _, my_type, my_guid, _, my_port, peer_type, peer_guid, peer_port, peer_desc, *_ in raw:
        if peer_type == "S":
            continue
        here, there = (f"{my_type}-{my_guid}", my_port), (f"{peer_type}-{peer_guid}", peer_port)
        before = reached.setdefault(there, here)
        if before != here and peer_guid not in dup:
            dup[peer_guid] = [descs.get(there[0], ""), peer_desc]
    links: list[ObservedLink] = []
    seen: set[tuple[tuple[str, int], tuple[str, int]]] = set()
    for number, my_type, my_guid, my_desc, my_port, peer_type, peer_guid, peer_port, peer_desc, rate, \
            my_lid, peer_lid in raw:
        a_key, b_key = (f"{my_type}-{my_guid}", my_port), (f"{peer_type}-{peer_guid}", peer_port)
        for node_id, port_no in (a_key, b_key):
            limit = num_ports.get(node_id)
            if limit is not None and not 1 <= port_no <= limit:
                who = shown(descs[node_id] or node_id)
                raise InputError(f"{source} line {number}: port {port_no} of {who} is outside 1..{limit} "
                                 f"(its 'Switch'/'Ca' line gives {limit} ports)")
        a_dup, b_dup = my_guid in dup, peer_guid in dup
        key = (a_key, b_key) if a_key <= b_key else (b_key, a_key)
        if not (a_dup or b_dup):
            if key in seen:
                continue
            seen.add(key)
        b_desc = peer_desc if b_dup or b_key[0] not in descs else descs[b_key[0]]
        a = _end(my_type, my_guid, my_desc, my_port, my_lid, a_key[0] in internal)
        b = _end(peer_type, peer_guid, b_desc, peer_port, peer_lid, b_key[0] in internal)
        links.append(ObservedLink(a, b, number, rate, source))
    if dup:
        links = _dedupe_named(links)
    return ObservedFabric(links, "ibnetdiscover", dup, lids)


def _dedupe_named(links: list[ObservedLink]) -> list[ObservedLink]:
    """Links of duplicated GUIDs are kept from both ends; count each (name, port) pair once."""
    out: list[ObservedLink] = []
    seen: set[tuple[tuple[str, str, str], tuple[str, str, str]]] = set()
    for link in links:
        a, b = (link.a.guid, link.a.device, link.a.port), (link.b.guid, link.b.device, link.b.port)
        key = (a, b) if a <= b else (b, a)
        if key not in seen:
            seen.add(key)
            out.append(link)
    return out


LINK_COLUMNS = ("a_device", "a_port", "b_device", "b_port")


def _csv_row(source: str, number: int, line: str) -> list[str]:
    """One CSV line's fields; a syntax error or a field above the csv module's limit (131,072 characters) names
    the line (exit 2)."""
    try:
        return next(csv.reader([line]))
    except csv.Error as exc:
        raise InputError(f"{source} line {number}: not valid CSV ({exc})") from None


def parse_links_csv(text: str, source: str = "OBSERVED") -> ObservedFabric:
    """Parse a links CSV: header with a_device,a_port,b_device,b_port (other columns are ignored).

    ``dsctl topology plan``'s cabling.csv has this shape, so a plan verifies against its own cabling.
    Lines starting with '#' are skipped. Each row is one physical cable, so a cable listed twice (in either
    direction) or a port on two rows is malformed input (InputError naming both lines), not a finding.
    Port values are checked against the plan by ``verify.check_csv_ports``.
    """
    lines = text.splitlines()
    numbered = [(i, line) for i, line in enumerate(lines, 1) if line.strip() and not line.lstrip().startswith("#")]
    if not numbered:
        raise InputError(f"{source} is empty")
    header_no, header_line = numbered[0]
    header = [h.strip().lower() for h in _csv_row(source, header_no, header_line)]
    missing = [c for c in LINK_COLUMNS if c not in header]
    if missing:
        raise InputError(f"{source} line {header_no}: the links CSV header lacks {', '.join(missing)}",
                         hint="the header must name a_device,a_port,b_device,b_port")
    col = [header.index(c) for c in LINK_COLUMNS]
    links: list[ObservedLink] = []
    cable_line: dict[tuple[tuple[str, str], tuple[str, str]], int] = {}
    port_line: dict[tuple[str, str], int] = {}
    for number, line in numbered[1:]:
        row = _csv_row(source, number, line)
        if len(row) != len(header):
            raise InputError(f"{source} line {number} has {len(row)} fields, the header has {len(header)}")
        a_dev, a_port, b_dev, b_port = (row[c].strip() for c in col)
        if not (a_dev and a_port and b_dev and b_port):
            raise InputError(f"{source} line {number}: a_device, a_port, b_device and b_port must all be set")
        a_end, b_end = (a_dev, a_port), (b_dev, b_port)
        key = (a_end, b_end) if a_end <= b_end else (b_end, a_end)
        if key in cable_line:
            raise InputError(f"{source} line {number} repeats the cable of line {cable_line[key]} "
                             f"({_show(a_end)} <-> {_show(b_end)})",
                             hint="list each cable once: a port holds one cable")
        for end in (a_end, b_end):
            if end in port_line:
                raise InputError(f"{source} line {number}: {_show(end)} already has the cable of line "
                                 f"{port_line[end]}", hint="a port holds one cable; fix one of the two lines")
            port_line[end] = number
        cable_line[key] = number
        links.append(ObservedLink(ObservedEnd(a_dev, a_port, a_dev), ObservedEnd(b_dev, b_port, b_dev), number))
    return ObservedFabric(links, "csv")


def _show(end: tuple[str, str]) -> str:
    text = f"{end[0]} port {end[1]}" if end[1].isascii() and end[1].isdigit() else f"{end[0]} {end[1]}"
    return text if len(text) <= 60 else text[:60] + "..."


def _guid(kind: str, index: int) -> str:
    base = 0x0002C90300000000 if kind == "H" else 0xB83FD20300000000
    return f"{base + index:016x}"


def render_ibnetdiscover(links: Iterable[tuple[str, str, str, str]], switch_radix: Mapping[str, int], *,
                         rates: Mapping[int, str] | None = None, guids: Mapping[str, str] | None = None,
                         descs: Mapping[str, str] | None = None, default_rate: str = "4xNDR") -> str:
    """ibnetdiscover-format text for ``links`` (a_device, a_port, b_device, b_port).

    A device named in ``switch_radix`` is a switch (ports are numbers); any other device is a host whose
    port label is an ibdev name, rendered as a one-port CA described "<host> <ibdev>". GUIDs are synthetic
    and deterministic unless ``guids`` gives one (key: switch name or "<host> <ibdev>", value 16 hex digits;
    two keys may share one, as a duplicate GUID does); ``descs`` overrides a NodeDescription by the same key;
    ``rates`` gives link ``i``'s width x speed (else ``default_rate``). Used for test fixtures, benchmarks and
    the plan's own ``topology.ibnet`` (what a correct fabric looks like).
    """
    ports: dict[str, dict[int, tuple[str, str, int, str]]] = {}
    desc_of: dict[str, str] = {}
    guid_of: dict[str, str] = {}
    lid_of: dict[str, int] = {}
    given = guids or {}
    names = descs or {}
    rate_of = rates or {}

    def node_id(device: str, port: str) -> tuple[str, int]:
        if device in switch_radix:
            key = f"S:{device}"
            if key not in guid_of:
                guid_of[key] = "S-" + given.get(device, _guid("S", len(guid_of) + 1))
                desc_of[key] = names.get(device, device)
            return key, int(port)
        name = f"{device} {port}"
        key = f"H:{name}"
        if key not in guid_of:
            guid_of[key] = "H-" + given.get(name, _guid("H", len(guid_of) + 1))
            desc_of[key] = names.get(name, name)
        return key, 1

    for i, (a_dev, a_port, b_dev, b_port) in enumerate(links):
        a_key, a_num = node_id(a_dev, a_port)
        b_key, b_num = node_id(b_dev, b_port)
        rate = rate_of.get(i, default_rate)
        ports.setdefault(a_key, {})[a_num] = (b_key, b_dev, b_num, rate)
        ports.setdefault(b_key, {})[b_num] = (a_key, a_dev, a_num, rate)
    for i, key in enumerate(sorted(guid_of), 1):
        lid_of[key] = i
    out = ["#", "# Topology file: generated by dsctl (synthetic ibnetdiscover format)", "#",
           "# Initiated from node " + (guid_of[sorted(guid_of)[0]][2:] if guid_of else "0" * 16), ""]
    for key in sorted(k for k in guid_of if k.startswith("S:")):
        guid = guid_of[key]
        out += ["vendid=0x2c9", "devid=0xd2f0", f"sysimgguid=0x{guid[2:].lstrip('0')}",
                f"switchguid=0x{guid[2:].lstrip('0')}({guid[2:].lstrip('0')})",
                f'Switch\t{switch_radix[key[2:]]} "{guid}"\t\t# "{desc_of[key]}" enhanced port 0 '
                f"lid {lid_of[key]} lmc 0"]
        for num in sorted(ports.get(key, {})):
            peer, _, peer_port, rate = ports[key][num]
            pguid = guid_of[peer]
            portguid = f"({pguid[2:].lstrip('0')})" if peer.startswith("H:") else ""
            out.append(f'[{num}]\t"{pguid}"[{peer_port}]{portguid}\t\t# "{desc_of[peer]}" lid {lid_of[peer]} {rate}')
        out.append("")
    for key in sorted(k for k in guid_of if k.startswith("H:")):
        guid = guid_of[key]
        out += ["vendid=0x2c9", "devid=0x1021", f"sysimgguid=0x{guid[2:].lstrip('0')}",
                f"caguid=0x{guid[2:].lstrip('0')}", f'Ca\t1 "{guid}"\t\t# "{desc_of[key]}"']
        for num in sorted(ports.get(key, {})):
            peer, _, peer_port, rate = ports[key][num]
            out.append(f'[{num}]({guid[2:].lstrip("0")}) \t"{guid_of[peer]}"[{peer_port}]\t\t# lid {lid_of[key]} '
                       f'lmc 0 "{desc_of[peer]}" lid {lid_of[peer]} {rate}')
        out.append("")
    return "\n".join(out)
