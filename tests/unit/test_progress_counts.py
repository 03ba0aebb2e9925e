"""Counted progress of the commands that can run over ~2 s (issue 30): each domain function's ``report(done,
total)`` callback is called with counts that never go back and end exactly at the total; ``Stages`` sums stages.

Sizes are small (the counts, not the time, are under test); docs/architecture.md lists the audit of every command.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from dsctl.profiles.schema import ModelProfile, NodeProfile
from dsctl.progress_count import Report, Stages, each

Calls = list[tuple[float, float]]


def record() -> tuple[Calls, Report]:
    calls: Calls = []
    return calls, lambda done, total: calls.append((float(done), float(total)))


def assert_counted(calls: Calls, min_calls: int = 2) -> None:
    """Monotone counts, each within its total, the last one the whole total."""
    assert len(calls) >= min_calls, calls
    dones = [d for d, _ in calls]
    assert dones == sorted(dones), calls
    assert all(0 <= d <= t for d, t in calls), calls
    assert calls[-1][0] == calls[-1][1] > 0, calls[-1]


def test_stages_weigh_each_stage_by_its_share_and_never_go_back() -> None:
    calls, report = record()
    stages = Stages(report, [30, 10])
    first, second = stages.part(0), stages.part(1)
    first(1, 2)  # half of a 30-unit stage: 15 of 40
    first(1, 4)  # the stage's own total grew (a longer search): ignored, never back to 7.5
    second(5, 10)  # 30 + 5
    stages.finish()
    assert calls == [(15.0, 40.0), (35.0, 40.0), (40.0, 40.0)]


def test_a_stage_added_late_grows_the_total_and_keeps_the_count() -> None:
    calls, report = record()
    stages = Stages(report, [10])
    stages.part(0)(10, 10)
    retry = stages.add(10)
    stages.part(retry)(5, 10)
    stages.finish()
    assert calls == [(10.0, 10.0), (15.0, 20.0), (20.0, 20.0)]


def test_a_stage_inserted_before_the_last_moves_the_last_along() -> None:
    """storage chains: a rebuild goes before the files stage; the files part, handed out first, follows it."""
    calls, report = record()
    stages = Stages(report, [10, 5])
    files = stages.part(1)
    stages.part(0)(1, 1)
    rebuild = stages.add(10, before=-1)
    assert rebuild == 1
    stages.part(rebuild)(1, 2)
    files(1, 1)
    stages.finish()
    assert calls == [(10.0, 15.0), (15.0, 25.0), (25.0, 25.0), (25.0, 25.0)]


def test_each_reports_every_nth_item_and_the_last() -> None:
    calls, report = record()
    tick = each(report, 10, every=4)
    for i in range(1, 11):
        tick(i)
    assert calls == [(4.0, 10.0), (8.0, 10.0), (10.0, 10.0)]
    each(None, 10)(10)  # no callback: nothing to call, no error


def test_storage_chains_counts_the_design_search_then_the_chains_ordered() -> None:
    from dsctl.storage import api
    from dsctl.storage.chaintable import IdScheme

    calls, report = record()
    result = api.generate_chains(40, 16, 3, None, 1, IdScheme(10001, 1, 9), report=report)
    assert result.num_nodes == 40
    assert_counted(calls, min_calls=5)
    assert len({t for _, t in calls}) == 1  # one total, unless a rebuild adds a stage (not at 40 nodes)


def test_storage_chains_rebuild_adds_to_the_total_and_still_ends_there(monkeypatch: pytest.MonkeyPatch) -> None:
    """A table over the redirect limit is rebuilt with more targets per SSD: a stage appended, counts monotone."""
    from dsctl.storage import api
    from dsctl.storage.chaintable import IdScheme

    monkeypatch.setattr(api, "REDIRECT_LIMIT", 0.5)  # every table is "over": every fallback is tried
    calls, report = record()
    api.generate_chains(20, 4, 3, None, 1, IdScheme(10001, 1, 9), report=report)
    assert_counted(calls)
    assert len({t for _, t in calls}) > 1


def test_rotate_chains_counts_every_ordering_pass() -> None:
    import numpy as np

    from dsctl.storage.layout import rotate_chains

    rows = np.array([[0, 1, 2], [1, 2, 3], [0, 2, 3]] * 3000, dtype=np.int64)  # 9,000 chains, 2 passes
    calls, report = record()
    rotate_chains(rows, 4, report=report)
    assert_counted(calls)
    assert calls[-1] == (18_000.0, 18_000.0)


def _plan(nodes: int) -> tuple[str, list[tuple[str, str]]]:
    """plan.json of an MPFT plan and its expected ibnetdiscover dumps (name, text), one per plane."""
    from dsctl.profiles.loader import ProfileStore
    from dsctl.topology.api import make_spec, plan_files
    from dsctl.topology.plan import build_plan
    from dsctl.topology.summary import summarize

    store = ProfileStore()
    plan = build_plan(make_spec("mpft", nodes, store.node("h800-hgx"), store.switch("ib-ndr-64")))
    files = plan_files(plan, summarize(plan))
    return files["plan.json"], sorted((n, t) for n, t in files.items() if n.endswith(".ibnet"))


def test_topology_verify_counts_dump_characters_then_links() -> None:
    from dsctl.topology.api import verify_texts

    plan_json, dumps = _plan(64)
    calls, report = record()
    result = verify_texts(plan_json, dumps, "plan.json", report=report)
    assert result.matched_cables == result.expected_cables and not result.findings
    assert_counted(calls, min_calls=len(dumps) + 2)
    chars = sum(len(t) for _, t in dumps)
    assert calls[-1][1] == 2 * chars  # parse and check weigh the characters of the dumps alike
    assert (len(dumps[0][1]), 2 * chars) in calls and (chars, 2 * chars) in calls  # each dump parsed


def test_ibnetdiscover_parser_counts_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    from dsctl.topology import observed

    monkeypatch.setattr(observed, "REPORT_EVERY_LINES", 100)
    _, dumps = _plan(64)
    dump = dumps[0][1]
    calls, report = record()
    observed.parse_ibnetdiscover(dump, "dump", report=report)
    lines = len(dump.splitlines())
    assert_counted(calls, min_calls=lines // 100)
    assert calls[-1] == (lines, lines) and calls[0] == (100, lines)


FAKE_SRUN = '''#!{python}
import os, subprocess, sys
sys.path.insert(0, {root!r})
from dsctl.cluster.hostlist import expand
from tests.fake_srun import labelled
args = sys.argv[1:]
cut = args.index("sh")
nodes = expand(next(a.split("=", 1)[1] for a in args[:cut] if a.startswith("--nodelist=")))
outputs = {{t: subprocess.run(args[cut:], env={{**os.environ, "SLURMD_NODENAME": node}}, capture_output=True,
                              stdin=subprocess.DEVNULL).stdout for t, node in enumerate(nodes)}}
sys.stdout.buffer.write(labelled(outputs))
'''


def test_fleet_runs_count_the_nodes_answered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """health fleet and trace --slurm: one count per node answered, ending at the node count (fake srun)."""
    from dsctl.runners.fleet import run_on_nodes

    root = Path(__file__).resolve().parents[2]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(FAKE_SRUN.format(python=sys.executable, root=str(root)))
    (bin_dir / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    calls, report = record()
    run = run_on_nodes(["n1", "n2", "n3"], ["echo", '{"ok": true}'], check_states=False,
                       report=report)
    assert [a.document for a in run.answers] == [{"ok": True}] * 3, run.answers
    assert_counted(calls, min_calls=3)
    assert calls[0] == (0.0, 3.0) and calls[-1] == (3.0, 3.0)


def _v2_lite() -> tuple[ModelProfile, NodeProfile]:
    from dsctl.profiles.loader import ProfileStore

    store = ProfileStore()
    return store.model("deepseek-v2-lite"), store.node("h800-hgx")


def test_launch_search_counts_the_layouts_predicted() -> None:
    from dsctl.launch.plan import plan_launch
    from dsctl.launch.request import LaunchRequest
    from dsctl.launch.search import SearchOptions

    model, node = _v2_lite()
    calls, report = record()
    plan = plan_launch(model, node, LaunchRequest(num_nodes=2), search=SearchOptions(),
                       progress=report)
    assert plan.layout.world_size == 16
    assert_counted(calls, min_calls=10)  # one count per layout predicted (dozens for V2-Lite on 2 nodes)


@pytest.mark.slow
def test_launch_node_range_counts_each_count_searched() -> None:
    from dsctl.launch.request import LaunchRequest
    from dsctl.launch.search import SearchOptions
    from dsctl.launch.sweep import plan_node_range, sweep_counts

    model, node = _v2_lite()
    calls, report = record()
    plan_node_range(model, node, LaunchRequest(num_nodes=2), SearchOptions(), 2, 3, None, None, 2.0,
                    progress=report)
    assert_counted(calls, min_calls=20)
    counts = len(sweep_counts(2, 3))
    assert calls[-1] == (counts + 1, counts + 1)  # one unit per count searched, one for the final plan
    assert any(d == 1 for d, _ in calls)  # the first count's search ends at 1


def _read_all(path: Path, max_bytes: int) -> int:
    from dsctl.runners.trace_files import open_chunks

    return sum(len(chunk) for chunk in open_chunks(path, max_bytes))


def test_one_large_trace_counts_its_bytes_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """trace overlap/stragglers/timeline on one file: the bar moves with the bytes read, not 0 of 1 then 1 of 1."""
    from dsctl.runners import trace_files

    monkeypatch.setattr(trace_files, "CHUNK_BYTES", 1000)
    path = tmp_path / "rank0.json"
    path.write_bytes(b"x" * 10_000)
    calls, report = record()
    assert trace_files.run_per_file(_read_all, [(path, 10**6)], 1, report) == [10_000]
    assert_counted(calls, min_calls=11)
    assert calls[0] == pytest.approx((0.09, 1.0)) and calls[-2] == pytest.approx((0.9, 1.0))
    assert calls[-1] == (1.0, 1.0)


def test_many_traces_count_the_files(tmp_path: Path) -> None:
    from dsctl.runners import trace_files

    paths = [tmp_path / f"rank{i}.json" for i in range(3)]
    for p in paths:
        p.write_bytes(b"{}")
    calls, report = record()
    trace_files.run_per_file(_read_all, [(p, 10**6) for p in paths], 2, report)
    assert calls == [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)]
