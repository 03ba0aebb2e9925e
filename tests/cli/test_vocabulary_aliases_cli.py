"""Issue 30 item 5: the spellings renamed for one vocabulary keep working for one release, with one deprecation line.

Every alias of ``dsctl/commands/_aliases.py`` is exercised on its command; a few run for real and must give the
same result as the new name.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from dsctl.commands._aliases import ALIASES
from tests.conftest import CliResult

ROOT = Path(__file__).resolve().parents[2]
HEALTHY = ROOT / "tests" / "data" / "health" / "hgx_h800_healthy.yaml"
#: aliases that name a flag (no value follows)
FLAGS = {("health check", "--slurm")}


@pytest.mark.parametrize(("command", "old", "new"), [
    (cmd, alias.old, alias.new) for cmd, aliases in ALIASES.items() for alias in aliases if alias.scale == 1.0
    and alias.refuse is None])
def test_every_alias_is_accepted_and_noted(cli: Callable[..., CliResult], command: str, old: str, new: str) -> None:
    value = [] if (command, old) in FLAGS else ["1"]
    result = cli(*command.split(), old, *value, "--help")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == f"warning: {old} is deprecated; use {new}\n"
    assert new in result.stdout  # help shows the new name only


def _json(result: CliResult) -> dict:
    assert result.exit_code in (0, 1), result.stderr
    data = json.loads(result.stdout)
    data.pop("dsctl", None)
    return data


def test_schedule_costs_old_and_new(cli: Callable[..., CliResult]) -> None:
    base = ("launch", "schedule", "--pp", "4", "--micro-batches", "8", "-f", "json")
    old = cli(*base, "--f", "2", "--b", "3", "--w", "1", "--fb", "4")
    new = cli(*base, "--f-cost", "2", "--b-cost", "3", "--w-cost", "1", "--fb-cost", "4")
    assert _json(old) == _json(new)
    assert old.stderr.count("is deprecated") == 4 and new.stderr == ""


def test_out_folder_old_spellings(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    for spelling in ("--out", "-o"):
        out = tmp_path / spelling.strip("-")
        result = cli("topology", "plan", "-N", "2", spelling, out)
        assert result.exit_code == 0
        assert (out / "plan.json").is_file()
        assert result.stderr == f"warning: {spelling} is deprecated; use --out-dir\n"


def test_storage_chains_r_is_targets_per_ssd(cli: Callable[..., CliResult]) -> None:
    old = cli("storage", "chains", "-N", "6", "-d", "2", "-r", "2", "-f", "json")
    new = cli("storage", "chains", "-N", "6", "-d", "2", "--targets-per-ssd", "2", "-f", "json")
    assert _json(old) == _json(new)
    assert old.stderr == "warning: -r is deprecated; use --targets-per-ssd\n"


def test_checkpoint_seconds(cli: Callable[..., CliResult]) -> None:
    base = ("storage", "size", "--nodes", "25", "--checkpoint", "5 TiB", "-f", "json")
    assert _json(cli(*base, "--checkpoint-seconds", "120")) == _json(cli(*base, "--checkpoint-time-s", "120"))


def test_health_check_slurm_and_interval(cli: Callable[..., CliResult]) -> None:
    old = cli("health", "check", "--slurm", "--from-record", HEALTHY, "-f", "json")
    new = cli("health", "check", "--slurm-healthcheck", "--from-record", HEALTHY, "-f", "json")
    assert old.exit_code == new.exit_code == 0
    assert json.loads(old.stdout)["verdict"] == json.loads(new.stdout)["verdict"]
    assert old.stderr.startswith("warning: --slurm is deprecated; use --slurm-healthcheck\n")
    refused = cli("health", "check", "--interval", "nan")
    assert refused.exit_code == 2 and "--interval-s" in refused.stderr
