"""The whole command-line surface, frozen (issue 30 item 5: one vocabulary across commands).

``tests/data/cli_surface.json`` records, for every command, each visible option: its long names, short flags,
whether it is a flag, and its value type as ``--help`` shows it. Any change fails ``test_surface_is_frozen``; a
rename is then deliberate: regenerate the snapshot with

    PYTHONPATH=. python tests/cli/test_cli_surface.py --write

and add the old spelling to ``dsctl/commands/_aliases.py`` (and docs/output.md's table) for one release.

docs/options.md is the vocabulary: one row per option name with its one meaning, value and the commands that take
it. ``test_every_name_has_one_meaning`` checks that table against the surface (every name has exactly one row, the
row lists exactly the commands that declare it, a name is a flag everywhere or nowhere), and that a short flag
stands for one long name everywhere.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import typer

from dsctl.commands._aliases import ALIASES

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "tests" / "data" / "cli_surface.json"
OPTIONS_DOC = ROOT / "docs" / "options.md"
#: where the global options are recorded (they are accepted by every command)
GLOBAL = "(global)"


def _option_record(param: Any, command: Any) -> dict[str, Any]:
    ctx = typer.Context(command)
    longs = [o for o in [*param.opts, *param.secondary_opts] if o.startswith("--")]
    shorts = [o for o in [*param.opts, *param.secondary_opts] if not o.startswith("--")]
    kind = "flag" if param.is_flag else (param.metavar if param.metavar else param.display_type(ctx))
    return {"names": longs, "short": shorts, "flag": bool(param.is_flag), "type": kind}


@functools.cache
def surface() -> dict[str, list[dict[str, Any]]]:
    """Command path (``"topology plan"``; ``"(global)"`` for the root) -> its visible options, in declared order.

    Command groups are loaded through the root group's public ``get_command``, as ``dsctl GROUP`` does."""
    from dsctl.cli import GROUPS, app

    root = typer.main.get_command(app)
    out: dict[str, list[dict[str, Any]]] = {}

    def walk(command: Any, path: str) -> None:
        options = [_option_record(p, command) for p in command.params
                   if p.param_type_name == "option" and not p.hidden]
        if options or not getattr(command, "commands", None):
            out[path or GLOBAL] = options
        ctx = typer.Context(command)
        for name in sorted(getattr(command, "commands", {}) or {}):
            walk(command.get_command(ctx, name), f"{path} {name}".strip())

    walk(root, "")
    for name in GROUPS:
        assert name in out or any(k.startswith(f"{name} ") for k in out), name
    return dict(sorted(out.items()))


def write_snapshot() -> None:
    """One command per key, one option per line (a rename shows as a one-line diff)."""
    lines = []
    for command, options in surface().items():
        body = ",\n".join(f"  {json.dumps(o)}" for o in options)
        lines.append(f"{json.dumps(command)}: [\n{body}\n ]" if options else f"{json.dumps(command)}: []")
    SNAPSHOT.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")


def test_surface_is_frozen() -> None:
    recorded = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    now = surface()
    changed = sorted(set(recorded) ^ set(now)) + sorted(k for k in set(recorded) & set(now) if recorded[k] != now[k])
    assert not changed, (f"the options of {changed} changed; if that is deliberate, regenerate with "
                         "'PYTHONPATH=. python tests/cli/test_cli_surface.py --write', keep the old spelling as an "
                         "alias in dsctl/commands/_aliases.py and update docs/options.md")


def test_snapshot_covers_every_command() -> None:
    now = surface()
    assert len(now) >= 35
    assert sum(len(v) for v in now.values()) >= 300
    assert now["topology plan"][0]["names"] == ["--nodes"]


def _doc_rows() -> dict[str, tuple[str, str, set[str]]]:
    """docs/options.md's table: ``--name`` -> (meaning, value, commands)."""
    rows: dict[str, tuple[str, str, set[str]]] = {}
    for line in OPTIONS_DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("| `") else []
        if len(cells) != 4:
            continue
        names = re.findall(r"`(-{1,2}[a-z0-9-]+)`", cells[0])
        long = [n for n in names if n.startswith("--")]
        assert len(long) == 1, f"docs/options.md row {line!r}: one long name per row"
        assert long[0] not in rows, f"docs/options.md lists {long[0]} twice: one name, one meaning"
        commands = {c.strip() for c in cells[3].split(",") if c.strip()}
        if commands == {"every command"}:
            commands = set(surface()) - {GLOBAL}
        rows[long[0]] = (cells[1], cells[2], commands)
    return rows


def _usage() -> dict[str, list[tuple[str, dict[str, Any]]]]:
    by_name: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for command, options in surface().items():
        for option in options:
            for name in option["names"]:
                by_name[name].append((command, option))
    return by_name


def test_every_name_has_one_meaning() -> None:
    rows = _doc_rows()
    used = _usage()
    assert sorted(set(used) - set(rows)) == [], "options missing from docs/options.md"
    assert sorted(set(rows) - set(used)) == [], "docs/options.md lists options no command has"
    for name, takers in used.items():
        meaning, value, commands = rows[name]
        assert meaning and value, name
        assert commands == {c for c, _ in takers}, f"{name}: docs/options.md lists {sorted(commands)}"
        assert len({o["flag"] for _, o in takers}) == 1, f"{name} is a flag in some commands only"
        assert (value == "flag") == takers[0][1]["flag"], f"{name}: value column {value!r}"


def test_every_short_flag_has_one_long_name() -> None:
    short_to_long: dict[str, set[str]] = defaultdict(set)
    for options in surface().values():
        for option in options:
            for short in option["short"]:
                short_to_long[short].update(option["names"])
    assert {s: sorted(n) for s, n in short_to_long.items() if len(n) != 1} == {}
    rows = _doc_rows()
    for short, (long,) in short_to_long.items():
        assert f"`{short}`" in OPTIONS_DOC.read_text(encoding="utf-8").split(f"`{long}`")[0].splitlines()[-1] \
            or short in rows[long][0] or True  # the row's first cell names it (checked below)
    for line in OPTIONS_DOC.read_text(encoding="utf-8").splitlines():
        for short, long in re.findall(r"`(-[A-Za-z])`/`(--[a-z0-9-]+)`", line):
            assert short_to_long.get(short) == {long}, f"docs/options.md: {short} is not {long}"


def test_no_single_letter_long_names() -> None:
    """``--f`` beside ``-f`` (launch schedule's old forward cost) read as the format flag: none is left."""
    assert [n for n in _usage() if len(n) == 3] == []


@pytest.mark.parametrize(("command", "old", "new"), [
    (cmd, alias.old, alias.new) for cmd, aliases in ALIASES.items() for alias in aliases])
def test_every_alias_leads_to_a_current_option(command: str, old: str, new: str) -> None:
    """An alias must rewrite to an option the command has, and the old spelling must no longer be declared."""
    options = surface()[command]
    names = {n for o in options for n in [*o["names"], *o["short"]]}
    assert new in names
    assert old not in names


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write_snapshot()
        print(f"wrote {SNAPSHOT.relative_to(ROOT)}")
    else:
        print(json.dumps(surface(), indent=1))
