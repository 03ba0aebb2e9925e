"""Start-up stays light: the root and every group's --help import no numpy, yaml, psutil or domain package."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import dsctl.commands
from dsctl.cli import GROUPS, app

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ["numpy", "yaml", "psutil", "pynvml"]
DOMAIN = ["dsctl.topology", "dsctl.eplb", "dsctl.health", "dsctl.storage", "dsctl.launch.plan", "dsctl.model",
          "dsctl.trace", "dsctl.profiles.loader", "dsctl.runners"]

PROBE = """
import contextlib, io, json, sys
before = set(sys.modules)
import dsctl.cli
loaded = {"import": sorted(set(sys.modules) - before)}
for args in json.loads(sys.argv[1]):
    before = set(sys.modules)
    with contextlib.redirect_stdout(io.StringIO()):
        code = dsctl.cli.main(args)
    assert code == 0, (args, code)
    loaded[" ".join(args)] = sorted(set(sys.modules) - before)
print(json.dumps(loaded))
"""


def _loaded_by(invocations: list[list[str]]) -> dict[str, list[str]]:
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(invocations)], capture_output=True, text=True,
                          cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, list[str]] = json.loads(proc.stdout)
    return result


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in HEAVY or any(m == d or m.startswith(d + ".") for d in DOMAIN)]


def test_import_cli_and_version_load_nothing_heavy() -> None:
    loaded = _loaded_by([["--version"]])
    assert not _heavy(loaded["import"]) and not _heavy(loaded["--version"])
    assert "rich.markdown" not in loaded["import"] + loaded["--version"]
    assert "rich" not in loaded["import"]


def test_help_of_root_and_every_group_loads_nothing_heavy() -> None:
    invocations = [["--help"], *[[name, "--help"] for name in GROUPS], ["launch", "schedule", "--help"],
                   ["health", "check", "--help"], ["health", "fleet", "--help"], ["topology", "simulate", "--help"]]
    loaded = _loaded_by(invocations)
    for args in invocations:
        assert _heavy(loaded[" ".join(args)]) == [], args
        # Typer coerces values through pydantic (60 ms): the root's own options must not need it
        assert len(args) > 2 or "pydantic" not in loaded[" ".join(args)], args
    # the root's help lists the groups without importing them
    assert not [m for m in loaded["--help"] if m.startswith("dsctl.commands.") and m != "dsctl.commands._common"]


def test_every_command_module_is_a_group_with_the_help_the_root_shows() -> None:
    modules = {info.name for info in pkgutil.iter_modules(dsctl.commands.__path__)
               if hasattr(importlib.import_module(f"dsctl.commands.{info.name}"), "app")}
    assert modules == set(GROUPS)
    for name, summary in GROUPS.items():
        assert importlib.import_module(f"dsctl.commands.{name}").app.info.help == summary, name


def test_the_root_lists_every_group_in_order() -> None:
    import typer

    command = typer.main.get_command(app)
    names = command.list_commands(None)  # type: ignore[attr-defined,arg-type]
    assert names == list(GROUPS)


def test_eplb_rebalance_loads_the_fabric_simulator_only_with_plan(tmp_path: Path) -> None:
    """A plain rebalance (and one with --previous alone) never imports dsctl.topology: before issue 31 it loaded the
    whole fabric simulator (59 dsctl modules, 42 after); --plan still does, to time the moves."""
    import numpy as np

    rng = np.random.default_rng(5)
    stats = tmp_path / "v3.npy"
    np.save(stats, np.round(1e5 / np.arange(1, 257) * rng.lognormal(0, 0.3, (6, 256))))
    fabric, before = tmp_path / "fabric", tmp_path / "before.json"
    assert _loaded_by([["topology", "plan", "-N", "2", "--out", str(fabric), "-f", "json"]])
    layout = [str(stats), "-r", "288", "-g", "16", "-N", "2", "-m", "deepseek-v3", "-f", "json"]
    plain = ["eplb", "rebalance", *layout, "--out", str(before)]
    previous = ["eplb", "rebalance", *layout, "--previous", str(before)]
    timed = [*previous, "--plan", str(fabric)]
    loaded = _loaded_by([plain, previous, timed])
    ours = [m for m in loaded[" ".join(plain)] + loaded[" ".join(previous)] if m.startswith("dsctl.")]
    assert [m for m in ours if m.startswith("dsctl.topology")] == []
    assert 20 <= len(ours) <= 45, ours  # the command, the eplb modules it uses, output, profiles
    assert {"dsctl.topology.sim", "dsctl.topology.sim.maxmin", "dsctl.eplb.move_time"} <= set(loaded[" ".join(timed)])
