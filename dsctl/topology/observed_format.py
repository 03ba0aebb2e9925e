"""One entry for every fabric dump format: detect which one a text is and hand it to its parser.

The parsers build on the types of :mod:`dsctl.topology.observed`; this module sits above them all."""

from __future__ import annotations

from dsctl.progress_count import Report
from dsctl.topology.ibdmtopo import looks_like_topology_file, parse_topology_file
from dsctl.topology.ibformats import is_ports_report, parse_ports_report
from dsctl.topology.lldp import looks_like_lldp, parse_lldp
from dsctl.topology.observed import ObservedFabric, parse_ibnetdiscover, parse_links_csv


def parse_observed(text: str, source: str = "OBSERVED", report: Report | None = None) -> ObservedFabric:
    """Detect the format and parse it: a links CSV if the first data line names a_device and b_device, an
    ``ibnetdiscover -p`` ports report if the first line is one, an ibdiagnet topology file (``ibdiagnet -t``;
    a system line then an indented connection), ``lldpctl -f json`` output (one node's, named by
    the file's stem) if it is a JSON object with ``lldp``, else ibnetdiscover's default output. ``report(lines_done,
    lines)`` follows ibnetdiscover's output (the large dumps); the other formats report when parsed."""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        lowered = stripped.lower()
        if "a_device" in lowered and "b_device" in lowered:
            return parse_links_csv(text, source)
        break
    if looks_like_topology_file(text):
        return parse_topology_file(text, source)
    if looks_like_lldp(text):
        return parse_lldp(text, source)
    if is_ports_report(text):
        return parse_ports_report(text, source)
    return parse_ibnetdiscover(text, source, report)
