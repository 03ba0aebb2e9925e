"""storage expand draws counted progress (replacements and new chains planned) on a terminal (issue 30)."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

import dsctl.output.progress as progress_module
from dsctl.cli import main
from dsctl.commands._common import SETTINGS


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run(*args: object) -> tuple[int, str]:
    """Exit code and stderr of ``dsctl ARGS`` with stderr a terminal."""
    out, err = io.StringIO(), Terminal()
    SETTINGS.profiles_dir = None
    with redirect_stdout(out), redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, err.getvalue()


def test_storage_expand_shows_a_counted_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(progress_module, "DELAY_S", 0.0)
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLUMNS", "160")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("DSCTL_PROFILES", raising=False)
    assert run("storage", "chains", "--nodes", "25", "--ssds-per-node", "4", "--out-dir", tmp_path / "old",
               "-f", "json")[0] == 0
    code, err = run("storage", "expand", "--from", tmp_path / "old", "--add-nodes", "5")
    assert code == 0, err
    assert "expansion plan for 5 more nodes" in err and "100%" in err and "ETA" in err
    code, err = run("storage", "expand", "--from", tmp_path / "old", "--add-nodes", "5", "-f", "json")
    assert code == 0 and err == ""
