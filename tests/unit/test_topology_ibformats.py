"""Property tests of the verify input parsers: node-name maps, ibnetdiscover -p reports, perfquery blocks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.topology.counters import Thresholds, judge, parse_perfquery
from dsctl.topology.ibformats import parse_node_name_map, parse_ports_report, render_node_name_map

NAME = st.from_regex(r"[a-z][a-z0-9_-]{0,12}( mlx5_[0-9])?", fullmatch=True)
GUID = st.integers(1, 2**64 - 1).map(lambda g: f"{g:016x}")


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(GUID, NAME, max_size=30))
def test_name_map_round_trips(names: dict[str, str]) -> None:
    assert parse_node_name_map(render_node_name_map(names, "title")) == names


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 64), st.integers(1, 2), st.sampled_from(["1x", "2x", "4x"]),
                          st.sampled_from(["HDR", "NDR", "EDR"])), min_size=1, max_size=20, unique_by=lambda t: t[0]))
def test_ports_report_lines_parse_each_link_once(rows: list[tuple[int, int, str, str]]) -> None:
    lines = []
    for port, hca_port, width, speed in rows:
        ca = f"{0x7cfe900300000000 + port:#018x}"
        ca_line = (f"CA   {100 + port}  {hca_port} {ca} {width} {speed} - SW  1719 {port} 0x7cfe9003009ce5b0 "
                   f"( 'o{port:04d} HCA-1' - 'ib-leaf01' )")
        sw_line = (f"SW  1719 {port} 0x7cfe9003009ce5b0 {width} {speed} - CA   {100 + port}  {hca_port} {ca} "
                   f"( 'ib-leaf01' - 'o{port:04d} HCA-1' )")
        lines += [ca_line, sw_line]
    lines.append("SW  1719 99 0x7cfe9003009ce5b0 4x ???                                    'ib-leaf01'")
    fabric = parse_ports_report("\n".join(lines))
    assert len(fabric.links) == len(rows)
    for link, (port, hca_port, width, speed) in zip(fabric.links, rows, strict=True):
        assert (link.a.device, link.a.port_num, link.b.device, link.b.port, link.rate) == (
            f"o{port:04d}", hca_port, "ib-leaf01", str(port), width + speed)
        assert fabric.lids[100 + port] == (link.a.guid, False)


COUNT = st.integers(0, 2**32 - 1)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 49151), st.integers(1, 128), COUNT, COUNT, COUNT, COUNT), min_size=1,
                max_size=10))
def test_perfquery_blocks_parse_and_judge(rows: list[tuple[int, int, int, int, int, int]]) -> None:
    text = ""
    for lid, port, sym, rec, down, rcv in rows:
        text += (f"# Port extended counters: Lid {lid} port {port} (CapMask: 0x5300 CapMask2: 0x0000002)\n"
                 f"PortSelect:......................{port}\nSymbolErrorCounter:..............{sym}\n"
                 f"LinkErrorRecoveryCounter:........{rec}\nLinkDownedCounter:...............{down}\n"
                 f"PortRcvErrors:...................{rcv}\nPortXmitWait:....................123\n")
    parsed = parse_perfquery(text, "p")
    assert [(r.lid, r.port, r.symbol_errors, r.link_recovers, r.link_downed, r.rcv_errors) for r in parsed] == rows
    limits = Thresholds()
    for row, (_, _, sym, rec, down, rcv) in zip(parsed, rows, strict=True):
        kinds = [k for k, *_ in judge(row, limits)]
        assert ("link_downed" in kinds) == (down > 1)
        assert kinds.count("error_counters") == (sym > 10) + (rec > 10) + (rcv > 10)
