"""A node's answer read back from srun's output as the real srun delivers it: long lines cut into labelled pieces of
at most 1,024 bytes, a cut anywhere (inside a UTF-8 character too). Issue 32: joining the pieces with newlines put a
newline inside a JSON string of every one-line answer, and every node of a real Slurm run was unreachable ("output
is not JSON") while the fake srun of the tests, which printed a line whole, passed."""

from __future__ import annotations

import io
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.runners.fleet import (
    MAX_LINE_CHARS,
    SRUN_MESSAGE_BYTES,
    LabelledOutput,
    answer_text,
    classify,
)
from dsctl.runners.fleet import _pump as _pump
from dsctl.runners.fleet import _run_bounded as _run_bounded
from tests.fake_srun import labelled, messages, wrapper_output

TOKEN = "@@dsctl-fleet-0123456789abcdef"
#: real srun (Slurm 22.05.8, emulated nodes n1 and n2) running the fleet wrapper with TOKEN; both nodes print
#: RECORDED_DOC(node), n1 as one line (its first cut falls inside an "é"), n2 indented
RECORDING = Path(__file__).resolve().parents[1] / "data" / "fleet" / "srun_cut_lines.out"


def recorded_doc(node: str) -> dict[str, Any]:
    return {"node": node, "pad": "x" * 993, "text": "é" * 400, "n": list(range(100))}


def per_task(stdout: bytes) -> dict[int, list[bytes]]:
    lines: dict[int, list[bytes]] = defaultdict(list)
    for line in stdout.split(b"\n")[:-1]:
        label, _, rest = line.partition(b": ")
        lines[int(label)].append(rest)
    return dict(lines)


def read_back(stdout: bytes) -> LabelledOutput:
    """The runner's own reading of srun's stdout (``_pump`` as ``_run_bounded`` runs it)."""
    parser = LabelledOutput(TOKEN)
    _pump(io.BytesIO(stdout), parser.stdout_line, MAX_LINE_CHARS, "surrogateescape")
    return parser


def test_the_recording_cuts_a_one_line_answer_inside_a_character() -> None:
    """The recording has what broke the runner (so the next test can fail): n1's answer in three pieces, the
    second starting with the continuation byte of a cut "é"."""
    lines = per_task(RECORDING.read_bytes())
    assert len(lines[0]) == 6 and [len(p) for p in lines[0][1:3]] == [SRUN_MESSAGE_BYTES] * 2
    assert lines[0][1].endswith(b"\xc3") and lines[0][2].startswith(b"\xa9")


def test_answers_cut_by_the_real_srun_read_back_whole() -> None:
    parser = LabelledOutput(TOKEN)
    code, stopped = _run_bounded(["cat", str(RECORDING)], 30, parser)
    assert (code, stopped) == (0, False)
    by_node = {task.node: task for task in parser.tasks.values()}
    for node in ("n1", "n2"):
        answer = classify(node, by_node[node], timeout_s=30, ok_exit_codes=(0,))
        assert answer.document == recorded_doc(node), answer.reason


def test_the_fake_srun_cuts_lines_as_the_real_one_does() -> None:
    """tests/fake_srun.py (the unit tests' and benchmarks' srun) gives each task the recording's very bytes."""
    outputs = {0: wrapper_output(TOKEN, "n1", (json.dumps(recorded_doc("n1"), ensure_ascii=False,
                                                          separators=(",", ":")) + "\n").encode()),
               1: wrapper_output(TOKEN, "n2", (json.dumps(recorded_doc("n2"), ensure_ascii=False, indent=2)
                                               + "\n").encode())}
    assert per_task(labelled(outputs)) == per_task(RECORDING.read_bytes())
    assert list(messages(b"w" * 1024 + b"\n")) == [b"w" * 1024 + b"\n", b"\n"]
    assert list(messages(b"z" * 1023 + b"\n")) == [b"z" * 1023 + b"\n"]


json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**20), 10**20) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30)


@settings(max_examples=80, deadline=None)
@given(docs=st.lists(st.dictionaries(st.text(max_size=8), json_value, max_size=6), min_size=1, max_size=4),
       indent=st.sampled_from([None, 2]), ascii_only=st.booleans(), limit=st.integers(48, 160))
def test_any_answer_cut_anywhere_reads_back(docs: list[dict[str, Any]], indent: int | None, ascii_only: bool,
                                            limit: int) -> None:
    """Any JSON object (one line or indented, UTF-8 or escaped), cut into pieces of any size that keeps the
    wrapper's header and trailer whole (as srun's 1,024 bytes do; here small, so that cuts fall everywhere, inside
    multi-byte characters too) and interleaved between tasks, is the document the node printed."""
    outputs = {i: wrapper_output(TOKEN, f"n{i + 1}", (json.dumps(doc, indent=indent, ensure_ascii=ascii_only)
                                                      + "\n").encode())
               for i, doc in enumerate(docs)}
    parser = read_back(labelled(outputs, limit))
    for i, doc in enumerate(docs):
        answer = classify(f"n{i + 1}", parser.tasks[i], timeout_s=1, ok_exit_codes=(0,))
        assert answer.document == doc, answer.reason


def test_output_that_is_not_utf8_is_replaced_not_fatal() -> None:
    """Bytes that are not UTF-8 inside a node's JSON string read as U+FFFD (as the text pipe gave them before);
    outside JSON they make the node unreachable with its first line shown."""
    outputs = {0: wrapper_output(TOKEN, "n1", b'{"v": "a\xffb"}\n'), 1: wrapper_output(TOKEN, "n2", b"PASS \xff\n")}
    parser = read_back(labelled(outputs))
    assert classify("n1", parser.tasks[0], timeout_s=1, ok_exit_codes=(0,)).document == {"v": "a\ufffdb"}
    answer = classify("n2", parser.tasks[1], timeout_s=1, ok_exit_codes=(0,))
    assert answer.document is None and answer.reason == "output is not JSON: 'PASS \\udcff'"
    assert answer_text(["{", '"a": 1}']) == '{"a": 1}'
