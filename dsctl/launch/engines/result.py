"""What ``dsctl launch --submit`` reports."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from dsctl.errors import ExitCode

#: states of a job dsctl handed over without waiting for its end: Slurm queued it (or would accept it), kubectl
#: applied it
HANDED_OVER = ("SUBMITTED", "ACCEPTED", "APPLIED")


@dataclass(frozen=True)
class LaunchRun:
    """The outcome of a submission.

    ``state`` is the engine's word for it: ``SUBMITTED`` (Slurm, without ``--wait``), a Slurm job state
    (``COMPLETED``, ``FAILED``, ``CANCELLED``, ``TIMEOUT`` ...), ``EXITED`` (torchrun) or ``APPLIED`` (kubectl).
    ``job_exit_code`` is the job's or process's own exit status when known; :attr:`exit_code` is dsctl's.
    ``log_path`` is where the job's output went, when known.
    """

    backend: str
    job_name: str
    layout: str
    world_size: int
    out_dir: str
    files: tuple[str, ...]
    command: tuple[str, ...]
    state: str
    job_id: str | None = None
    job_exit_code: int | None = None
    log_path: str | None = None
    elapsed_s: float | None = None
    message: str | None = None

    @property
    def exit_code(self) -> int:
        """dsctl's exit code: 0 for a job handed over (:data:`HANDED_OVER`) or a Slurm job that ``COMPLETED``;
        torchrun's own status (it ran in the foreground); 1 for a waited Slurm job that ended otherwise or was
        still running at the timeout."""
        if self.state == "EXITED":
            return self.job_exit_code or 0
        if self.state in HANDED_OVER or self.state == "COMPLETED":
            return int(ExitCode.OK)
        return int(ExitCode.CHECK_FAILED)

    def to_data(self) -> dict[str, Any]:
        return {**{f.name: getattr(self, f.name) for f in fields(self)}, "exit_code": self.exit_code}
