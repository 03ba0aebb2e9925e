"""ibdiagnet's topology file (IBDM "topology file", ``ibdiagnet -t/--topo_file``) and the IBNL system definitions
it names: a writer for the plan's expected fabric and a parser that reads such a file as an observed fabric.

Format (ibutils ``ibdm/doc/ibdm-topo-file.pod``; IBUtils2 documentation "Topology Comparison"): one section per
system, separated by empty lines; a section starts with ``SYSTEM-TYPE SYSTEM-NAME [CFG: ...]`` and every
following indented line is one connection of that system's front-panel port::

    DSCTL_SW64 p3-leaf01
        P1 -4x-100G-> DSCTL_HOST_P3 node0001 mlx5_3/P1
        P33 -4x-100G-> DSCTL_SW64 p3-spine01 P1

The arrow optionally carries the width and the per-lane speed (``-4x-25G->`` in the IBUtils2 example; tokens
``2.5 5 10 14 FDR10 25 EDR20 50 100 200`` as IBUtils2's ``char2speed`` reads them, so NDR is ``100``). Lines
starting with ``#`` are comments. Every SYSTEM-TYPE needs an IBNL file (``ibdm-ibnl-file``: ``TOPSYSTEM name``,
then ``NODE SW|CA <ports> <model> <instance>`` and ``<node port> -> <front-panel port>`` lines); ibdiagnet reads
extra ones from ``--out_ibnl_dir``. A system port of a node inside a system is ``<instance>/P<n>``.

Pure text in, text out; the command layer reads and writes the files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from dsctl.errors import InputError
from dsctl.names import shown
from dsctl.topology.observed import ObservedEnd, ObservedFabric, ObservedLink

#: ibnetdiscover's speed names -> the per-lane speed token of the topology file's arrow (IBUtils2 ``char2speed``)
SPEED_TOKENS = {"SDR": "2.5", "DDR": "5", "QDR": "10", "FDR": "14", "FDR10": "FDR10", "EDR": "25",
                "EDR20": "EDR20", "HDR": "50", "NDR": "100", "XDR": "200"}
_SPEED_NAMES = {token: name for name, token in SPEED_TOKENS.items()}
WIDTHS = ("1x", "2x", "4x", "8x", "12x")

#: a system type or name: no white space and no '/' (ibdm's ``sysLine``)
_SYSTEM = re.compile(r"([^/\s]+)[ \t]+([^/\s]+)(?:[ \t]+CFG:(.*))?[ \t]*")
_CONNECTION = re.compile(r"[ \t]+(\S+)[ \t]+-(?:(\d{1,2})[xX]-)?(?:([0-9.]{1,5}|FDR10|EDR20)G-)?>"
                         r"[ \t]+(\S+)[ \t]+(\S+)[ \t]+(\S+)[ \t]*")
_FRONT_PORT = re.compile(r"P(\d{1,9})")
_NODE_PORT = re.compile(r"(.+)/P(\d{1,9})")
#: an IBNL NAME (ibutils ``ibnl_scanner.ll``), here without '/' so that ``<instance>/P<n>`` splits one way
IBNL_NAME = re.compile(r"[A-Za-z][-\[\]\\*A-Za-z0-9_.:%@~]+")
SWITCH_TYPE = "DSCTL_SW"
HOST_TYPE = "DSCTL_HOST"
_OUR_SWITCH = re.compile(r"DSCTL_SW(\d{1,4})")


def switch_type(num_ports: int) -> str:
    """The IBNL system type dsctl writes for a switch of ``num_ports`` ports: ``DSCTL_SW64``."""
    return f"{SWITCH_TYPE}{num_ports}"


def arrow(rate: str) -> str:
    """``-4x-100G->`` for ``4xNDR``; ``->`` where the rate is not one the format can carry."""
    width, _, speed = rate.partition("x")
    token = SPEED_TOKENS.get(speed)
    return f"-{width}x-{token}G->" if f"{width}x" in WIDTHS and token else "->"


def ibnl_switch(num_ports: int) -> str:
    """IBNL of a one-ASIC switch: node port n is front-panel port ``P<n>``."""
    lines = [f"TOPSYSTEM {switch_type(num_ports)}", "", f"NODE SW {num_ports} DSCTL_SWITCH U1"]
    lines += [f"   {n} -> P{n}" for n in range(1, num_ports + 1)]
    return "\n".join(lines) + "\n"


def ibnl_host(type_name: str, nics: Sequence[str]) -> str:
    """IBNL of a host with one single-port CA per NIC: CA ``<nic>`` port 1 is system port ``<nic>/P1``."""
    lines = [f"TOPSYSTEM {type_name}"]
    for nic in nics:
        lines += ["", f"NODE CA 1 DSCTL_HCA {nic}", f"   1 -> {nic}/P1"]
    return "\n".join(lines) + "\n"


def check_names(devices: Iterable[str], nics: Iterable[str]) -> None:
    """InputError unless every device name fits a topology-file system name and every NIC an IBNL node name."""
    for name in devices:
        if "/" in name or not name.strip() or name != name.split()[0]:
            raise InputError(f"device name {shown(name)} cannot go into ibdiagnet's topology file "
                             "(expected-plane<P>.topo): system names there carry no '/' or spaces",
                             hint="choose --node-name/--leaf-name/--spine-name templates without '/'")
    for nic in nics:
        if not IBNL_NAME.fullmatch(nic):
            raise InputError(f"NIC name {shown(nic)} cannot be an IBNL node name (ibdiagnet's topology file): "
                             "use 2 or more letters, digits or '_.:-', starting with a letter",
                             hint="e.g. --nic-name 'mlx5_{nic}' or 'HCA-{nic1}'")


def render_topology_file(links: Sequence[tuple[str, str, str, str]], switch_ports: Mapping[str, int],
                         host_type: str, rate: str, header: Sequence[str] = ()) -> str:
    """The topology file for ``links`` (a_device, a_port, b_device, b_port): a device in ``switch_ports`` is a
    switch (``DSCTL_SW<ports>``, ports ``P<n>``), any other a host of ``host_type`` whose port is its NIC
    (``<nic>/P1``). Each cable is listed from both ends, every link at ``rate`` (``4xNDR``); ``header`` lines
    become ``#`` comments. Sections: switches in ``switch_ports`` order, then hosts as first cabled."""
    sections: dict[str, list[tuple[tuple[int, str], str]]] = {}
    hosts: dict[str, None] = {}
    arrow_text = arrow(rate)

    def end(device: str, port: str) -> tuple[str, str, tuple[int, str]]:
        if device in switch_ports:
            return switch_type(switch_ports[device]), f"P{port}", (int(port), "")
        hosts.setdefault(device, None)
        return host_type, f"{port}/P1", (0, port)

    for a_dev, a_port, b_dev, b_port in links:
        a_type, a_name, a_key = end(a_dev, a_port)
        b_type, b_name, b_key = end(b_dev, b_port)
        sections.setdefault(a_dev, []).append((a_key, f"    {a_name} {arrow_text} {b_type} {b_dev} {b_name}"))
        sections.setdefault(b_dev, []).append((b_key, f"    {b_name} {arrow_text} {a_type} {a_dev} {a_name}"))
    out = [f"# {line}" for line in header]
    order = [d for d in switch_ports if d in sections] + list(hosts)
    for device in order:
        kind = switch_type(switch_ports[device]) if device in switch_ports else host_type
        out += ["", f"{kind} {device}"] + [text for _, text in sorted(sections[device])]
    return "\n".join(out).lstrip("\n") + "\n"


def looks_like_topology_file(text: str) -> bool:
    """True if the first two non-comment lines are a system line and an indented ``... -> ...`` connection."""
    first: str | None = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if first is None:
            if line[:1].isspace() or not _SYSTEM.fullmatch(line):
                return False
            first = line
            continue
        return line[:1].isspace() and "->" in line
    return False


def _is_switch(system_type: str) -> bool | None:
    if system_type.startswith(SWITCH_TYPE):
        return True
    if system_type.startswith((HOST_TYPE, "HCA")):  # ibdiagnet names its generated host types HCA_<...>
        return False
    return None


def _end(system_type: str, system: str, port: str, source: str, number: int) -> ObservedEnd:
    """An observed end named as ibnetdiscover's are: a switch port by number, a host port by its NIC."""
    is_switch = _is_switch(system_type)
    front = _FRONT_PORT.fullmatch(port)
    if is_switch is not False and front:
        num = int(front.group(1))
        ours = _OUR_SWITCH.fullmatch(system_type)
        if ours and not 1 <= num <= int(ours.group(1)):
            raise InputError(f"{source} line {number}: port {port} of {shown(system)} is outside "
                             f"P1..P{ours.group(1)} (its type {system_type} has {ours.group(1)} ports)")
        return ObservedEnd(system, str(num), system, "", is_switch, num)
    node_port = _NODE_PORT.fullmatch(port)
    if is_switch is False and node_port:
        nic, num = node_port.group(1), int(node_port.group(2))
        label = nic if num == 1 else f"{nic}/{num}"
        return ObservedEnd(system, label, f"{system} {nic}", "", False, num)
    return ObservedEnd(system, port, system, "", is_switch, 0)


def _rate(width: str | None, speed: str | None, source: str, number: int) -> str:
    if width is None or speed is None:
        return ""
    if f"{int(width)}x" not in WIDTHS or speed not in _SPEED_NAMES:
        raise InputError(f"{source} line {number}: link -{width}x-{speed}G-> is not a width/speed the format "
                         f"has", hint=f"widths {', '.join(WIDTHS)}; speeds {', '.join(_SPEED_NAMES)} (Gb/s per "
                         "lane)")
    return f"{int(width)}x{_SPEED_NAMES[speed]}"


def parse_topology_file(text: str, source: str = "OBSERVED") -> ObservedFabric:
    """Read a topology file as the fabric it describes (``source_format`` ``ibdm-topo``).

    A cable listed from both ends is one cable; a port listed with two different peers, a system declared with
    two types, a connection outside a system section or a line of neither shape is malformed (InputError
    naming the line). Ends are named like ibnetdiscover's: a switch port by its number (``P17`` -> ``17``), a
    host port ``<nic>/P1`` by its NIC, so ``dsctl topology verify`` checks the file against a plan.
    """
    types: dict[str, tuple[str, int]] = {}
    peer: dict[tuple[str, str], tuple[tuple[str, str], int]] = {}
    links: list[ObservedLink] = []
    current: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            current = None
            continue
        if stripped.startswith("#"):
            continue
        if not line[:1].isspace():
            system = _SYSTEM.fullmatch(line)
            if not system:
                raise InputError(f"{source} line {number} is not a topology-file system line: {stripped[:80]!r}",
                                 hint="expected 'SYSTEM-TYPE SYSTEM-NAME [CFG: ...]' (no '/' in either), then "
                                      "indented 'PORT -> TYPE NAME PORT' lines")
            current = _declare(types, system.group(2), system.group(1), source, number)
            continue
        conn = _CONNECTION.fullmatch(line)
        if not conn:
            raise InputError(f"{source} line {number} is not a topology-file connection: {stripped[:80]!r}",
                             hint="expected an indented 'PORT -[4x-100G-]> SYSTEM-TYPE SYSTEM-NAME PORT' line")
        if current is None:
            raise InputError(f"{source} line {number}: connection outside a system section (after an empty "
                             "line or before any 'SYSTEM-TYPE SYSTEM-NAME' line)")
        local_port, width, speed, r_type, r_name, r_port = conn.groups()
        if "/" in r_name:
            raise InputError(f"{source} line {number}: system name {shown(r_name)} holds a '/'")
        _declare(types, r_name, r_type, source, number)
        here, there = (current, local_port), (r_name, r_port)
        rate = _rate(width, speed, source, number)
        if _connect(peer, here, there, number, source) | _connect(peer, there, here, number, source):
            a = _end(types[current][0], current, local_port, source, number)
            b = _end(r_type, r_name, r_port, source, number)
            links.append(ObservedLink(a, b, number, rate, source))
    if not types:
        raise InputError(f"{source} has no system sections; is it an ibdiagnet topology file?")
    return ObservedFabric(links, "ibdm-topo")


def _declare(types: dict[str, tuple[str, int]], name: str, system_type: str, source: str, number: int) -> str:
    before = types.setdefault(name, (system_type, number))
    if before[0] != system_type:
        raise InputError(f"{source} line {number}: system {shown(name)} is of type {shown(system_type)} here "
                         f"but {shown(before[0])} on line {before[1]}")
    return name


def _connect(peer: dict[tuple[str, str], tuple[tuple[str, str], int]], here: tuple[str, str],
             there: tuple[str, str], number: int, source: str) -> bool:
    """Record ``here`` -> ``there``; True if new, False if the same cable was listed before (from either end)."""
    if here == there:
        raise InputError(f"{source} line {number}: port {here[1]} of {shown(here[0])} is cabled to itself")
    before = peer.setdefault(here, (there, number))
    if before[0] == there:
        return before[1] == number
    raise InputError(f"{source} line {number}: port {here[1]} of {shown(here[0])} is already cabled to "
                     f"{shown(before[0][0])} {before[0][1]} (line {before[1]})",
                     hint="a port holds one cable; fix one of the two lines")
