"""check-chains over the four files: every kind of damage is found and named by file and line."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dsctl.storage.api import generate_chains
from dsctl.storage.chaintable import IdScheme
from dsctl.storage.crosscheck import CHAINS, CREATE, REMOVE, TABLE, check_files


@pytest.fixture(scope="module")
def files() -> dict[str, str]:
    text = generate_chains(7, 2, 3, 3, 1, IdScheme()).files_text
    return {name: text[name] for name in (CHAINS, TABLE, CREATE, REMOVE)}


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _edit(name: str, fn: Callable[[list[str]], list[str]]) -> Callable[[dict[str, str]], dict[str, str | None]]:
    def apply(files: dict[str, str]) -> dict[str, str | None]:
        out: dict[str, str | None] = dict(files)
        out[name] = "".join(fn(_lines(files[name])))
        return out
    return apply


def test_generated_files_pass(files: dict[str, str]) -> None:
    result = check_files(dict(files), "dir")
    assert result.exit_code == 0 and result.problems == [] and result.num_chains == 14
    assert result.balance is not None and result.node_source == CREATE and len(result.files_checked) == 4


CASES = [
    # (edit, expected where, expected text)
    (_edit(CHAINS, lambda ls: [*ls[:3], "garbage,row\n", *ls[3:]]), f"{CHAINS} line 4", "not a row of integer"),
    (_edit(CHAINS, lambda ls: [*ls[:2], ls[2].rsplit(",", 1)[0] + "\n", *ls[3:]]), f"{CHAINS} line 3",
     "2 targets, the header has 3"),
    (_edit(CHAINS, lambda ls: [*ls, ls[1]]), f"{CHAINS} line 16", "chain id appears again (first on line 2)"),
    (_edit(TABLE, lambda ls: ls[:-1]), f"{CHAINS} line 15", "chain missing from generated_chain_table.csv"),
    (_edit(TABLE, lambda ls: [*ls, "900100099\n"]), f"{TABLE} line 16", "not in generated_chains.csv"),
    (_edit(TABLE, lambda ls: [*ls, "x\n"]), f"{TABLE} line 16", "not a chain id"),
    (_edit(CREATE, lambda ls: ls[1:]), f"{CHAINS} line 2", "no create-target for target"),
    (_edit(CREATE, lambda ls: [*ls, ls[0]]), f"{CREATE} line 43", "created again (first on line 1)"),
    (_edit(CREATE, lambda ls: [ls[0].replace("--disk-index 0", "--disk-index 1"), *ls[1:]]), f"{CHAINS} line 2",
     "encodes node 10001 disk 0 but create-target puts it on node 10001 disk 1"),
    (_edit(CREATE, lambda ls: [ls[0].replace("--chain-id 900100001", "--chain-id 900100002"), *ls[1:]]),
     f"{CREATE} line 1", "is in chain 900100001"),
    (_edit(CREATE, lambda ls: ["rm -rf /\n", *ls]), f"{CREATE} line 1", "not a create-target command"),
    (_edit(REMOVE, lambda ls: ls[2:]), f"{CHAINS} line 2", "has no offline-target line, so it cannot be removed"),
    (_edit(REMOVE, lambda ls: [ls[1], ls[0], *ls[2:]]), f"{REMOVE} line 1", "removed (line 1) before it is offlined"),
    (_edit(REMOVE, lambda ls: [*ls, "remove-target --node-id 10001 --target-id 5\n"]), f"{REMOVE} line 85",
     "which is in no chain"),
    (lambda f: {**f, REMOVE: None}, REMOVE, "file missing"),
]


@pytest.mark.parametrize(("edit", "where", "text"), CASES)
def test_each_damage_is_named_by_file_and_line(files: dict[str, str], edit: Callable[..., dict[str, str | None]],
                                               where: str, text: str) -> None:
    result = check_files(edit(files), "dir")
    assert result.exit_code == 1 and result.balance is None
    assert any(p.where == where and text in p.problem for p in result.problems), result.problems


def test_node_clash_and_disk_mix_in_one_chain() -> None:
    csv = "ChainId,TargetId,TargetId\n900100001,101000100101,101000100201\n900100002,101000100102,101000200102\n"
    problems = check_files({CHAINS: csv}, "x").problems
    assert [(p.where, p.problem) for p in problems] == [
        (f"{CHAINS} line 2", "two targets on node 10001"),
        (f"{CHAINS} line 2", "members on disk indexes [0, 1]; a 3FS table keeps a chain on one index")]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 3), st.integers(0, 400), st.text(max_size=30))
@example(1, 8, "\u24ea")  # found by DSCTL_HOSTILE_EXAMPLES=2000: "⓪" passes str.isdigit, int() refuses it
@example(0, 40, "\u00b9")
def test_any_inserted_junk_is_a_problem_never_a_crash(which: int, at: int, junk: str) -> None:
    base = generate_chains(5, 1, 3, 3, 1, IdScheme()).files_text
    texts: dict[str, str | None] = {n: base[n] for n in (CHAINS, TABLE, CREATE, REMOVE)}
    name = (CHAINS, TABLE, CREATE, REMOVE)[which]
    text = texts[name] or ""
    cut = min(at, len(text))
    texts[name] = text[:cut] + junk + text[cut:]
    result = check_files(texts, "x")
    assert result.exit_code in (0, 1)
    assert all(p.where for p in result.problems)


def test_balance_is_skipped_above_the_node_limit(files: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from dsctl.storage import crosscheck

    monkeypatch.setattr(crosscheck, "MAX_BALANCE_NODES", 5)
    result = check_files(dict(files), "dir")
    assert result.exit_code == 0 and result.balance is None and "balance not measured" in result.notes[0]


@pytest.mark.parametrize(("name", "old", "new"), [
    (CHAINS, "900100001,", "90010000\u0661,"),  # an Arabic-Indic one: int() reads it as 1
    (CHAINS, "900100001,", "900_100_001,"),  # int() skips the underscores
    (CHAINS, "900100001,", "+900100001,"),
    (CREATE, "--node-id 10001 ", "--node-id 1000\u0661 "),  # \d matched any script's digits
    (REMOVE, "--node-id 10001 ", "--node-id 1000\u0661 "),
])
def test_ids_are_ascii_digits_only(files: dict[str, str], name: str, old: str, new: str) -> None:
    """Each of these was read as the id it spells (exit 0, and storage expand planned from it) before the check
    took ASCII digits only, as the other files' ids and the array reader do."""
    texts: dict[str, str | None] = dict(files)
    assert old in files[name]
    texts[name] = files[name].replace(old, new, 1)
    result = check_files(texts, "dir")
    assert result.exit_code == 1
    assert result.problems[0].where == f"{name} line {2 if name == CHAINS else 1}"
    assert result.problems[0].problem.startswith(("not a row of integer ids", "not a create-target command",
                                                  "not an offline-target/remove-target command"))
