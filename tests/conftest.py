"""Shared fixtures: run the real CLI entry point in-process and capture stdout, stderr and exit code."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from typing import Any

import pytest

from dsctl.cli import main
from dsctl.commands._common import SETTINGS


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
