"""Find executables and run them, either capturing their output or relaying it line by line to stderr."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dsctl.errors import EnvironmentMissing


@dataclass(frozen=True)
class Completed:
    """A finished process: exit status and its captured text."""

    returncode: int
    stdout: str
    stderr: str


def require(executable: str, hint: str) -> str:
    """Absolute path of ``executable`` on PATH, or EnvironmentMissing (exit 3) with ``hint``."""
    found = shutil.which(executable)
    if found is None:
        raise EnvironmentMissing(f"{executable} not found on PATH: nothing was submitted", hint=hint)
    return found


def capture(argv: Sequence[str], *, cwd: Path | None = None, timeout_s: float = 120.0) -> Completed:
    """Run ``argv`` to the end and return its exit status and output (no shell)."""
    try:
        done = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return Completed(124, "", f"{argv[0]} did not answer within {timeout_s:.0f} s")
    except OSError as exc:
        raise EnvironmentMissing(f"cannot run {argv[0]}: {exc.strerror or exc}") from exc
    return Completed(done.returncode, done.stdout, done.stderr)


def relay(argv: Sequence[str], *, env: Mapping[str, str], cwd: Path | None = None) -> int:
    """Run ``argv`` with ``env`` added to this process's environment; copy its output to stderr; return its status.

    stdout of dsctl stays for dsctl's own result (``--format json`` remains parseable).
    """
    full_env = {**os.environ, **env}
    try:
        proc = subprocess.Popen(list(argv), cwd=cwd, env=full_env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace")
    except OSError as exc:
        raise EnvironmentMissing(f"cannot run {argv[0]}: {exc.strerror or exc}") from exc
    stream = proc.stdout
    if stream is not None:
        for line in stream:
            sys.stderr.write(line)
        stream.close()
    return proc.wait()
