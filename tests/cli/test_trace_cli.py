"""dsctl trace overlap through the real entry point: exit codes, JSON keys, SVG output, error lines."""

from __future__ import annotations

import xml.dom.minidom
from pathlib import Path
from typing import Any

import trace_builder as tb  # tests/trace_builder.py (tests/ is on sys.path via its conftest)

from tests.cli.refused import assert_refused

DATA = Path(__file__).resolve().parents[1] / "data" / "trace"
GLOO = [DATA / "gloo_rank0.json.gz", DATA / "gloo_rank1.json.gz"]
RANK_KEYS = {"source", "rank", "device", "basis", "steps", "wall_us", "compute_busy_us", "comm_busy_us",
             "overlapped_us", "exposed_comm_us", "compute_only_us", "idle_us", "overlap_ratio",
             "exposed_comm_fraction", "collectives", "streams", "per_step", "num_events", "notes", "categories",
             "top_kernels"}


def _write(tmp_path: Path, name: str, doc: object, gz: bool = False) -> Path:
    path = tmp_path / name
    path.write_bytes(tb.encode(doc, gz=gz))
    return path


def _bad(result: Any, *needles: str) -> None:
    assert_refused(result, *needles, first_line=True)


def test_json_keys_for_the_recorded_gloo_ranks(cli) -> None:
    result = cli("trace", "overlap", *GLOO, "--format", "json")
    assert result.exit_code == 0, result.stderr
    data = result.json()
    assert data["dsctl"]["command"] == "trace overlap"
    assert set(data) == {"dsctl", "steps", "comm_patterns", "compute_patterns", "ranks", "worst_rank", "spread",
                         "worst_ranks", "notes", "unreachable_nodes"}
    assert [r["rank"] for r in data["ranks"]] == [0, 1]
    assert set(data["ranks"][0]) == RANK_KEYS
    assert set(data["ranks"][0]["collectives"][0]) == {"name", "count", "total_us", "exposed_us", "mean_us"}
    assert set(data["worst_rank"]) == {"rank", "device", "source", "exposed_comm_us", "overlap_ratio",
                                       "exposed_comm_fraction"}


def test_table_output_and_svg(cli, tmp_path: Path) -> None:
    svg = tmp_path / "overlap.svg"
    result = cli("trace", "overlap", *GLOO, "--svg", svg, "--all-steps")
    assert result.exit_code == 0, result.stderr
    assert "Compute / communication overlap" in result.stdout and "most exposed communication: rank" in result.stdout
    assert "gloo:all_reduce" in result.stdout and "per step" in result.stdout
    assert "no GPU kernels" in result.stdout
    text = svg.read_text()
    assert text.startswith("<svg") and text.count("exposed communication") >= 3 and "rank 1 cpu" in text
    assert text.count("ProfilerStep#") == 6  # a step marker per step and rank
    assert f"wrote {svg}" in result.stderr


def test_synthetic_gpu_trace_hidden_vs_exposed(cli, tmp_path: Path) -> None:
    hidden = _write(tmp_path, "r0.json.gz", tb.trace([tb.compute(0, 100), tb.nccl(20, 40)], rank=0), gz=True)
    exposed = _write(tmp_path, "r1.json", tb.trace([tb.compute(0, 50), tb.nccl(50, 30), tb.compute(80, 20)], rank=1))
    data = cli("trace", "overlap", hidden, exposed, "-f", "json").json()
    r0, r1 = data["ranks"]
    assert (r0["exposed_comm_us"], r0["overlap_ratio"]) == (0, 1.0)
    assert (r1["exposed_comm_us"], r1["overlap_ratio"]) == (30, 0.0)
    assert data["worst_rank"]["rank"] == 1


def test_step_selection_and_comm_patterns(cli, tmp_path: Path) -> None:
    doc = tb.trace([tb.step(1, 0, 50), tb.step(2, 50, 50), tb.compute(0, 40), tb.kernel("my_a2a", 10, 20),
                    tb.compute(50, 10), tb.nccl(60, 20)])
    path = _write(tmp_path, "t.json", doc)
    data = cli("trace", "overlap", path, "--step", "2", "-f", "json").json()
    assert data["steps"] == "2" and data["ranks"][0]["steps"] == [2]
    assert data["ranks"][0]["exposed_comm_us"] == 20
    data = cli("trace", "overlap", path, "--step", "1", "--add-comm-pattern", "^my_a2a", "-f", "json").json()
    assert data["ranks"][0]["comm_busy_us"] == 20 and data["ranks"][0]["overlapped_us"] == 20
    assert data["comm_patterns"][0] == "^my_a2a"
    data = cli("trace", "overlap", path, "--comm-pattern", "^my_a2a", "-f", "json").json()
    assert data["comm_patterns"] == ["^my_a2a"]
    assert data["ranks"][0]["comm_busy_us"] == 20  # the NCCL kernel is compute now


def test_bad_inputs_exit_2_naming_the_file_or_option(cli, tmp_path: Path) -> None:
    good = _write(tmp_path, "good.json", tb.trace([tb.compute(0, 10)]))
    notjson = tmp_path / "notjson.json"
    notjson.write_text("hello")
    _bad(cli("trace", "overlap", notjson), str(notjson), "not valid JSON")
    _bad(cli("trace", "overlap", _write(tmp_path, "empty.json", {"traceEvents": []})), "empty.json", "no complete")
    _bad(cli("trace", "overlap", _write(tmp_path, "other.json", {"a": 1})), "other.json", "not a Chrome trace")
    _bad(cli("trace", "overlap", tmp_path / "missing.json"), "missing.json", "file not found")
    _bad(cli("trace", "overlap", tmp_path), "is a folder")
    _bad(cli("trace", "overlap", good, "--comm-pattern", "(["), "--comm-pattern", "regular expression")
    _bad(cli("trace", "overlap", good, "--step", "3"), "--step 3", "good.json")
    _bad(cli("trace", "overlap", good, "--step", "1", "--all-steps"), "--step and --all-steps")
    _bad(cli("trace", "overlap", good, "--svg", tmp_path / "nowhere" / "x.svg"), "--svg", "does not exist")


def test_deeply_nested_json_is_bad_input(cli, tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    _bad(cli("trace", "overlap", path), "deep.json")


def test_no_partial_svg_on_error(cli, tmp_path: Path) -> None:
    svg = tmp_path / "x.svg"
    bad = _write(tmp_path, "bad.json", {"traceEvents": []})
    _bad(cli("trace", "overlap", bad, "--svg", svg))
    assert not svg.exists()


def test_many_ranks_show_details_for_the_worst_only(cli, tmp_path: Path) -> None:
    paths = []
    for rank in range(6):
        comm = tb.nccl(50, 10 * (rank + 1))  # rank 5 has the most exposed communication
        paths.append(_write(tmp_path, f"r{rank}.json", tb.trace([tb.compute(0, 50), comm], rank=rank)))
    result = cli("trace", "overlap", *paths)
    assert result.exit_code == 0, result.stderr
    assert "most exposed communication: rank 5" in result.stdout
    assert "details below for the rank with the most exposed communication only" in result.stdout
    assert "rank 5 gpu0: communication by collective" in result.stdout
    assert "rank 0 gpu0: communication by collective" not in result.stdout


def test_yaml_and_duplicate_rank_refused(cli, tmp_path: Path) -> None:
    a = _write(tmp_path, "a.json", tb.trace([tb.compute(0, 10)], rank=0))
    b = _write(tmp_path, "b.json", tb.trace([tb.compute(0, 10)], rank=0))
    c = _write(tmp_path, "c.json", tb.trace([tb.compute(0, 10)], rank=1))
    result = cli("trace", "overlap", a, c, "-f", "yaml")
    assert result.exit_code == 0, result.stderr
    assert "exposed_comm_us: 0.0" in result.stdout and "overlap_ratio: null" in result.stdout
    twice = cli("trace", "overlap", a, b)
    assert twice.exit_code == 2 and "rank 0 appears in 2 files" in twice.stderr
    assert "a.json" in twice.stderr and "b.json" in twice.stderr
    table = cli("trace", "overlap", a)
    assert "n/a" in table.stdout  # no communication: no overlap ratio


def test_tables_keep_every_number_and_name_whole_at_80_columns(cli, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    out = cli("trace", "overlap", *map(str, GLOO), "--all-steps").stdout
    for number in ("106.248", "106.566", "36.066", "58.8%", "33.8%", "31.275"):
        assert number in out
    assert "…" not in out and max(len(line) for line in out.splitlines()) <= 80
    ep = _write(tmp_path, "ep.json", tb.ep_step(overlapped=True))
    out = cli("trace", "overlap", str(ep)).stdout
    assert "…" not in out and "deep_ep::intranode" in out


def test_event_with_overflowing_times_is_skipped_without_a_numpy_warning(cli, tmp_path: Path, recwarn) -> None:
    path = _write(tmp_path, "huge.json", tb.trace([tb.compute(1e308, 1e308)]))
    result = cli("trace", "overlap", str(path))
    _bad(result, "skipped 1 with bad ts")
    assert "encountered" not in result.stderr
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_negative_durations_are_named_when_nothing_is_left(cli, tmp_path: Path) -> None:
    _bad(cli("trace", "overlap", str(_write(tmp_path, "neg.json", tb.trace([tb.compute(5.0, -1.0)])))),
         "skipped 1 with negative dur")


def test_empty_comm_pattern_is_refused(cli) -> None:
    _bad(cli("trace", "overlap", str(GLOO[0]), "--comm-pattern", ""), "--comm-pattern ''", "matches every event")


def test_svg_on_an_unwritable_file_system_exits_2(cli) -> None:
    _bad(cli("trace", "overlap", str(GLOO[0]), "--svg", "/proc/overlap.svg"), "--svg /proc/overlap.svg", "cannot write")


def test_many_ranks_by_glob_in_a_process_pool(cli, tmp_path: Path) -> None:
    for r, doc in enumerate(tb.job(64, {17: 1.35, 42: 1.2}, num_collectives=12)):
        _write(tmp_path, f"rank{r}.json.gz" if r % 2 else f"rank{r}.json", doc, gz=bool(r % 2))
    data = cli("trace", "stragglers", str(tmp_path / "rank*.json*"), "--jobs", "2", "-f", "json").json()
    assert data["num_ranks"] == 64 and [s["rank"] for s in data["stragglers"]] == [17]
    assert data["critical_ranks"][0]["rank"] == 17
    data = cli("trace", "overlap", str(tmp_path / "rank*.json*"), "-j", "2", "-f", "json").json()
    assert [r["rank"] for r in data["ranks"]] == list(range(64))  # natural order: rank10 after rank9
    spread = data["spread"]["exposed_comm_us"]
    assert spread["min"] <= spread["median"] <= spread["p95"] <= spread["max"] and spread["num_ranks"] == 64
    assert len(data["worst_ranks"]) == 8
    table = cli("trace", "overlap", str(tmp_path / "rank*.json*"), "-j", "2")
    assert table.exit_code == 0 and "Across 64 ranks" in table.stdout and "the 8 most exposed of 64" in table.stdout
    table = cli("trace", "stragglers", str(tmp_path / "rank*.json*"), "-j", "1")
    assert table.exit_code == 0 and "Stragglers" in table.stdout and "Critical path" in table.stdout


def test_explain_classes_lists_every_name(cli, tmp_path: Path) -> None:
    path = _write(tmp_path, "t.json", tb.ep_step(True))
    data = cli("trace", "overlap", path, "--explain-classes", "-f", "json").json()
    assert {r["name"]: r["cls"] for r in data["names"]} == {
        "sm90_xmma_gemm_bf16bf16_bf16f32": "compute", "deep_ep::intranode::dispatch<8, 768, 6144>": "comm",
        "deep_ep::intranode::combine<8, 768, 4096>": "comm"}
    forced = cli("trace", "overlap", path, "--explain-classes", "--compute-pattern", "combine", "-f", "json").json()
    assert {r["rule"] for r in forced["names"]} == {"default", "deepep-data", "--compute-pattern"}
    assert cli("trace", "overlap", path, "--explain-classes").exit_code == 0


def test_timeline_per_rank_and_stream(cli, tmp_path: Path) -> None:
    doc = tb.trace([tb.step(1, 0, 100), tb.step(2, 100, 100), tb.compute(0, 50, correlation=1), tb.launch(0, 1),
                    tb.nccl(20, 40, correlation=2), tb.launch(1, 2),
                    tb.kernel("Memset (Device)", 60, 5, cat="gpu_memset", correlation=3), tb.launch(2, 3),
                    tb.compute(120, 30, correlation=4), tb.launch(110, 4)], rank=3)
    path = _write(tmp_path, "r3.json", doc)
    svg = tmp_path / "tl.svg"
    result = cli("trace", "timeline", path, "--out", svg, "--step", "1", "--from-us", "10", "--to-us", "70")
    assert result.exit_code == 0, result.stderr
    text = svg.read_text()
    xml.dom.minidom.parseString(text)
    assert "rank 3 gpu0 stream 7" in text and "rank 3 gpu0 stream 20" in text
    assert all(f"<title>{c}</title>" in text for c in ("computation", "communication", "memory"))
    assert "ProfilerStep#1, 10-70 us" in text
    assert "ms from window start" in text and ">0.05</text>" in text  # 60 us drawn: ticks every 10 us
    _bad(cli("trace", "timeline", path, "--out", svg, "--step", "9"), "--step 9")
    _bad(cli("trace", "timeline", path, "--out", svg, "--from-us", "5000"), "--from-us/--to-us")
    _bad(cli("trace", "timeline", path, "--out", svg, "--from-us", "5", "--to-us", "2"),
         "--to-us must be after --from-us")


def test_slurm_option_errors_without_a_cluster(cli, tmp_path: Path) -> None:
    _bad(cli("trace", "overlap", "x.json", "--slurm"), "--slurm and -w/--nodelist go together")
    _bad(cli("trace", "overlap", "x.json", "--slurm", "-w", "n1", "--svg", tmp_path / "a.svg"),
         "--slurm reports the overlap table only")


def test_node_placeholder_is_this_nodes_name(cli, tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "gpu07"
    folder.mkdir()
    _write(folder, "r0.json", tb.trace([tb.compute(0, 10)], rank=0))
    monkeypatch.setenv("SLURMD_NODENAME", "gpu07")
    data = cli("trace", "overlap", str(tmp_path / "{node}" / "*.json"), "-f", "json").json()
    assert data["ranks"][0]["source"].endswith("gpu07/r0.json")
    monkeypatch.setenv("SLURMD_NODENAME", "../etc")
    _bad(cli("trace", "overlap", str(tmp_path / "{node}" / "*.json")), "cannot fill {node}")
