"""The srun fan-out runner's parsing and classification (no Slurm needed; the e2e tests run it for real)."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.runners.fleet import (
    MAX_LINE_CHARS,
    MAX_OUTPUT_BYTES,
    LabelledOutput,
    TaskOutput,
    assemble,
    classify,
    expand_hostlist,
    parse_labelled,
    parse_sinfo_states,
    srun_argv,
    srun_errors,
    unique_names,
    usable,
)
from dsctl.runners.fleet import _run_bounded as _run_bounded

TOKEN = "@@dsctl-fleet-0123456789abcdef"


def labelled(task: int, width: int, lines: list[str]) -> list[str]:
    return [f"{task:>{width}}: {line}" for line in lines]


def task_lines(node: str, body: list[str], exit_code: int | None) -> list[str]:
    out = [f"{TOKEN} node={node}", *body]
    if exit_code is not None:
        out += ["", f"{TOKEN} exit={exit_code}"]
    return out


def test_labelled_output_splits_per_task_and_drops_the_wrapper_lines() -> None:
    stdout = "\n".join([
        *labelled(0, 2, task_lines("n1", ['{"a": 1,', ' "b": 2}'], 0)),
        *labelled(11, 2, task_lines("n12", ["{}"], 1)),
    ])
    tasks = parse_labelled(stdout, " 11: warning: slow\n", TOKEN)
    assert tasks[0].node == "n1" and tasks[0].stdout == ['{"a": 1,', ' "b": 2}'] and tasks[0].exit_code == 0
    assert tasks[11].node == "n12" and tasks[11].exit_code == 1 and tasks[11].stderr == ["warning: slow"]


body_line = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=40)


@given(st.lists(st.tuples(st.lists(body_line, max_size=6), st.one_of(st.none(), st.integers(0, 255))),
                min_size=1, max_size=12),
       st.randoms(use_true_random=False))
def test_interleaved_task_lines_parse_back(per_task: list[tuple[list[str], int | None]], rnd: random.Random) -> None:
    width = len(str(len(per_task) - 1))
    streams = [labelled(i, width, task_lines(f"n{i + 1}", body, code)) for i, (body, code) in enumerate(per_task)]
    merged: list[str] = []
    while any(streams):  # srun interleaves whole lines of different tasks, each task's lines stay in order
        pick = rnd.choice([s for s in streams if s])
        merged.append(pick.pop(0))
    tasks = parse_labelled("\n".join(merged) + "\n", "", TOKEN)
    for i, (body, code) in enumerate(per_task):
        got = tasks[i]
        assert got.node == f"n{i + 1}" and got.exit_code == code
        assert got.stdout == (body if code is not None else [*body])


def test_lines_before_the_header_and_after_the_trailer_are_ignored() -> None:
    stdout = "\n".join(labelled(0, 1, ["motd noise", *task_lines("n1", ["{}"], 0), "late"]))
    task = parse_labelled(stdout, "", TOKEN)[0]
    assert task.stdout == ["{}"] and task.exit_code == 0


def test_a_forged_trailer_with_another_token_is_content() -> None:
    stdout = "\n".join(labelled(0, 1, task_lines("n1", ["@@dsctl-fleet-ffff exit=0", "x"], None)))
    task = parse_labelled(stdout, "", TOKEN)[0]
    assert task.exit_code is None and task.stdout == ["@@dsctl-fleet-ffff exit=0", "x"]


def answer(task: TaskOutput | None, ok: tuple[int, ...] = (0, 1)) -> tuple[bool, str]:
    got = classify("n1", task, timeout_s=30, ok_exit_codes=ok)
    return got.answered, got.reason


@pytest.mark.parametrize(("task", "expected"), [
    (TaskOutput("n1", ['{"x": 1}'], [], 0), (True, "")),
    (TaskOutput("n1", ['{"x": 1}'], [], 1), (True, "")),
    (None, (False, "the srun task never started on this node")),
    (TaskOutput("n1", ['{"x"'], [], None), (False, "no answer within 30 s (the srun step was stopped)")),
    (TaskOutput("n1", [], [], 124), (False, "no answer within 30 s (killed on the node)")),
    (TaskOutput("n1", [], ["Traceback", "error: NVML is not usable"], 3),
     (False, "exit 3: error: NVML is not usable")),
    (TaskOutput("n1", ["sh: dsctl: not found"], [], 127), (False, "exit 127")),
    (TaskOutput("n1", ["PASS"], [], 0), (False, "output is not JSON: 'PASS'")),
    (TaskOutput("n1", [], [], 0), (False, "output is not JSON: '(nothing)'")),
    (TaskOutput("n1", ["[1, 2]"], [], 0), (False, "output is JSON list, not an object")),
    (TaskOutput("n1", ["[" * 100_000], [], 0), (False, "output is not JSON: '" + "[" * 60 + "'")),
    (TaskOutput("n1", ["{}"], [], 0, MAX_OUTPUT_BYTES + 1), (False, f"output over {MAX_OUTPUT_BYTES} bytes")),
])
def test_classify(task: TaskOutput | None, expected: tuple[bool, str]) -> None:
    assert answer(task) == expected


def test_srun_reason_names_the_node_that_failed_to_launch() -> None:
    stderr = ("srun: error: Task launch for StepId=3.0 failed on node n4: Socket timed out on send/recv operation\n"
              "srun: error: n2: task 1: Exited with exit code 3\n")
    assert srun_errors(stderr) == {"n4": "Socket timed out on send/recv operation", "n2": "Exited with exit code 3"}
    tasks = {0: TaskOutput("n1", ["{}"], [], 0)}
    got = assemble(["n1", "n4"], tasks, stderr, timeout_s=10, ok_exit_codes=(0,))
    assert [(a.node, a.answered, a.reason) for a in got] == [
        ("n1", True, ""), ("n4", False, "srun: Socket timed out on send/recv operation")]


def test_task_order_does_not_matter_only_the_header() -> None:
    tasks = {0: TaskOutput("n2", ['{"n": 2}'], [], 0), 1: TaskOutput("n1", ['{"n": 1}'], [], 0)}
    got = assemble(["n1", "n2"], tasks, "", timeout_s=10, ok_exit_codes=(0,))
    assert [a.document for a in got] == [{"n": 1}, {"n": 2}]


def test_sinfo_states_and_usable() -> None:
    text = "n1 idle none\nn2 drained dsctl G6 crit gpu3\nn3 idle* none\nn1 idle none\nn4 mixed none\n"
    states = parse_sinfo_states(text)
    assert states == {"n1": ("idle", ""), "n2": ("drained", "dsctl G6 crit gpu3"), "n3": ("idle*", ""),
                      "n4": ("mixed", "")}
    assert [usable(s) for s, _ in states.values()] == [True, False, False, True]


def test_srun_argv_runs_one_task_per_node_under_the_wrapper() -> None:
    argv = srun_argv("/usr/bin/srun", ["n1", "n2", "n3"], ["dsctl", "health", "check"], token=TOKEN, timeout_s=30,
                     launch_timeout_s=60, partition="gpu", job_name="dsctl-fleet")
    assert argv[:3] == ["/usr/bin/srun", "--job-name=dsctl-fleet", "--nodes=3"]
    for flag in ("--ntasks=3", "--ntasks-per-node=1", "--nodelist=n[1-3]", "--label", "--kill-on-bad-exit=0",
                 "--immediate=60", "--time=2", "--partition=gpu"):
        assert flag in argv
    assert argv[-6:] == ["sh", TOKEN, "30", "dsctl", "health", "check"]


def test_node_names_are_plain_and_unique() -> None:
    assert unique_names(["n1", "n2", "n1"]) == ["n1", "n2"]
    for bad in ("n[1-2]", "a b", "-x", "$(reboot)", "x" * 65, ""):
        with pytest.raises(InputError):
            unique_names([bad])


def test_json_document_with_every_value_kind_roundtrips() -> None:
    doc = {"s": "ü", "n": None, "f": 1.5, "l": [1, {"k": True}]}
    task = TaskOutput("n1", json.dumps(doc, indent=2).splitlines(), [], 0)
    assert classify("n1", task, timeout_s=1, ok_exit_codes=(0,)).document == doc


def test_expand_hostlist_is_bounded_without_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """dsctl's own grammar: the same answer whether or not scontrol is on PATH or configured (before, this test
    passed only where an earlier e2e run had left /etc/slurm/slurm.conf behind)."""
    failing = tmp_path / "scontrol"
    failing.write_text("#!/bin/sh\necho 'scontrol: fatal: Could not establish a configuration source' >&2\nexit 1\n")
    failing.chmod(0o755)
    for path in (str(tmp_path), ""):  # a Slurm client that is not configured; no Slurm at all
        monkeypatch.setenv("PATH", path)
        assert expand_hostlist("n[1-3],gpu[08-09],n2") == ["n1", "n2", "n3", "gpu08", "gpu09"]
        with pytest.raises(InputError, match="more than 65,536 names"):
            expand_hostlist("a[1-65536],b[1-65536]")
        for bad in ("n[1-99999999]", "", "n[1-2],/x"):
            with pytest.raises(InputError):
                expand_hostlist(bad)


def test_bounded_run_stops_a_silent_process_and_keeps_what_it_printed() -> None:
    parser = LabelledOutput(TOKEN)
    script = f'echo " 0: {TOKEN} node=n1"; echo " 0: {{}}"; echo " 0: oops" >&2; echo "srun: error: x" >&2; sleep 30'
    start = time.monotonic()
    code, stopped = _run_bounded(["sh", "-c", script], 0.5, parser)
    assert stopped and code is not None and time.monotonic() - start < 10
    task = parser.tasks[0]
    assert (task.node, task.stdout, task.stderr, task.exit_code) == ("n1", ["{}"], ["oops"], None)
    assert parser.srun_lines == ["srun: error: x"]


def test_an_endless_line_marks_its_node_over_the_limit() -> None:
    parser = LabelledOutput(TOKEN)
    script = (f'echo " 0: {TOKEN} node=n1"; printf " 0: "; head -c {MAX_LINE_CHARS * 3} /dev/zero | tr "\\0" x; '
              f'echo; echo " 0: "; echo " 0: {TOKEN} exit=0"')
    code, stopped = _run_bounded(["sh", "-c", script], 30, parser)
    assert (code, stopped) == (0, False)
    task = parser.tasks[0]
    assert task.exit_code == 0 and task.num_bytes > MAX_OUTPUT_BYTES
    assert classify("n1", task, timeout_s=30, ok_exit_codes=(0,)).reason == f"output over {MAX_OUTPUT_BYTES} bytes"


def test_stderr_keeps_the_last_lines_of_each_task() -> None:
    parser = LabelledOutput(TOKEN)
    for i in range(100):
        parser.stderr_line(f"3: line {i}")
    assert parser.tasks[3].stderr == [f"line {i}" for i in range(80, 100)]


def test_nodes_answer_one_line_and_old_indented_answers_still_parse() -> None:
    """The wrapper makes a node's dsctl print one line (DSCTL_JSON_INDENT=0); an older dsctl's indented answer
    (a thousand lines and more) gives the same document."""
    from dsctl.runners.fleet import WRAPPER, WRAPPER_WITH_INPUT

    assert all("DSCTL_JSON_INDENT=0 timeout" in w for w in (WRAPPER, WRAPPER_WITH_INPUT))
    doc = {"findings": [{"check": "gpu", "severity": "OK", "subject": f"gpu{i}", "message": "ü"} for i in range(300)]}
    for text in (json.dumps(doc, ensure_ascii=False), json.dumps(doc, indent=2)):
        parser = LabelledOutput(TOKEN)
        for line in [f"0: {TOKEN} node=n1", *(f"0: {ln}" for ln in text.split("\n")), "0: ", f"0: {TOKEN} exit=0"]:
            parser.stdout_line(line)
        assert classify("n1", parser.tasks[0], timeout_s=1, ok_exit_codes=(0,)).document == doc


def test_a_one_line_answer_longer_than_a_stderr_line_is_read_whole() -> None:
    """A compact answer is one stdout line: up to the per-node output limit it is an answer, not "over the limit"
    (stderr lines are still cut at MAX_STDERR_LINE_CHARS)."""
    from dsctl.runners.fleet import MAX_STDERR_LINE_CHARS

    value = "x" * (MAX_STDERR_LINE_CHARS * 2)
    script = (f'echo " 0: {TOKEN} node=n1"; printf \' 0: {{"v": "\'; head -c {len(value)} /dev/zero | tr "\\0" x; '
              f'echo \'"}}\'; echo " 0: "; echo " 0: {TOKEN} exit=0"')
    parser = LabelledOutput(TOKEN)
    code, stopped = _run_bounded(["sh", "-c", script], 30, parser)
    assert (code, stopped) == (0, False)
    assert classify("n1", parser.tasks[0], timeout_s=30, ok_exit_codes=(0,)).document == {"v": value}
