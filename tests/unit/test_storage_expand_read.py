"""storage expand's whole-file reader: it accepts only tables check-chains passes, and reads them to the rows the
line-by-line check reads; anything else goes the line-by-line way (issue 32 item 2)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.storage.api import generate_chains
from dsctl.storage.chaintable import CREATE_PIECES, REMOVE_PIECES, IdScheme
from dsctl.storage.crosscheck import CHAINS, CREATE, FILE_NAMES, REMOVE, TABLE, read_checked
from dsctl.storage.expand import expand
from dsctl.storage.expand_read import TableArrays, _laid_out, read_sound

SMALL = generate_chains(7, 2, 3, 3, 1, IdScheme()).files_text
FOUR = {name: SMALL[name] for name in FILE_NAMES}


def _slow_arrays(texts: dict[str, str | None]) -> TableArrays:
    result, rows, node_of, disk_of = read_checked(texts, "t")
    assert result.problems == []
    targets = np.array([row.targets for row in rows], dtype=np.int64)
    return TableArrays(np.array([row.chain_id for row in rows], dtype=np.int64), targets,
                       np.vectorize(node_of.__getitem__)(targets), np.array([disk_of[row.targets[0]] for row in rows]))


def _same(a: TableArrays, b: TableArrays) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("chain_ids", "targets", "nodes", "disks"))


@pytest.mark.parametrize("chunks", [(), ("1MB", "4MB")])
def test_written_tables_are_read_whole_to_the_same_rows(chunks: tuple[str, ...]) -> None:
    files = generate_chains(12, 4, 3, None, 1, IdScheme(), chunk_sizes=chunks).files_text
    texts = {name: files[name] for name in FILE_NAMES}
    fast = read_sound(texts)
    assert fast is not None
    assert _same(fast, _slow_arrays(texts))


@pytest.mark.parametrize("change", [
    lambda t: t.replace("\n", "\r\n"),  # CRLF: check-chains strips it
    lambda t: "\n" + t.replace("\n", "\n\n", 3),  # blank lines
    lambda t: t.rstrip("\n"),  # no final newline
    lambda t: "  " + t.replace("\n", "  \n", 5),  # spaces around lines
])
def test_other_layouts_give_the_same_plan(change) -> None:  # type: ignore[no-untyped-def]
    base = expand(FOUR, "t", 2, 1e12, 0.0, 0.0)
    for name in FILE_NAMES:
        texts = dict(FOUR)
        texts[name] = change(texts[name])
        if name == CHAINS and texts[name].startswith("  "):
            continue  # a header with leading spaces is a problem for check-chains too
        got = expand(texts, "t", 2, 1e12, 0.0, 0.0)
        assert got.files_text == base.files_text, name


def test_a_broken_table_is_refused_naming_its_first_problem() -> None:
    texts = dict(FOUR)
    texts[REMOVE] = "\n".join(texts[REMOVE].splitlines()[2:]) + "\n"  # one target cannot be removed
    assert read_sound(texts) is None
    with pytest.raises(InputError, match="has no offline-target line"):
        expand(texts, "t", 2, 1e12, 0.0, 0.0)


def _edit(text: str, kind: int, at: int, other: int) -> str:
    lines = text.split("\n")
    i, j = at % len(lines), other % len(lines)
    if kind == 0:
        del lines[i]
    elif kind == 1:
        lines.insert(i, lines[j])
    elif kind == 2:
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == 3:
        digits = [p for p, ch in enumerate(lines[i]) if ch.isdigit()]
        if digits:
            p = digits[j % len(digits)]
            lines[i] = lines[i][:p] + str((int(lines[i][p]) + 1) % 10) + lines[i][p + 1:]
    else:
        lines[i] = lines[i] + ",1" if "," in lines[i] else lines[i] + " 1"
    return "\n".join(lines)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(FILE_NAMES), st.integers(0, 4), st.integers(0, 10**6),
                          st.integers(0, 10**6)), min_size=1, max_size=3))
def test_whole_file_reader_accepts_only_sound_tables(edits: list[tuple[str, int, int, int]]) -> None:
    texts: dict[str, str | None] = dict(FOUR)
    for name, kind, at, other in edits:
        texts[name] = _edit(texts[name] or "", kind, at, other)
    fast = read_sound(texts)
    problems = read_checked(texts, "t")[0].problems
    if fast is None:
        return
    assert problems == [], "the whole-file reader accepted a table check-chains refuses"
    assert _same(fast, _slow_arrays(texts))


def test_the_reader_needs_all_four_files() -> None:
    for name in (TABLE, CREATE, REMOVE):
        texts: dict[str, str | None] = dict(FOUR)
        texts[name] = None
        assert read_sound(texts) is None


def test_too_many_kept_scores_are_refused_before_the_work() -> None:
    from dsctl.storage.expand_replace import MAX_SCORE_CELLS, check_size

    check_size(10, MAX_SCORE_CELLS // 10)
    with pytest.raises(InputError, match=r"add at most 1,000 nodes at a time"):
        check_size(1_001, MAX_SCORE_CELLS // 1_000)


_LAYOUTS = {CHAINS: (r"[0-9]{1,18}(?:,[0-9]{1,18}){3}\n", ("", ",", ",", ",", "\n")),
            TABLE: (r"[0-9]{1,18}\n", ("", "\n")),
            CREATE: (r"create-target --node-id [0-9]{1,18} --disk-index [0-9]{1,18} --target-id [0-9]{1,18} "
                     r"--chain-id [0-9]{1,18}  --use-new-chunk-engine\n", CREATE_PIECES),
            REMOVE: (r"(?:offline-target --node-id [0-9]{1,18} --target-id [0-9]{1,18}\n"
                     r"remove-target --node-id [0-9]{1,18} --target-id [0-9]{1,18}\n)", REMOVE_PIECES)}


def _body(name: str) -> str:
    text = FOUR[name] or ""
    return text.partition("\n")[2] if name in (CHAINS, TABLE) else text


def test_the_array_reader_reads_what_dsctl_writes() -> None:
    for name, (_, pieces) in _LAYOUTS.items():
        got = _laid_out(_body(name), pieces)
        assert got is not None, name
        numbers = [int(n) for n in re.findall("[0-9]+", _body(name))]
        assert got.ravel().tolist() == numbers, name


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(_LAYOUTS)), st.integers(0, 10**6), st.sampled_from(["0", "7", " ", "x", "\n", ",", "",
                                                                                    "\u00e9", "1234567890" * 2]),
       st.integers(0, 3))
def test_the_array_reader_accepts_only_the_regex_language(name: str, at: int, insert: str, cut: int) -> None:
    """Any edit: ``_laid_out`` reads the text only when the regex matches it whole, to the same numbers."""
    body = _body(name)
    at %= len(body)
    text = body[:at] + insert + body[at + cut:]
    pattern, pieces = _LAYOUTS[name]
    got = _laid_out(text, pieces)
    whole = re.fullmatch(f"(?:{pattern})+", text if text.endswith("\n") else text + "\n")
    assert (got is not None) == (whole is not None)
    if got is not None:
        assert got.ravel().tolist() == [int(n) for n in re.findall("[0-9]+", text)]


def test_a_wide_header_compiles_no_regex_of_its_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """A chains file whose header names 10^6 TargetId columns: the fast reader compiled a regex of 10^6 groups
    (minutes of CPU, 1.3 GB, for a 9 MB file) before the line-by-line check refused it. The array reader reads
    that regex's language, so no regex is compiled."""
    import dsctl.storage.expand_read as expand_read

    def no_compile(*args: object, **kwargs: object) -> None:
        raise AssertionError("a regex was compiled")
    monkeypatch.setattr(expand_read.re, "compile", no_compile)
    body = _body(CHAINS)
    assert expand_read._chains("ChainId" + ",TargetId" * 1_000_000 + "\n" + body) is None
    assert expand_read._chains("ChainId,TargetId,TargetId,TargetId\n" + body) is not None
    assert expand_read._table("ChainId\n1\n22\n") is not None and expand_read._table("ChainId\n1\n\n") is None
