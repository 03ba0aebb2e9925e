"""Issue 33 (hardening, round 4), trace: each test failed before the fix it names (exit 4, GBs, minutes).

Measured peaks and times of the full-size hostile cases are in docs/trace.md (Limits) and docs/reliability.md.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dsctl.trace.intervals import union, union_lengths
from dsctl.trace.parse import MAX_STREAMS
from dsctl.trace.skew import MAX_MATCH_CELLS
from dsctl.trace.timeline import MAX_LANES
from tests.conftest import run_cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import trace_builder as tb

from tests.cli.refused import assert_refused

SEQ = {"Collective name": "allreduce", "Process Group Name": "0"}
#: examples of the property test (three commands each, ~0.2 s): DSCTL_HOSTILE_EXAMPLES=2000 explores
EXAMPLES = int(os.environ.get("DSCTL_HOSTILE_EXAMPLES", "25"))


def _write(path: Path, events: list[dict[str, Any]], rank: int | None = 0) -> str:
    path.write_text(json.dumps(tb.trace(events, rank=rank)))
    return str(path)


def _bad(result: Any, *needles: str) -> None:
    assert_refused(result, *needles)


def test_seq_near_int64_max_is_matched_not_overflowed(cli, tmp_path: Path) -> None:
    """Before: the (label, Seq) pair became label * (max Seq + 1) + Seq: OverflowError, exit 4."""
    files = [_write(tmp_path / f"r{r}.json", [tb.nccl(10.0, 5 + r, **SEQ, Seq=2**63 - 1),
                                              tb.nccl(20.0, 5 + 2 * r, **SEQ, Seq=3)], rank=r) for r in (0, 1)]
    res = cli("trace", "stragglers", *files, "--format", "json", "-j", "1")
    assert res.exit_code == 0, res.stderr
    data = res.json()
    assert data["num_matched"] == 2
    assert {c["index"] for c in data["collectives"]} == {3, 2**63 - 1}


def test_keys_on_one_participant_are_dropped_before_the_table(cli, tmp_path: Path) -> None:
    """Before: 20,000 devices with their own Seq each built two 20,000 x 20,000 float matrices (6.7 GB, 23 s)."""
    n = 3000  # enough to need 3000 x 3000 x 8 B x 2 = 144 MB before; the refusal needs none of it
    events = [tb.nccl(float(d), 1.0, device=d % MAX_STREAMS, stream=d // MAX_STREAMS, **SEQ, Seq=d)
              for d in range(n)]
    _bad(cli("trace", "stragglers", _write(tmp_path / "t.json", events), "-j", "1"),
         "no collective appears on two or more ranks")


def test_a_match_table_above_the_cell_limit_is_refused_before_allocation(tmp_path: Path) -> None:
    """K keys each on two of P participants: K x P cells counted and refused before np.full (before: 16 GB)."""
    from dsctl.errors import InputError
    from dsctl.trace.skew import RankCollectives, stragglers

    num_parts = 2 * 4096
    parts = [RankCollectives("f", p, "gpu0", ("x",), np.zeros(1, np.int64), np.array([p // 2], np.int64),
                             np.array([float(p)]), np.array([p + 1.0]), np.ones(1, bool))
             for p in range(num_parts)]
    assert (num_parts // 2) * num_parts > MAX_MATCH_CELLS
    with pytest.raises(InputError, match="collectives x participants"):
        stragglers(parts)


def test_more_streams_than_the_limit_are_refused_after_reading(cli, tmp_path: Path) -> None:
    """Before: one kernel per stream cost events x streams (300,000 kernels ~100 s in overlap, 73 s in timeline)
    and 20,000 devices in one file built 20,000 rows of 20,000-event masks."""
    streams = _write(tmp_path / "s.json", [tb.compute(float(i), 0.5, stream=i) for i in range(MAX_STREAMS + 1)])
    _bad(cli("trace", "overlap", streams, "-j", "1"), f"{MAX_STREAMS + 1:,} GPU streams", f"{MAX_STREAMS:,}")
    _bad(cli("trace", "timeline", streams, "-o", str(tmp_path / "t.svg"), "-j", "1"), "GPU streams")
    devices = _write(tmp_path / "d.json", [tb.nccl(float(d), 1.0, device=d) for d in range(MAX_STREAMS + 1)])
    _bad(cli("trace", "overlap", devices, "-j", "1"), "GPU streams (device, stream pairs)")
    threads = _write(tmp_path / "h.json", [tb.cpu_op("aten::mm", float(i), 1.0, tid=i)
                                           for i in range(MAX_STREAMS + 1)])
    _bad(cli("trace", "overlap", threads, "-j", "1"), "host threads")
    assert not (tmp_path / "t.svg").exists()


def test_many_streams_and_devices_under_the_limit_give_one_row_each(cli, tmp_path: Path) -> None:
    """4,096 one-kernel streams: a row per stream with its own busy time (the sort-based grouping)."""
    events = [tb.compute(float(2 * i), 1.0 + (i % 3), stream=i) for i in range(MAX_STREAMS)]
    events.append(tb.compute(0.5, 1.0, stream=0))  # stream 0: [0, 1] and [0.5, 1.5] -> busy 1.5
    res = cli("trace", "overlap", _write(tmp_path / "s.json", events), "--format", "json", "-j", "1")
    assert res.exit_code == 0, res.stderr
    rows = res.json()["ranks"][0]["streams"]
    assert [r["stream"] for r in rows] == list(range(MAX_STREAMS))
    assert rows[0]["busy_us"] == 1.5 and rows[0]["num_events"] == 2
    assert [r["busy_us"] for r in rows[1:4]] == [2.0, 3.0, 1.0]
    devices = [tb.nccl(float(d), 1.0 + d, device=d) for d in range(64)]
    res = cli("trace", "overlap", _write(tmp_path / "d.json", devices), "--format", "json", "-j", "1")
    assert res.exit_code == 0, res.stderr
    ranks = res.json()["ranks"]
    assert [r["device"] for r in ranks] == [f"gpu{d}" for d in range(64)]
    assert [r["comm_busy_us"] for r in ranks] == [1.0 + d for d in range(64)]


def test_timeline_counts_lanes_before_drawing(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: 300,000 lanes were merged and drawn (73 s), then refused. Now counted first: no union is run."""
    import dsctl.trace.timeline as timeline

    def no_work(*_a: object, **_k: object) -> None:
        raise AssertionError("lanes were built before the lane count was checked")

    monkeypatch.setattr(timeline, "union", no_work)
    path = _write(tmp_path / "t.json", [tb.compute(float(i), 0.5, stream=i) for i in range(MAX_LANES + 1)])
    _bad(cli("trace", "timeline", path, "-o", str(tmp_path / "t.svg"), "-j", "1"), f"{MAX_LANES + 1:,} lanes")
    assert not (tmp_path / "t.svg").exists()


def test_timeline_refuses_more_files_than_lanes_before_reading(cli, tmp_path: Path) -> None:
    files = []
    for i in range(MAX_LANES + 1):
        (tmp_path / f"r{i:04d}.json").write_text("not even JSON")
        files.append(str(tmp_path / f"r{i:04d}.json"))
    _bad(cli("trace", "timeline", str(tmp_path / "r*.json"), "-o", str(tmp_path / "t.svg")),
         f"{MAX_LANES + 1:,} files")


def test_timeline_lanes_are_the_same_as_one_union_per_lane(cli, tmp_path: Path) -> None:
    events = [tb.compute(0, 10, stream=7), tb.nccl(5, 10, stream=20), tb.compute(20, 5, stream=7, device=1),
              tb.nccl(30, 2, stream=20, device=1), tb.compute(12, 3, stream=7)]
    res = cli("trace", "timeline", _write(tmp_path / "t.json", events), "-o", str(tmp_path / "t.svg"), "-j", "1")
    assert res.exit_code == 0, res.stderr
    svg = (tmp_path / "t.svg").read_text()
    labels = [line.split(">")[1].split("<")[0] for line in svg.splitlines() if "font-size=\"10\">rank" in line]
    assert labels == ["rank 0 gpu0 stream 7", "rank 0 gpu0 stream 20", "rank 0 gpu1 stream 7",
                      "rank 0 gpu1 stream 20"]


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.lists(st.tuples(st.integers(0, 5), st.floats(-50, 50), st.floats(0, 20)), max_size=60))
def test_union_lengths_is_a_union_per_group(data: list[tuple[int, float, float]]) -> None:
    group = np.array([g for g, _, _ in data], dtype=np.int64)
    s = np.array([a for _, a, _ in data])
    e = s + np.array([d for _, _, d in data])
    got = union_lengths(group, s, e, 6)
    for g in range(6):
        us, ue = union(s[group == g], e[group == g])
        assert got[g] == pytest.approx(float(np.sum(ue - us)), abs=1e-9)


# ------------------------------------------------------------------------------------------- --slurm answers

def _node_document(cli, tmp_path: Path) -> dict[str, Any]:
    path = _write(tmp_path / "r0.json", [tb.compute(0, 10), tb.nccl(5, 10)])
    res = cli("trace", "overlap", path, "--format", "json", "-j", "1")
    assert res.exit_code == 0, res.stderr
    return res.json()


def _on_nodes(monkeypatch: pytest.MonkeyPatch, documents: dict[str, Any]) -> Any:
    import dsctl.runners.fleet as fleet

    def fake_run(names: list[str], command: list[str], **_kw: object) -> Any:
        return fleet.FleetRun(tuple(fleet.NodeAnswer(n, documents[n], 0) for n in names), wall_s=0.1)

    monkeypatch.setattr(fleet, "run_on_nodes", fake_run)
    monkeypatch.setattr(fleet, "expand_hostlist", lambda text, option="": text.split(","))  # no scontrol here
    return run_cli("trace", "overlap", "/t/{node}.json", "--slurm", "-w", ",".join(documents), "--format", "json")


def _mutated(doc: dict[str, Any], change: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    change(out)
    return out


def test_slurm_answers_of_the_right_shape_are_merged(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _node_document(cli, tmp_path)
    res = _on_nodes(monkeypatch, {"n1": doc, "n2": doc})
    assert res.exit_code == 0, res.stderr
    ranks = res.json()["ranks"]
    assert [r["source"].split(":")[0] for r in ranks] == ["n1", "n2"]
    assert ranks[0]["exposed_comm_us"] == doc["ranks"][0]["exposed_comm_us"] == 5.0


@pytest.mark.parametrize(("change", "field"), [
    (lambda d: d["ranks"][0].update(wall_us=float("inf")), "ranks[0].wall_us"),
    (lambda d: d["ranks"][0].update(overlap_ratio=float("nan")), "ranks[0].overlap_ratio"),
    (lambda d: d["ranks"].__setitem__(0, [1, 2]), "ranks[0] [1, 2] is not an object"),
    (lambda d: d["ranks"].__setitem__(0, "r"), "ranks[0] 'r' is not an object"),
    (lambda d: d["ranks"][0].update(rank="0"), "ranks[0].rank"),
    (lambda d: d["ranks"][0].update(rank=10**400), "ranks[0].rank"),
    (lambda d: d["ranks"][0].update(idle_us=10**400), "ranks[0].idle_us"),
    (lambda d: d["ranks"][0]["collectives"].__setitem__(0, 5), "ranks[0].collectives[0]"),
    (lambda d: d["ranks"][0]["collectives"][0].update(total_us=float("-inf")), "collectives[0].total_us"),
    (lambda d: d["ranks"][0]["streams"][0].update(stream=2**40), "streams[0].stream"),
    (lambda d: d["ranks"][0]["categories"][0].update(share="x"), "categories[0].share"),
    (lambda d: d["ranks"][0]["top_kernels"][0].update(count=-1), "top_kernels[0].count"),
    (lambda d: d["ranks"][0].update(steps=[1.5]), "ranks[0].steps[0]"),
    (lambda d: d["ranks"][0].update(notes=[None]), "ranks[0].notes"),
    (lambda d: d.update(ranks={"a": 1}), "ranks {'a': 1} is not a list"),
])
def test_slurm_answers_of_another_shape_are_one_line_naming_the_node(
        cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Any, field: str) -> None:
    """Before: ``Infinity`` printed as nan (exit 0) and a rank that was a list exited 4 (AttributeError)."""
    doc = _node_document(cli, tmp_path)
    res = _on_nodes(monkeypatch, {"n1": doc, "n2": _mutated(doc, change)})
    _bad(res, "--slurm: node n2 answered", field)
    assert len(res.stderr.splitlines()) <= 2  # the error line and its hint


# ------------------------------------------------------------------------------ property: Seq, devices, streams

_IDS = st.one_of(st.integers(-(2**70), 2**70), st.sampled_from([2**63 - 1, 2**63, -(2**63), 2**31, -1, 0]),
                 st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6),
                 st.sampled_from(["1" * 25, "-5", "\u00b9", "0x10", None, True, [1], {"a": 1}]))


def _hostile_trace(draw: Any, rank: int) -> dict[str, Any]:
    events = []
    for i in range(draw(st.integers(1, 6))):
        args: dict[str, Any] = {"Collective name": draw(st.sampled_from(["allreduce", "alltoall", "broadcast"])),
                                "Process Group Name": draw(st.sampled_from(["0", "1", "", 7]))}
        for key in ("Seq", "device", "stream", "correlation"):
            if draw(st.booleans()):
                args[key] = draw(_IDS)
        name = draw(st.sampled_from(["ncclDevKernel_AllReduce_Sum_f32_RING_LL", "sm90_gemm", "Memcpy DtoD"]))
        event = {"ph": "X", "cat": "kernel", "name": name, "ts": float(10 * i + draw(st.integers(0, 5))),
                 "dur": float(draw(st.integers(0, 9))), "pid": draw(_IDS), "tid": draw(_IDS), "args": args}
        events.append(event)
    return tb.trace(events, rank=rank)


@st.composite
def _job(draw: Any) -> list[dict[str, Any]]:
    return [_hostile_trace(draw, rank) for rank in range(draw(st.integers(1, 3)))]


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@example(job=[tb.trace([tb.nccl(1.0, 2.0, **SEQ, Seq=2**63 - 1)], rank=r) for r in (0, 1)])
@given(job=_job())
def test_property_seq_devices_and_streams_exit_0_or_2(job: list[dict[str, Any]], tmp_path_factory: Any) -> None:
    """Kineto Seq, device, stream and correlation of every JSON shape: stragglers and overlap end 0 or 2."""
    folder = tmp_path_factory.mktemp("job")
    files = []
    for rank, doc in enumerate(job):
        (folder / f"r{rank}.json").write_text(json.dumps(doc))
        files.append(str(folder / f"r{rank}.json"))
    for command in (["stragglers"], ["overlap"], ["timeline", "-o", str(folder / "t.svg")]):
        res = run_cli("trace", *command, *files, "-j", "1")
        assert res.exit_code in (0, 2), (command, res.exit_code, res.stderr[-800:])
        assert "Traceback" not in res.stderr, res.stderr[-800:]
        if res.exit_code == 2:
            assert res.stderr.startswith("error: "), res.stderr[:300]


def test_a_long_value_is_decoded_a_logarithmic_number_of_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the buffer grew one chunk per try, so a 40 MB distributedInfo was decoded 40 times over (35 s)."""
    import dsctl.trace.scan as scan

    calls = []

    class Counting:
        def raw_decode(self, text: str, pos: int = 0) -> Any:
            calls.append(pos)
            return json.JSONDecoder().raw_decode(text, pos)

    monkeypatch.setattr(scan, "_DECODER", Counting())
    monkeypatch.setattr(scan, "CHUNK_CHARS", 256)
    ranks = ",".join(["0"] * 50_000)  # 100 KB: about 400 chunks
    data = ('{"distributedInfo": {"rank": 0, "pg_config": [{"pg_name": "0", "ranks": [' + ranks + ']}]}, '
            '"traceEvents": []}').encode()
    meta: dict[str, Any] = {}
    assert list(scan.iter_events([data[i:i + 256] for i in range(0, len(data), 256)], "t.json", meta)) == []
    assert len(meta["distributedInfo"]["pg_config"][0]["ranks"]) == 50_000
    assert len(calls) < 30, len(calls)


def test_a_value_over_the_limit_is_refused(cli, tmp_path: Path) -> None:
    from dsctl.trace.scan import MAX_VALUE_CHARS

    ranks = ",".join(["0"] * (MAX_VALUE_CHARS // 2 + (1 << 20)))  # a chunk over: the limit is checked per chunk
    path = tmp_path / "t.json"
    path.write_text('{"distributedInfo": {"pg_config": [{"ranks": [' + ranks + ']}]}, "traceEvents": []}')
    _bad(cli("trace", "overlap", str(path), "-j", "1"), f"over {MAX_VALUE_CHARS:,} characters")
