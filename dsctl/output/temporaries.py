"""Temporaries of dsctl's writers: named with the writer's pid (so the next run can tell those of a killed run
and sweep them), scratch files for other programs, and SIGTERM/SIGHUP turned into an exception while output is
written, so ``finally`` blocks remove what was half made. The rule they serve is in :mod:`dsctl.output.files`."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dsctl.inputs import input_inside
from dsctl.names import ascii_digits


def temp_prefix(name: str) -> str:
    """Temporaries carry the writer's pid, so a later run can tell those of a killed run (pid gone)."""
    return f".{name}.dsctl-{os.getpid()}-"


def sweep_stale(parent: Path, name: str) -> None:
    """Remove temporaries a killed run (SIGKILL, power loss) left beside ``name``: their pid no longer runs."""
    prefix = f".{name}.dsctl-"
    try:
        entries = [e for e in os.scandir(parent) if e.name.startswith(prefix)]
    except OSError:
        return
    for entry in entries:
        pid_text = entry.name[len(prefix):].split("-", 1)[0]
        if not ascii_digits(pid_text) or int(pid_text) == os.getpid() or _alive(int(pid_text)):
            continue
        if input_inside(entry.path) is not None:
            continue  # named like a temporary, but the command reads it: never deleted
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            Path(entry.path).unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


@contextmanager
def scratch_file(name: str, content: str, prefix: str = "dsctl-") -> Iterator[Path]:
    """``content`` in a new private folder (mode 0700, under the temporary directory) as ``name`` while the block
    runs; the folder is removed afterwards. For a file another program reads (srun's names file), never an output."""
    with tempfile.TemporaryDirectory(prefix=prefix) as folder:
        path = Path(folder) / name
        path.write_text(content, encoding="utf-8")
        yield path


class Terminated(SystemExit):
    """SIGTERM/SIGHUP arrived while output was being written: unwind (removing temporaries), exit 128+signal."""


@contextmanager
def cleanup_on_signals() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into an exception for the duration, so ``finally`` blocks remove temporaries.

    (SIGINT already raises KeyboardInterrupt; SIGKILL cannot be caught: :func:`sweep_stale` handles that.)
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, _frame: object) -> None:
        raise Terminated(128 + signum)

    previous = {sig: signal.signal(sig, _raise) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
