"""Progress lines go to a terminal's stderr only (issue 30): never to stdout, never into ``--format json``.

dsctl runs with stderr on a pseudo-terminal and stdout on a pipe (as ``dsctl ... > out.json`` in a shell), with
the progress delay set to 0 so that a short command draws its bar (``DELAY_S`` is 2 s; the counts are what is
drawn, not the time)."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = "import sys, dsctl.output.progress as p; p.DELAY_S = 0.0; from dsctl.cli import main; sys.exit(main())"


def run_on_a_terminal(*args: str, cwd: Path) -> tuple[int, str, str]:
    """(exit code, stdout, what reached the terminal on stderr)."""
    leader, follower = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120", "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-c", RUN, *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=follower, stdin=subprocess.DEVNULL)
    os.close(follower)
    seen = bytearray()
    while True:
        ready, _, _ = select.select([leader], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    out = proc.stdout.read().decode() if proc.stdout else ""
    proc.wait(timeout=60)
    os.close(leader)
    return proc.returncode, out, seen.decode(errors="replace")


@pytest.mark.parametrize("command", [
    ("storage", "chains", "--nodes", "40", "--ssds-per-node", "16"),
])
def test_the_bar_reaches_the_terminal_and_stdout_stays_clean(command: tuple[str, ...], tmp_path: Path) -> None:
    code, out, terminal = run_on_a_terminal(*command, cwd=tmp_path)
    assert code == 0, terminal
    assert "%" in terminal and "ETA" in terminal, terminal  # drawn: a counted bar with an ETA
    assert "ETA" not in out and "━" not in out and "\x1b[" not in out, out[:500]
    assert "chains" in out  # the table itself


def test_json_output_has_no_progress_even_on_a_terminal(tmp_path: Path) -> None:
    code, out, terminal = run_on_a_terminal("storage", "chains", "--nodes", "40", "--ssds-per-node", "16",
                                            "--format", "json", cwd=tmp_path)
    assert code == 0, terminal
    assert json.loads(out)["num_nodes"] == 40
    assert "ETA" not in terminal and "ETA" not in out
