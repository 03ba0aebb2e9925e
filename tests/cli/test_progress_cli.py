"""Progress on stderr: drawn on a terminal for table output once work passes DELAY_S; silent for pipes, for
--format json/yaml and for short work. Real commands, with stderr a (fake) terminal."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest

import dsctl.output.progress as progress_module
from dsctl.cli import main
from dsctl.commands._common import SETTINGS
from dsctl.output.formats import OutputFormat
from dsctl.output.progress import progress, sleep_reporting

ROOT = Path(__file__).resolve().parents[2]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def no_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_module, "DELAY_S", 0.0)
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLUMNS", "160")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("DSCTL_PROFILES", raising=False)


def run(*args: object, tty: bool = True) -> tuple[int, str, str]:
    out, err = io.StringIO(), Terminal() if tty else io.StringIO()
    SETTINGS.profiles_dir = None
    with redirect_stdout(out), redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def test_a_known_total_draws_bar_percent_elapsed_and_eta(no_delay: None) -> None:
    err = Terminal()
    with redirect_stderr(err), progress("sampling counters", OutputFormat.table, total=1.0) as report:
        sleep_reporting(0.6, report, step_s=0.1)
    text = err.getvalue()
    assert "sampling counters" in text and "ETA" in text and "elapsed" in text and "%" in text


def test_an_unknown_total_shows_the_status_and_elapsed_time(no_delay: None) -> None:
    err = Terminal()
    with redirect_stderr(err), progress("waiting for Slurm job x", OutputFormat.table) as report:
        report(status="Slurm job 42: RUNNING")
        time.sleep(0.6)
    text = err.getvalue()
    assert "Slurm job 42: RUNNING" in text and "elapsed" in text and "ETA" not in text


@pytest.mark.parametrize(("fmt", "tty"), [(OutputFormat.json, True), (OutputFormat.yaml, True),
                                          (OutputFormat.table, False), (None, True)])
def test_silent_for_scripts_and_pipes(no_delay: None, fmt: OutputFormat | None, tty: bool) -> None:
    err = Terminal() if tty else io.StringIO()
    with redirect_stderr(err), progress("work", fmt, total=2) as report:
        report(1)
        time.sleep(0.3)
    assert err.getvalue() == ""


def test_short_work_stays_silent_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_module, "DELAY_S", 5.0)
    err = Terminal()
    with redirect_stderr(err), progress("work", OutputFormat.table, total=2) as report:
        report(1)
    assert err.getvalue() == ""


def test_live_health_sampling_shows_progress_then_the_report(no_delay: None, tmp_path: Path) -> None:
    code, out, err = run("health", "check", "--only", "rdma", "--sysfs-root", tmp_path, "--interval-s", "0.8")
    assert code == 0 and "sampling counters" in err and "ETA" in err
    assert "GPUs not sampled" in out and "\x1b" not in out  # the table on stdout is untouched
    code, out, err = run("health", "check", "--only", "rdma", "--sysfs-root", tmp_path, "--interval-s", "0.5",
                         "-f", "json")
    assert code == 0 and err == "" and out.startswith("{")
    code, out, err = run("health", "check", "--only", "rdma", "--sysfs-root", tmp_path, "--interval-s", "0.5",
                         tty=False)
    assert code == 0 and err == ""


def test_storage_chains_and_topology_verify_show_a_status_line(no_delay: None, tmp_path: Path) -> None:
    code, _, err = run("storage", "chains", "--nodes", "60", "--ssds-per-node", "4")
    assert code == 0 and "chain table for 60 nodes" in err
    assert run("topology", "plan", "--nodes", "16", "--out-dir", tmp_path / "plan", "-f", "json")[0] == 0
    links = tmp_path / "links.csv"
    links.write_text("a_device,a_port,b_device,b_port\n")
    code, _, err = run("topology", "verify", tmp_path / "plan", links)
    assert code == 1 and "checking every cable" in err


def test_eplb_balanced_reports_its_refinement_steps(no_delay: None, tmp_path: Path) -> None:
    stats = tmp_path / "stats.npy"
    np.save(stats, np.random.default_rng(0).zipf(1.5, size=(4, 64)).astype(np.int64))
    code, _, err = run("eplb", "rebalance", stats, "-r", "80", "-g", "16", "-N", "2", "--algorithm", "balanced")
    assert code == 0, err
    assert "balanced placement" in err and "100%" in err


def test_slurm_wait_reports_every_state_it_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    import dsctl.runners.slurm as runner

    answers = iter(["PENDING", "RUNNING", "COMPLETED"])
    monkeypatch.setattr(runner, "status", lambda job_id: runner.JobStatus(job_id, next(answers), 0, None))
    seen: list[str] = []
    assert runner.wait("5", timeout_s=10, poll_s=0.0, on_poll=lambda s: seen.append(s.state)).state == "COMPLETED"
    assert seen == ["PENDING", "RUNNING"]


@pytest.mark.slow
def test_a_real_terminal_gets_the_line_and_a_pipe_does_not(tmp_path: Path) -> None:
    """dsctl in a pseudo-terminal (stderr a tty) vs stderr into a pipe, default delay: the 2.5 s sampling shows."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm", "COLUMNS": "120"}
    args = [sys.executable, "-m", "dsctl", "health", "check", "--only", "rdma", "--sysfs-root", str(tmp_path),
            "--interval-s", "2.5"]
    leader, follower = pty.openpty()
    proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=follower, env=env, check=False, timeout=60)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.returncode == 0
    assert b"sampling counters" in b"".join(chunks)
    piped = subprocess.run([*args[:-1], "0.1"], capture_output=True, env=env, check=False, timeout=60)
    assert piped.returncode == 0 and piped.stderr == b""


def test_launch_wait_shows_the_job_state_and_the_time_waited(no_delay: None, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Stand-in sbatch and scontrol (the job is RUNNING for three polls, then COMPLETED)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {
        "sbatch": 'echo "77;ci"',
        "scontrol": 'n=$(cat "$0.n" 2>/dev/null || echo 0); echo $((n + 1)) > "$0.n"\n'
                    'if [ "$n" -lt 3 ]; then s=RUNNING; else s=COMPLETED; fi\n'
                    'echo "JobId=77 JobState=$s ExitCode=0:0 StdOut=/l"',
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body + "\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.py").write_text("")
    args = ("launch", "--nodes", "1", "--model", "deepseek-v2-lite", "--backend", "slurm", "--submit", "--wait",
            "--out-dir", tmp_path / "run", "--", "t.py")
    code, out, err = run(*args)
    assert code == 0 and "COMPLETED" in out
    assert "Slurm job 77: RUNNING" in err and "elapsed" in err
    (bin_dir / "scontrol.n").unlink()
    code, out, err = run(*args[:-2], "-f", "json", "--", "t.py")
    assert code == 0 and err == "" and '"COMPLETED"' in out


def test_topology_simulate_and_trace_commands_show_a_line(no_delay: None, tmp_path: Path) -> None:
    """Issue 23: a large simulate (16,384 GPUs: 50 s) and a large trace (300 MB: 6 s) were silent."""
    sys.path.insert(0, str(ROOT / "tests"))
    import trace_builder as tb

    assert run("topology", "plan", "--nodes", "16", "--out-dir", tmp_path / "plan", "-f", "json")[0] == 0
    code, _, err = run("topology", "simulate", tmp_path / "plan", "--routing", "ecmp")
    assert code == 0 and "simulating alltoall (ecmp routing)" in err, err
    traces = []
    for rank in (0, 1):
        path = tmp_path / f"rank{rank}.json"
        path.write_bytes(tb.encode(tb.trace([tb.compute(0, 50), tb.nccl(10, 60)], rank=rank)))
        traces.append(path)
    for args in (("overlap", *traces), ("stragglers", *traces), ("timeline", *traces, "--out", tmp_path / "t.svg")):
        code, _, err = run("trace", *args, "--jobs", "1")
        assert code == 0 and "reading 2 trace files" in err and "100%" in err, (args, err)
    code, _, err = run("trace", "overlap", *traces, "-f", "json")
    assert code == 0 and err == ""
