"""The engine half of ``dsctl launch``: write job files for ``--backend`` and run them with ``--submit``.

Thin glue: the renderers in ``dsctl.launch.engines`` make the text, ``dsctl.output.files`` writes it (all or
nothing), ``dsctl.runners`` starts sbatch / torchrun / kubectl.
"""

from __future__ import annotations

import glob
import time
from dataclasses import replace
from pathlib import Path

from dsctl.errors import InputError
from dsctl.launch.engines import kubernetes, slurm, torchrun
from dsctl.launch.engines.result import LaunchRun
from dsctl.launch.engines.spec import JobOptions, JobSpec, check_submittable, job_spec
from dsctl.launch.plan import LaunchPlan
from dsctl.output import render_json
from dsctl.output.files import write_files
from dsctl.output.progress import Report
from dsctl.output.yamltext import dump_yaml_documents
from dsctl.runners import process
from dsctl.runners import slurm as slurm_runner

#: the job file each backend writes next to layout.json and ranks.csv
JOB_FILE = {"slurm": "job.sbatch", "torchrun": "torchrun.sh", "kubernetes": "jobset.yaml"}

TORCHRUN_HINT = "install PyTorch in this environment (pip install torch), or use --out-dir DIR and run torchrun.sh"
KUBECTL_HINT = ("dsctl does not apply manifests without kubectl; write them with --out-dir DIR (no --submit) and "
                "apply DIR/jobset.yaml where a cluster is reachable (the JobSet controller must be installed)")


def check_training_script(train_command: tuple[str, ...], cwd: Path) -> None:
    """The training script (the first word after ``--``, unless it is a torchrun option such as ``-m``) must
    exist before a job is submitted: a 256-node allocation should not start only to fail on a typo.
    Relative paths are taken from ``cwd``, the folder the job runs in."""
    if not train_command or train_command[0].startswith("-"):
        return
    script = Path(train_command[0])
    path = script if script.is_absolute() else cwd / script
    if not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        raise InputError(f"training script {train_command[0]} {what} (looked in {path.parent}); nothing was "
                         "submitted", hint="the job runs in the folder dsctl is started from; give the script's "
                         "path relative to it, or an absolute path")


def plan_files(plan: LaunchPlan) -> dict[str, str]:
    """``layout.json`` and ``ranks.csv`` (the planning half's files)."""
    return {"layout.json": render_json(plan.layout_file()), "ranks.csv": plan.ranks.to_csv()}


def job_files(spec: JobSpec, options: JobOptions, backend: str) -> dict[str, str]:
    """The backend's job file, rendered from ``spec``."""
    if backend == "slurm":
        return {JOB_FILE[backend]: slurm.render_sbatch(spec, options)}
    if backend == "torchrun":
        return {JOB_FILE[backend]: torchrun.render_script(spec, options)}
    docs = kubernetes.manifests(spec, options)
    return {JOB_FILE[backend]: dump_yaml_documents(docs)}


def job_preview(plan: LaunchPlan, backend: str, options: JobOptions) -> dict[str, str]:
    """``--dry-run --backend B``: the job file ``--out-dir`` would write, by name; nothing is written."""
    return job_files(job_spec(plan, options, backend), options, backend)


def write_plan_and_job(plan: LaunchPlan, backend: str | None, options: JobOptions, out: Path) -> list[str]:
    """``--out-dir`` without ``--submit``: the plan files plus, with ``--backend``, the job file; returns the names."""
    files = plan_files(plan)
    if backend is not None:
        files.update(job_files(job_spec(plan, options, backend), options, backend))
    write_files(out, files)  # all or nothing; an OS refusal is exit 2 naming --out-dir
    return sorted(files)


def submit(plan: LaunchPlan, backend: str | None, options: JobOptions, out: Path | None, *, wait: bool,
           wait_timeout_s: float, test_only: bool, force: bool, report: Report | None = None) -> LaunchRun:
    """``--submit``: check everything, write the files, run the engine; nothing is written if a check fails.

    ``report`` (a progress line) sees the Slurm job's state while ``--wait`` waits.
    """
    if backend is None:  # LaunchRequest.check refuses --submit without --backend
        raise ValueError("submit() needs a backend")
    out_dir = (out if out is not None else Path(options.job_name)).absolute()
    if backend == "slurm":
        if any(c in str(out_dir) for c in "\n\r"):
            raise InputError(f"--out-dir {str(out_dir)!r}: a folder name with a line break cannot be written into an "
                             "#SBATCH line; choose another folder")
        # Slurm expands %j, %x, ... in --output: a literal '%' of the folder is written '%%'
        folder = str(out_dir).replace("%", "%%")
        options = replace(options, log_path=f"{folder}/{options.job_name}-%j.out")
    spec = job_spec(plan, options, backend)
    files = {**plan_files(plan), **job_files(spec, options, backend)}
    executable = {"slurm": ("sbatch", slurm_runner.SBATCH_HINT), "torchrun": ("torchrun", TORCHRUN_HINT),
                  "kubernetes": ("kubectl", KUBECTL_HINT)}[backend]
    found = process.require(*executable)
    if backend != "kubernetes":  # a pod runs the image's files, not this host's
        check_training_script(plan.train_command, Path.cwd())
    check_submittable(plan, force)
    from dsctl.inputs import note_input

    if plan.train_command and not plan.train_command[0].startswith("-"):
        note_input(plan.train_command[0], "training script")  # the job folder never replaces it
    # ./JOB_NAME (or --out-dir) is written only if absent, empty or written by dsctl: never a folder of the user's
    # Slurm writes the job's log (JOB-%j.out) into the folder: the manifest declares it, so re-submitting the
    # same job into it is accepted, and the logs of earlier runs are moved into the new folder, never deleted
    logs = [f"{glob.escape(options.job_name)}-*.out"] if backend == "slurm" else []
    write_files(out_dir, files, option="--out-dir" if out is not None else "--job-name folder", job_outputs=logs)
    job_path = out_dir / JOB_FILE[backend]
    base = LaunchRun(backend=backend, job_name=spec.job_name, layout=plan.layout.describe(),
                     world_size=plan.world_size, out_dir=str(out_dir), files=tuple(sorted(files)), command=(),
                     state="")
    started = time.monotonic()
    if backend == "slurm":
        return _slurm(base, job_path, wait=wait, wait_timeout_s=wait_timeout_s, test_only=test_only,
                      started=started, report=report)
    if backend == "torchrun":
        argv = (found, *torchrun.node_commands(spec, options)[0].argv[1:])
        code = process.relay(argv, env=dict(spec.env))
        return replace(base, command=argv, state="EXITED", job_exit_code=code,
                         elapsed_s=round(time.monotonic() - started, 1))
    argv = (found, "apply", "-f", str(job_path))
    done = process.capture(argv, timeout_s=300)
    if done.returncode != 0:
        raise slurm_runner.SubmitRejected(
            f"kubectl apply failed ({done.returncode}): {_last(done.stderr or done.stdout)}",
            hint=f"the manifests are in {job_path}; check 'kubectl config current-context' and the JobSet CRD")
    return replace(base, command=argv, state="APPLIED", message=_last(done.stdout))


def _slurm(base: LaunchRun, job_path: Path, *, wait: bool, wait_timeout_s: float, test_only: bool,
           started: float, report: Report | None = None) -> LaunchRun:
    cwd = Path.cwd()
    if test_only:
        answer = slurm_runner.would_accept(job_path, cwd=cwd)
        return replace(base, command=("sbatch", "--test-only", str(job_path)),
                         state="ACCEPTED", message=answer)
    job_id = slurm_runner.submit(job_path, cwd=cwd)
    command = ("sbatch", "--parsable", str(job_path))
    if not wait:
        status = slurm_runner.status(job_id)
        return replace(base, command=command, state="SUBMITTED", job_id=job_id,
                         log_path=status.log_path)
    def on_poll(current: slurm_runner.JobStatus) -> None:
        if report is not None:
            report(status=f"Slurm job {job_id}: {current.state}")

    status = slurm_runner.wait(job_id, timeout_s=wait_timeout_s, on_poll=on_poll)
    message = None if status.final else f"still {status.state} after --wait-timeout-s {wait_timeout_s:g} s"
    return replace(base, command=command, state=status.state, job_id=job_id,
                     job_exit_code=status.exit_code, log_path=status.log_path,
                     elapsed_s=round(time.monotonic() - started, 1), message=message)


def _last(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"
