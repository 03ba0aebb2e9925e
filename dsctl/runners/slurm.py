"""sbatch and scontrol: submit a batch script, ask whether it would be accepted, wait for the end of a job."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dsctl.errors import DsctlError, ExitCode
from dsctl.names import ascii_digits
from dsctl.runners.process import capture, require
from dsctl.runners.slurm_nodes import last_line, scontrol_field

SBATCH_HINT = ("install Slurm's client tools (Debian: apt-get install slurm-client) on a host that can reach "
               "slurmctld, or use --out-dir DIR without --submit and run 'sbatch DIR/job.sbatch' there")

#: job states after which a job never runs again (squeue/scontrol words)
FINAL_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                          "PREEMPTED", "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED"})

_JOB_ID = re.compile(r"^(\d+)(;\S+)?$")
_FIELD = re.compile(r"(\w+)=(\S*)")


class SubmitRejected(DsctlError):
    """The scheduler refused the job (sbatch exited non-zero). Exit code 1: the check ran and said no."""

    exit_code = ExitCode.CHECK_FAILED


@dataclass(frozen=True)
class JobStatus:
    """One job as ``scontrol show job -o`` describes it."""

    job_id: str
    state: str
    exit_code: int | None
    log_path: str | None

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES


def parse_job_id(stdout: str) -> str:
    """The job id from ``sbatch --parsable`` output (``123`` or ``123;cluster``)."""
    line = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    match = _JOB_ID.match(line.strip())
    if not match:
        raise SubmitRejected(f"sbatch --parsable answered {stdout.strip()!r}, not a job id")
    return match.group(1)


def parse_job(job_id: str, text: str) -> JobStatus:
    """Parse ``scontrol show job -o ID``: ``JobState=...``, ``ExitCode=a:b`` (a = status, b = signal), ``StdOut=``."""
    fields = dict(_FIELD.findall(text))
    state = fields.get("JobState", "UNKNOWN")
    exit_code: int | None = None
    raw = fields.get("ExitCode", "")
    if raw:
        status, _, signal = raw.partition(":")
        if ascii_digits(status) and len(status) <= 3:  # exit statuses and signals are 0..255
            exit_code = int(status) or (128 + int(signal) if ascii_digits(signal) and len(signal) <= 3
                                        and int(signal) else 0)
    # a path may hold spaces: StdOut runs to the next " Key=" field (scontrol -o prints one line of Key=value)
    log = scontrol_field(text, "StdOut") or None
    return JobStatus(job_id, state, exit_code, log)


def submit(script: Path, *, cwd: Path) -> str:
    """``sbatch --parsable SCRIPT`` from ``cwd``; returns the job id or raises SubmitRejected with sbatch's words."""
    sbatch = require("sbatch", SBATCH_HINT)
    done = capture([sbatch, "--parsable", str(script)], cwd=cwd)
    if done.returncode != 0:
        said = last_line(done.stderr or done.stdout) or "(no message)"
        raise SubmitRejected(f"sbatch refused {script}: {said}",
                             hint=f"the script was written to {script}; fix the request or the cluster and rerun")
    return parse_job_id(done.stdout)


def would_accept(script: Path, *, cwd: Path) -> str:
    """``sbatch --test-only SCRIPT``: the scheduler's answer (``Job N to start at ...``); nothing is queued."""
    sbatch = require("sbatch", SBATCH_HINT)
    done = capture([sbatch, "--test-only", str(script)], cwd=cwd)
    answer = last_line(done.stderr or done.stdout) or "(no message)"
    if done.returncode != 0:
        raise SubmitRejected(f"sbatch --test-only refused {script}: {answer}")
    return answer.removeprefix("sbatch: ")


def status(job_id: str) -> JobStatus:
    """The job's current state from scontrol.

    ``UNKNOWN`` once slurmctld has forgotten the job (``Invalid job id``); ``UNREACHABLE`` when scontrol failed
    otherwise (slurmctld busy or down), which :func:`wait` treats as "ask again".
    """
    scontrol = require("scontrol", SBATCH_HINT)
    done = capture([scontrol, "show", "job", "-o", job_id], timeout_s=30)
    if done.returncode != 0:
        gone = "invalid job id" in (done.stderr + done.stdout).lower()
        return JobStatus(job_id, "UNKNOWN" if gone else "UNREACHABLE", None, None)
    return parse_job(job_id, done.stdout)


def wait(job_id: str, *, timeout_s: float, poll_s: float = 0.5,
         on_poll: Callable[[JobStatus], None] | None = None) -> JobStatus:
    """Poll scontrol until the job reaches a final state or ``timeout_s`` passes (then the last state seen).

    Polls every ``poll_s`` seconds (``sbatch --wait`` backs off to much longer intervals); ``on_poll`` sees
    every state read (progress display).
    """
    deadline = time.monotonic() + timeout_s
    current = status(job_id)
    while not current.final and current.state != "UNKNOWN" and time.monotonic() < deadline:
        if on_poll is not None:
            on_poll(current)
        time.sleep(poll_s)
        current = status(job_id)
    return current
