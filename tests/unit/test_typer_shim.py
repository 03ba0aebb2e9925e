"""The Typer internals dsctl relies on (dsctl/typer_shim.py) are still there in the installed Typer: if a release
removes them, these fail instead of dsctl silently slowing down or reporting a bare group as an error."""

from __future__ import annotations

import subprocess
import sys

from dsctl.cli import main
from dsctl.typer_shim import NO_ARGS_IS_HELP, RUNTIME_PARAM_SLOT, is_bare_group_help, plain_root_coercion


def test_typer_still_has_the_no_args_help_class() -> None:
    assert NO_ARGS_IS_HELP is not None and issubclass(NO_ARGS_IS_HELP, Exception)
    assert not is_bare_group_help(ValueError("x"))


def test_a_bare_group_prints_its_help_and_exits_0(capsys: object) -> None:
    assert main(["eplb"]) == 0
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "rebalance" in out and "Usage" in out


def test_typer_parameters_still_have_the_runtime_slot() -> None:
    import typer

    from dsctl.cli import app

    root = typer.main.get_command(app)
    params = [p for p in root.params if hasattr(p, RUNTIME_PARAM_SLOT)]
    assert params, "Typer's parameters no longer carry _runtime_param"
    fresh = [p for p in params if getattr(p, RUNTIME_PARAM_SLOT) is None]
    assert plain_root_coercion(fresh) == len(fresh) > 0


def test_root_help_does_not_import_pydantic() -> None:
    code = "import sys; from dsctl.cli import main; main(['--profiles-dir', '/nonexistent', '--help']); " \
           "print('pydantic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False).stdout
    assert out.strip().splitlines()[-1] == "False"


def _error_line(args: list[str], capsys: object) -> str:
    assert main(args) == 2
    return capsys.readouterr().err.splitlines()[0]  # type: ignore[attr-defined]


def test_bad_values_are_worded_by_dsctl_not_pydantic(capsys: object) -> None:
    cases = {("topology", "plan", "--nodes", "abc"): "'abc' is not a whole number",
             ("trace", "overlap", "--jobs", "0", "x.json"): "give a value at least 1",
             ("trace", "overlap", "--jobs", "5000", "x.json"): "give a value at most 1024",
             ("health", "check", "--interval-s", "soon"): "'soon' is not a number",
             ("storage", "size", "--format", "xml"): "'xml' is not one of"}
    for args, wanted in cases.items():
        line = _error_line(list(args), capsys)
        assert wanted in line, line
        assert "Input should" not in line and "Value error" not in line, line
