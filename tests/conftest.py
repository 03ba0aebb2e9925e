"""Shared fixtures: run the real CLI entry point in-process and capture stdout, stderr and exit code."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from dsctl.cli import main
from dsctl.commands._common import SETTINGS

# No per-example deadline (CI machines are shared and slow); in CI the examples are derandomized so that a run is
# reproducible from the commit alone. Locally each run explores new examples.
settings.register_profile(
    "dsctl",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=os.environ.get("CI", "") not in ("", "0", "false"),
)
settings.load_profile("dsctl")


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def run_cli(*args: str) -> CliResult:
    """Run ``dsctl ARGS...`` through ``dsctl.cli.main`` exactly as the console script does."""
    out, err = io.StringIO(), io.StringIO()
    SETTINGS.debug = False
    SETTINGS.profiles_dir = None
    with redirect_stdout(out), redirect_stderr(err):
        code = main([str(a) for a in args])
    return CliResult(code, out.getvalue(), err.getvalue())


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Callable[..., CliResult]:
    """``cli("profiles", "list")`` -> CliResult; DSCTL_* variables are cleared first."""
    monkeypatch.delenv("DSCTL_PROFILES", raising=False)
    monkeypatch.delenv("DSCTL_DEBUG", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    return run_cli


@pytest.fixture(autouse=True)
def no_site_config(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No dsctl.toml of this machine or user leaks into a test (tests/cli/test_site_config_cli.py sets its own)."""
    import dsctl.siteconfig

    empty = tmp_path_factory.mktemp("no-site-config")
    monkeypatch.delenv("DSCTL_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(empty / "user"))
    monkeypatch.setattr(dsctl.siteconfig, "SYSTEM_DIR", empty / "system")
