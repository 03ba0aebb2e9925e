"""What ``dsctl launch --submit`` reports."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LaunchRun:
    """The outcome of a submission.

    ``state`` is the engine's word for it: ``SUBMITTED`` (Slurm, without ``--wait``), a Slurm job state
    (``COMPLETED``, ``FAILED``, ``CANCELLED``, ``TIMEOUT`` ...), ``EXITED`` (torchrun) or ``APPLIED`` (kubectl).
    ``job_exit_code`` is the job's or process's own exit status when known; ``exit_code`` is dsctl's
    (0 success, 1 the job ran and failed). ``log_path`` is where the job's output went, when known.
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
    exit_code: int = 0
