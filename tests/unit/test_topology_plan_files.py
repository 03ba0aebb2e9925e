"""topology plan's files rendered column-wise and streamed (issue 32): the same bytes as main before the change,
written a piece at a time, and the vectorised hostlists equal to ``hostlist.compress``."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.cluster import hostlist
from dsctl.output.files import write_files
from dsctl.topology import expected_dumps, export, ibdmtopo, textcols
from dsctl.topology.api import plan_files
from dsctl.topology.observed import render_ibnetdiscover
from dsctl.topology.plan import PlanSpec, build_plan, default_planes, default_templates
from dsctl.topology.plan_files import PlanFiles
from dsctl.topology.slurm_tree import compress_groups
from dsctl.topology.summary import summarize

#: sha256 of every file of 11 plans, recorded from main at 01ed373 before the files were rendered column-wise:
#: [[kind, nodes, radix, nics, planes, oversubscription, port_gbps, link, name templates], {file: sha256}]
RECORDED = json.loads((Path(__file__).parents[1] / "data" / "topology" / "plan_files_sha256.json").read_text())


def _spec(kind: str, nodes: int, radix: int, nics: int, planes: int | None, over: float, gbps: float, link: str,
          names: dict[str, str]) -> PlanSpec:
    templates = dataclasses.replace(default_templates(kind), **names)
    return PlanSpec(kind, nodes, nics, nics, planes or default_planes(kind, nics), radix, gbps, 82045.0, 544.0,
                    544.0, over, templates, "h800-hgx", "ib-ndr-64", link)


def _small_pieces(monkeypatch: pytest.MonkeyPatch, rows: int = 7) -> None:
    """Many pieces even on a small plan (a piece boundary inside every list and section kind)."""
    for module in (textcols, export, expected_dumps):
        monkeypatch.setattr(module, "ROWS_PER_PIECE", rows)


@pytest.mark.parametrize("shape", [r[0] for r in RECORDED], ids=lambda s: f"{s[0]}-{s[1]}n-r{s[2]}")
def test_out_dir_files_are_main_bytes(shape: list, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[type-arg]
    _small_pieces(monkeypatch)
    want = next(digests for s, digests in RECORDED if s == shape)
    plan = build_plan(_spec(*shape))
    written = write_files(tmp_path / "plan", plan_files(plan, summarize(plan)))
    got = {str(p.relative_to(tmp_path / "plan")): hashlib.sha256(p.read_bytes()).hexdigest() for p in written}
    assert got == want


def test_the_mapping_reads_the_same_text_as_the_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = build_plan(_spec("ft3", 100, 16, 8, None, 1.0, 400.0, "", {}))
    files = plan_files(plan, summarize(plan))
    whole = {name: files[name] for name in files}
    _small_pieces(monkeypatch, 3)
    pieces = PlanFiles(plan, summarize(plan))
    for name in pieces:
        parts = list(pieces.pieces(name))
        assert b"".join(p.encode() if isinstance(p, str) else p for p in parts).decode() == whole[name]
    assert len(list(pieces.pieces("expected-plane0.ibnet"))) > 20


def test_out_dir_never_renders_a_file_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = build_plan(_spec("mpft", 40, 16, 8, None, 1.0, 400.0, "", {}))
    files = plan_files(plan, summarize(plan))
    monkeypatch.setattr(PlanFiles, "__getitem__", lambda self, name: pytest.fail(f"{name} rendered whole"))
    written = write_files(tmp_path / "plan", files)
    assert {p.name for p in written} >= {"cabling.csv", "plan.json", "expected-plane7.ibnet", "expected-plane7.topo"}
    assert (tmp_path / "plan" / "cabling.csv").read_text().count("\n") == plan.num_cables + 1


def test_a_port_cabled_twice_is_written_as_the_per_link_writers_do() -> None:
    """A plan that is not a fabric (edited arrays) is handed to render_ibnetdiscover/render_topology_file."""
    plan = build_plan(_spec("ft2", 6, 16, 8, None, 1.0, 400.0, "", {}))
    b_port = plan.b_port.copy()
    b_port[1] = b_port[0]  # two NICs on one leaf port
    odd = dataclasses.replace(plan, b_port=b_port)
    links = [tuple(row.split(",")[3:7]) for row in export.cabling_csv(odd).splitlines()[1:]]
    radix = {n: 16 for n, t in zip(odd.device_names, odd.device_tier.tolist(), strict=True) if t > 0}
    ibnet = b"".join(expected_dumps.expected_ibnetdiscover_pieces(odd, 0, "4xNDR")).decode()
    # GUIDs as the plan writes them, so only the duplicate decides the text
    guids = {n: f"{expected_dumps.SWITCH_GUID_BASE + i + 1:016x}" for i, n in enumerate(odd.device_names)
             if odd.device_tier[i] > 0}
    for a, ap in zip(odd.a_dev[odd.cable_kind == 0].tolist(), odd.a_port[odd.cable_kind == 0].tolist(), strict=True):
        guids[f"{odd.device_names[a]} {odd.nic_names[ap]}"] = f"{expected_dumps.HOST_GUID_BASE + a * 8 + ap + 1:016x}"
    assert ibnet == render_ibnetdiscover(links, radix, guids=guids, default_rate="4xNDR")  # type: ignore[arg-type]
    topo = b"".join(expected_dumps.topology_file_pieces(odd, 0, "4xNDR", "DSCTL_HOST_P0", ["t"])).decode()
    assert topo == ibdmtopo.render_topology_file(links, radix, "DSCTL_HOST_P0", "4xNDR", ["t"])  # type: ignore[arg-type]


_NAMES = st.builds(lambda pre, digits: pre + digits, st.sampled_from(["n", "node", "a-b", "x1y", "p0-leaf", "q."]),
                   st.text("0123456789", max_size=4))


@settings(max_examples=200, deadline=None)
@given(groups=st.lists(st.lists(_NAMES, min_size=1, max_size=12), min_size=1, max_size=6))
def test_compress_groups_is_hostlist_compress(groups: list[list[str]]) -> None:
    names = sorted({n for g in groups for n in g})
    index = {n: i for i, n in enumerate(names)}
    children = np.array([index[n] for g in groups for n in g], dtype=np.int64)
    starts = np.cumsum([0] + [len(g) for g in groups[:-1]])
    assert compress_groups(names, children, starts) == [hostlist.compress(g) for g in groups]


def test_compress_groups_with_runs_ranges_and_long_numbers() -> None:
    names = ["node0001", "node0002", "node0003", "node0007", "node3", "node4", "node1", "spine", "x9", "x10"]
    groups = [[0, 1, 2, 3], [4, 5, 6], [7, 0, 1], [8, 9], [1, 1, 2]]
    starts = np.cumsum([0] + [len(g) for g in groups[:-1]])
    got = compress_groups(names, np.array([i for g in groups for i in g]), starts)
    assert got == [hostlist.compress([names[i] for i in g]) for g in groups]
    assert got[:3] == ["node[0001-0003,0007]", "node[3-4,1]", "spine,node[0001-0002]"]
    long = ["n" + "1" * 30, "n" + "1" * 29 + "2"]
    assert compress_groups(long, np.array([0, 1]), np.array([0])) == [hostlist.compress(long)]


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.integers(-(10**12), 10**12), min_size=1, max_size=40))
def test_decimal_is_str(values: list[int]) -> None:
    text = textcols.lines(textcols.decimal(np.array(values)), "\n").decode()
    assert text == "".join(f"{v}\n" for v in values)


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=20))
def test_hex16_is_format_016x(values: list[int]) -> None:
    v = np.array(values, dtype=np.uint64)
    assert textcols.lines(textcols.hex16(v), ",").decode() == "".join(f"{x:016x}," for x in values)
    assert textcols.lines(textcols.hex16(v, strip_zeros=True), ",").decode() == "".join(
        f"{x:016x},".lstrip("0") for x in values)


def test_bucket_order_sorts_distinct_keys_and_refuses_repeats() -> None:
    assert textcols.bucket_order(np.array([5, 0, 3]), 6).tolist() == [1, 2, 0]
    assert textcols.bucket_order(np.array([5, 0, 5]), 6) is None
