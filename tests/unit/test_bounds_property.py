"""Property tests for issue 23's input classes: YAML of any shape, ids of any text, escaping for terminals and
Prometheus, option prefixes, hostlist chunks. Derandomized by default (tests/conftest.py);
``DSCTL_HOSTILE_EXAMPLES=N`` explores N random examples each."""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.launch.engines.slurm_options import RESERVED_SBATCH, reserved_prefix
from dsctl.names import terminal_text
from dsctl.output.prometheus import escape
from dsctl.profiles.textyaml import load_yaml
from dsctl.runners.fleet import hostlist_chunks
from dsctl.trace.parse import _int

YAML_PIECES = st.sampled_from(["a", "b: ", "- ", "[", "]", "{", "}", ",", ":", "&x ", "*x", "\n", "  ", "'", '"',
                               "9" * 4400, "!!python/object:os.system", "? ", "|", ">", "#", "---\n", "...", "\t",
                               "1e400", "\ud800", "\x00", "<<: *x\n"])


@given(st.lists(YAML_PIECES, max_size=60).map("".join))
@example("a: &x [1]\nb: *x\n")
@example("<<: *x\n")
@example("a: " + "[" * 5000)
@settings(max_examples=200)
def test_yaml_loads_or_is_one_input_error(text: str) -> None:
    try:
        load_yaml(text, "in.yaml")
    except InputError as exc:
        assert exc.message.startswith("in.yaml")


@given(st.one_of(st.text(max_size=30), st.integers(), st.floats(allow_nan=True), st.none(), st.booleans()))
@example("\u00b9")
@example("-\u0663")
@example("9" * 4400)
@example(2**70)
@example(1e300)
def test_trace_ids_never_raise(value: object) -> None:
    got = _int(value, -7)
    assert isinstance(got, int)


_VISIBLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


@given(st.text())
@example("\x1b]0;title\x07\x1b[2J\r\ud800")
def test_terminal_text_leaves_no_control_character(text: str) -> None:
    shown = terminal_text(text)
    assert not _VISIBLE.search(shown)
    shown.encode("utf-8")  # writable to a UTF-8 terminal: no lone surrogate left (raises otherwise)
    if not _VISIBLE.search(text):
        assert shown == text


@given(st.text())
@example('a\\b"c\nd\re\r\n')
def test_prometheus_label_values_stay_on_one_line_and_round_trip_quotes(text: str) -> None:
    value = escape(text)
    assert "\n" not in value and "\r" not in value
    assert not re.search(r'(?<!\\)(?:\\\\)*"', value)  # every quote escaped
    unescaped = re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), value)
    assert unescaped.replace("\n", "") == re.sub(r"[\r\n]", "", re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]",
                                                                          "\ufffd", text))


@given(st.sampled_from(sorted(RESERVED_SBATCH)), st.integers(min_value=1, max_value=20))
def test_every_prefix_of_a_reserved_option_is_refused(option: str, cut: int) -> None:
    assert reserved_prefix(option[:cut], RESERVED_SBATCH) is not None


@given(st.lists(st.from_regex(r"[a-z]{1,6}[0-9]{0,5}", fullmatch=True), min_size=1, max_size=300, unique=True),
       st.integers(min_value=16, max_value=400))
def test_hostlist_chunks_cover_every_node_once(nodes: list[str], limit: int) -> None:
    chunks = hostlist_chunks(nodes, max_chars=limit)
    assert len(chunks) == 1 or all(len(c) <= limit for c in chunks)
    total = sum(len(c.split(",")) for c in chunks)  # a bracket range counts as one, so at most len(nodes)
    assert 1 <= total <= len(nodes)
