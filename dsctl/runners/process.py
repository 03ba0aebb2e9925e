"""Find executables and run them, either capturing their output or relaying it line by line to stderr.

Every child runs in its own process group, and SIGINT, SIGTERM and SIGHUP to dsctl end the whole group (the
signal itself, then SIGKILL after ``STOP_GRACE_S``) before dsctl exits: an interrupted ``launch run`` or
``health fleet`` leaves no ``srun``, ``torchrun`` or node task behind (srun cancels its step on SIGTERM).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


#: seconds between the signal that stops a child's group and SIGKILL
STOP_GRACE_S = 5.0


class Stopped(SystemExit):
    """SIGTERM or SIGHUP arrived while a child ran: its group was ended; dsctl exits 128 + signal."""


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_group(proc: subprocess.Popen[Any], first: int = signal.SIGTERM, grace_s: float = STOP_GRACE_S) -> None:
    """End ``proc``'s process group: ``first`` to the group; when the leader has gone but others stay (a shell's
    background jobs ignore SIGINT), SIGTERM to them; SIGKILL to whatever is left after ``grace_s``."""
    deadline = time.monotonic() + grace_s
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, first)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace_s)
    if _group_alive(proc.pid) and first != signal.SIGTERM:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _group_alive(proc.pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@contextlib.contextmanager
def started(argv: Sequence[str], *, only: int | None = None, binary: bool = False,
            **popen: object) -> Iterator[subprocess.Popen[Any]]:
    """Start ``argv`` in its own process group (text mode unless ``binary``, ``popen`` as for Popen) and end that
    group when the block ends by a signal or an exception: SIGTERM/SIGHUP raise :class:`Stopped` and the group gets
    the same signal (Ctrl-C: SIGINT), or ``only`` when given (srun takes one SIGINT as a status request: it gets
    SIGTERM), then SIGKILL after ``STOP_GRACE_S``.

    The handlers are in place before the child starts; a signal that arrives while it starts is acted on as soon
    as Popen has returned, so no child outlives dsctl however early the signal comes. OSError from Popen is
    EnvironmentMissing (exit 3).
    """
    caught: list[int] = []
    child: list[subprocess.Popen[Any]] = []
    previous: dict[int, object] = {}
    if threading.current_thread() is threading.main_thread():
        def _handle(signum: int, _frame: object) -> None:
            if not child:  # Popen has not returned: unwinding now would lose the child
                caught.append(signum)
                return
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise Stopped(128 + signum)

        watched = [signal.SIGTERM, signal.SIGHUP]
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where Ctrl-C is ignored
            watched.append(signal.SIGINT)
        previous = {sig: signal.signal(sig, _handle) for sig in watched}
    try:
        try:
            text: dict[str, object] = {} if binary else {"text": True, "errors": "replace"}
            proc = subprocess.Popen(list(argv), start_new_session=True, **text,
                                    **popen)  # type: ignore[call-overload]
        except OSError as exc:
            raise EnvironmentMissing(f"cannot run {argv[0]}: {exc.strerror or exc}") from exc
        child.append(proc)
        if signal.SIGINT in previous:
            signal.signal(signal.SIGINT, previous.pop(signal.SIGINT))  # type: ignore[arg-type]
        try:
            if caught:
                if caught[0] == signal.SIGINT:
                    raise KeyboardInterrupt
                raise Stopped(128 + caught[0])
            yield proc
        except KeyboardInterrupt:
            stop_group(proc, only or signal.SIGINT)
            raise
        except Stopped as exc:
            stop_group(proc, only or int(exc.code or 143) - 128)
            raise
        except BaseException:
            stop_group(proc)
            raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]


def capture(argv: Sequence[str], *, cwd: Path | None = None, timeout_s: float = 120.0) -> Completed:
    """Run ``argv`` to the end and return its exit status and output (no shell; its own process group, ended
    on a timeout or a signal to dsctl)."""
    with started(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE) as proc:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            stop_group(proc, signal.SIGKILL, 0.0)
            proc.communicate()
            return Completed(124, "", f"{argv[0]} did not answer within {timeout_s:.0f} s")
    return Completed(proc.returncode, out, err)


def relay(argv: Sequence[str], *, env: Mapping[str, str], cwd: Path | None = None) -> int:
    """Run ``argv`` with ``env`` added to this process's environment; copy its output to stderr; return its status.

    stdout of dsctl stays for dsctl's own result (``--format json`` remains parseable).
    """
    full_env = {**os.environ, **env}
    with started(argv, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as proc:
        stream = proc.stdout
        if stream is not None:
            for line in stream:
                sys.stderr.write(line)
            stream.close()
        return proc.wait()
