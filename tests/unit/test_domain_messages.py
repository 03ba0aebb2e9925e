"""Domain errors name fields, never command-line options; each command group spells its fields in one table.

A domain message that starts with a flag (``--replicas must ...``) ties domain code to the command line: a
renamed option would edit the domain. Domain errors carry ``field="replicas"`` instead and ``dsctl.cli`` spells
the field through the running group's ``FIELD_OPTIONS`` (dsctl/commands/GROUP.py) over
``dsctl.commands._common.COMMON_FIELD_OPTIONS``.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import typer.main

from dsctl.cli import GROUPS
from dsctl.commands._common import COMMON_FIELD_OPTIONS, option_for
from dsctl.errors import InputError
from tests.unit.test_architecture import DOMAIN_PACKAGES, PACKAGE

ERROR_CLASSES = {"InputError", "ProfileError", "EnvironmentMissing", "DsctlError"}
FLAG = re.compile(r"-{1,2}[A-Za-z]")
#: files that still lead messages with a flag, and how many, with why. The number may only go down.
FLAG_LEADING_LEFT: dict[str, int] = {}
#: domain package -> its command group, whose table spells the fields the package names
PACKAGE_GROUP = {"eplb": "eplb", "model": "model", "trace": "trace", "topology": "topology", "storage": "storage",
                 "health": "health", "steptime": "launch", "launch": "launch"}
#: fields a package names for another group's command (eplb's placement read by 'topology simulate', the MFU
#: prediction of 'model cost')
SPELLED_ELSEWHERE = {("eplb", "eplb_plan"): "topology", ("eplb", "layer"): "topology", ("eplb", "stats"): "topology",
                     ("steptime", "gpus"): "model"}
#: fields that are no option: a model profile's key, named as the profile names it
NOT_OPTIONS = {("model", "activation_recipe")}
#: helpers whose second argument is the field they check
FIELD_HELPERS = {"require_number": 1, "dtype_bytes": 1, "recipe_named": 1, "check_planning_work": 2}


def _leading_text(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        first = node.values[0] if node.values else None
        return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else ""
    if isinstance(node, ast.BinOp):
        return _leading_text(node.left)
    return None


def _calls(path: Path) -> list[tuple[str, ast.Call]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            found.append((name, node))
    return found


def flag_leading_messages(path: Path) -> list[int]:
    """Lines of error constructions in ``path`` whose message text starts with a flag."""
    lines = []
    for name, call in _calls(path):
        if name not in ERROR_CLASSES:
            continue
        texts = [*call.args[:1], *(k.value for k in call.keywords if k.arg == "message")]
        if any((t := _leading_text(arg)) is not None and FLAG.match(t) for arg in texts):
            lines.append(call.lineno)
    return lines


def named_fields(path: Path) -> set[str]:
    """Field names ``path`` gives its errors: ``field=``/``mentions=`` literals and the field helpers' argument."""
    fields: set[str] = set()
    for name, call in _calls(path):
        for keyword in call.keywords:
            if keyword.arg == "field" and isinstance(keyword.value, ast.Constant) and keyword.value.value:
                fields.add(str(keyword.value.value))
            if keyword.arg == "mentions" and isinstance(keyword.value, ast.Tuple):
                fields.update(str(e.value) for e in keyword.value.elts if isinstance(e, ast.Constant))
        position = FIELD_HELPERS.get(name)
        if position is not None and len(call.args) > position:
            arg = call.args[position]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                fields.add(arg.value)
    return fields


def _domain_files() -> list[Path]:
    return sorted(p for package in DOMAIN_PACKAGES for p in (PACKAGE / package).rglob("*.py"))


def test_no_domain_message_starts_with_a_flag() -> None:
    counts = Counter({str(p.relative_to(PACKAGE)): len(flag_leading_messages(p)) for p in _domain_files()})
    over = {name: count for name, count in counts.items() if count > FLAG_LEADING_LEFT.get(name, 0)}
    assert not over, f"domain messages lead with a flag (give the error field='...' instead): {over}"


def test_the_scan_finds_a_flag_leading_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text('def f(x):\n    raise InputError(f"--replicas {x} must be >= 1")\n'
                   'def g():\n    raise InputError("-N/--nodes must be given")\n'
                   'def h(x):\n    raise InputError(f"{x} must be >= 1", field="replicas")\n', encoding="utf-8")
    assert flag_leading_messages(bad) == [2, 4]
    assert named_fields(bad) == {"replicas"}


def _commands(group: str) -> dict[str, Any]:
    """Every command of ``group`` by its words after the group ("" = the group itself, "burn-in"), nested groups
    walked (a Click group's public ``commands`` table; Typer builds the Click commands)."""
    found: dict[str, Any] = {}

    def walk(command: Any, words: str) -> None:
        found[words] = command
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{words} {name}".strip())

    walk(typer.main.get_group(importlib.import_module(f"dsctl.commands.{group}").app), "")
    return found


def _flags(command: Any) -> set[str]:
    return {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}


def _group_flags(group: str) -> set[str]:
    return {flag for command in _commands(group).values() for flag in _flags(command)}


def _tables() -> dict[str, dict[str, str]]:
    return {group: getattr(importlib.import_module(f"dsctl.commands.{group}"), "FIELD_OPTIONS", {})
            for group in GROUPS}


def test_every_spelled_option_exists() -> None:
    """A plain key's option belongs to some command of the group; a "SUBCOMMAND FIELD" key's to that command."""
    tables = _tables()
    all_flags: set[str] = set()
    for group, table in tables.items():
        commands = _commands(group)
        flags = _group_flags(group)
        all_flags |= flags
        missing = {}
        for key, spelled in table.items():
            sub = key.rpartition(" ")[0]  # "" for a plain key
            where = (_flags(commands[sub]) if sub in commands else set()) if sub else flags
            if not set(spelled.split("/")) <= where:
                missing[key] = spelled
        assert not missing, f"dsctl {group}: FIELD_OPTIONS names options the command does not have: {missing}"
    assert all(set(spelled.split("/")) <= all_flags for spelled in COMMON_FIELD_OPTIONS.values())


def test_the_output_field_is_spelled_as_each_commands_own_option() -> None:
    """``out`` (the file or folder a command writes) is --out in some commands and --out-dir in others: every
    command with exactly one of them spells the field as that one."""
    checked = 0
    for group in GROUPS:
        for words, command in _commands(group).items():
            outputs = _flags(command) & {"--out", "--out-dir"}
            if len(outputs) == 1:
                assert option_for("out", f"{group} {words}".strip()) == outputs.pop(), f"dsctl {group} {words}"
                checked += 1
    assert checked >= 10


@pytest.mark.parametrize("package", sorted(PACKAGE_GROUP))
def test_every_field_a_domain_package_names_has_its_option(package: str) -> None:
    tables = _tables()
    unspelled = set()
    for path in sorted((PACKAGE / package).rglob("*.py")):
        for field in named_fields(path) - {f for p, f in NOT_OPTIONS if p == package}:
            group = SPELLED_ELSEWHERE.get((package, field), PACKAGE_GROUP[package])
            spelled = {key.rpartition(" ")[2] for key in tables[group]}  # "FIELD" or "SUBCOMMAND FIELD" keys
            if field not in spelled and field not in COMMON_FIELD_OPTIONS:
                unspelled.add(f"{path.relative_to(PACKAGE)}: {field}")
    assert not unspelled, f"fields no command table spells (users would read the field name): {sorted(unspelled)}"


def test_an_error_reads_its_field_then_its_option() -> None:
    exc = InputError("and {all_steps} exclude each other; give one", field="step", mentions=("all_steps",))
    assert exc.message == str(exc) == "step and all_steps exclude each other; give one"
    exc.name_options({"step": "--step", "all_steps": "--all-steps"}.get)
    assert exc.message == "--step and --all-steps exclude each other; give one"
    colon = InputError(": the rank map has 8 ranks", field="ranks")
    colon.name_options(lambda field: None)
    assert colon.message == "ranks: the rank map has 8 ranks" and colon.options == {}
    plain = InputError("statistics: not a table")
    plain.name_options(lambda field: "--never")
    assert plain.message == "statistics: not a table"


def test_the_cli_spells_a_domain_field_as_the_running_groups_option(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("topology", "plan", "--kind", "mpft", "--nodes", "2", "--radix", "63")
    assert res.exit_code == 2
    assert res.stderr.startswith("error: --radix 63 is odd: a fat tree splits every switch's ports half down")
    res = cli("model", "cost", "--tokens", "1T", "--tokens-per-gpu-second", "100", "--mfu", "0.4")
    assert res.exit_code == 2
    assert res.stderr.startswith("error: --tokens-per-gpu-second cannot be combined with --gflops-per-token, "
                                 "--gpu-tflops or --mfu\n")
