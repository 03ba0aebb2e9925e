"""dsctl.runners.process: a signal that arrives while a child starts still ends the child's process group."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from dsctl.runners import process


def _alive(pid: int) -> bool:
    state = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True).stdout.strip()
    return bool(state) and not state.startswith("Z")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_during_popen_is_acted_on_once_the_child_has_started(monkeypatch: pytest.MonkeyPatch,
                                                                       sig: signal.Signals) -> None:
    """The signal is sent from inside Popen (after the child exists, before Popen returns): the window in which
    a fleet run under load lost its srun (the handlers used to be installed after Popen)."""
    real = subprocess.Popen
    pids: list[int] = []

    def popen_then_signal(*args: object, **kwargs: object) -> subprocess.Popen[str]:
        proc = real(*args, **kwargs)  # type: ignore[call-overload]
        pids.append(proc.pid)
        os.kill(os.getpid(), sig)
        return proc

    monkeypatch.setattr(subprocess, "Popen", popen_then_signal)
    expected = KeyboardInterrupt if sig == signal.SIGINT else process.Stopped
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    with pytest.raises(expected), process.started(["sleep", "300"], stdin=subprocess.DEVNULL):
        time.sleep(5)
        pytest.fail("the block ran although a signal had arrived")
    monkeypatch.undo()  # _alive runs ps through subprocess
    assert pids and not _alive(pids[0])
    assert {s: signal.getsignal(s) for s in before} == before


def test_a_child_that_cannot_start_is_an_environment_error() -> None:
    from dsctl.errors import EnvironmentMissing

    with pytest.raises(EnvironmentMissing, match="cannot run"), process.started(["/nonexistent/srun"]):
        pass
