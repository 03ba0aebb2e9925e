"""dsctl launch --backend/--out/--submit through the real entry point, with stand-in sbatch/torchrun/kubectl.

The stand-ins are small shell scripts on a PATH made for each test; the real engines run in tests/e2e.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

Cli = Callable[..., Any]
# DeepSeek's recipe keeps V2-Lite's activations small enough for pp 2; the layout is pinned (the search would choose)
V2_LITE_1 = ("launch", "--nodes", "1", "--model", "deepseek-v2-lite", "--pp", "2", "--ep", "4",
             "--schedule", "dualpipe", "--recipe", "deepseek")


@pytest.fixture(autouse=True)
def in_a_job_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from tmp_path, where the training scripts the tests name exist (--submit checks that they do)."""
    monkeypatch.chdir(tmp_path)
    for name in ("t.py", "train.py"):
        (tmp_path / name).write_text("print('train')\n")


def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scripts: dict[str, str]) -> Path:
    """Only these executables (plus the shell's basics through /bin) are on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text("#!/bin/sh\n" + body + "\n")
        path.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    return bin_dir


def test_out_writes_plan_and_slurm_job(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "job"
    res = cli("launch", "--nodes", "256", "--pp", "16", "--ep", "64", "--schedule", "dualpipe", "--backend", "slurm",
              "--job-name", "v3", "--out-dir", out, "-f", "json",
              "--", "train.py", "--config", "v3.yaml")
    assert res.exit_code == 0, res.stderr
    assert sorted(p.name for p in out.iterdir()) == [".dsctl-manifest.json", "job.sbatch", "layout.json", "ranks.csv"]
    assert res.json()["backend"] == "slurm" and res.json()["job_name"] == "v3"
    assert f"wrote job.sbatch, layout.json, ranks.csv to {out}" in res.stderr
    text = (out / "job.sbatch").read_text()
    assert "#SBATCH --nodes=256" in text and "export DSCTL_EP=64" in text
    assert json.loads((out / "layout.json").read_text())["layout"] == {"pp": 16, "ep": 64, "tp": 1, "dp": 128}


@pytest.mark.parametrize("backend", ["kubernetes", "k8s"])
def test_out_writes_kubernetes_manifests(cli: Cli, tmp_path: Path, backend: str) -> None:
    out = tmp_path / "k"
    res = cli("launch", "--nodes", "256", "--backend", backend, "--image", "reg/trainer:1", "--job-name", "v3",
              "--out-dir", out, "--", "train.py")
    assert res.exit_code == 0, res.stderr
    service, jobset = yaml.safe_load_all((out / "jobset.yaml").read_text())
    assert service["kind"] == "Service" and jobset["kind"] == "JobSet"
    assert jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 256


def test_out_writes_torchrun_script(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "t"
    res = cli("launch", "--nodes", "2", "--model", "deepseek-v2-lite", "--backend", "torchrun", "--hosts",
              "gpu1,gpu2", "--out-dir", out, "--", "train.py")
    assert res.exit_code == 0, res.stderr
    assert "--master-addr gpu1" in (out / "torchrun.sh").read_text()


@pytest.mark.parametrize(("args", "words"), [
    (("--backend", "kubernetes"), "needs --image"),
    (("--backend", "kubernetes", "--image", "i", "--job-name", "Big_Name"), "--job-name 'Big_Name'"),
    (("--backend", "slurm", "--port", "0"), "--port 0"),
    (("--backend", "torchrun"), "needs --hosts"),
    (("--backend", "torchrun", "--hosts", "a,,b"), "empty entry"),
    (("--backend", "slurm", "--hosts", "a,b,c,d"), "--hosts applies to --backend torchrun, not slurm"),
    (("--image", "i"), "--image applies to --backend kubernetes"),
    (("--backend", "kubernetes", "--image", "i", "--partition", "p"), "--partition applies to --backend slurm"),
])
def test_bad_job_options_write_nothing(cli: Cli, tmp_path: Path, args: tuple[str, ...], words: str) -> None:
    out = tmp_path / "never"
    res = cli("launch", "--nodes", "4", "--model", "deepseek-v2-lite", *args, "--out-dir", out, "--", "train.py")
    assert res.exit_code == 2
    assert words in res.stderr and "Traceback" not in res.stderr
    assert not out.exists() and res.stdout == ""


def test_backend_needs_the_training_command(cli: Cli, tmp_path: Path) -> None:
    res = cli("launch", "--nodes", "256", "--backend", "slurm", "--out-dir", tmp_path / "x")
    assert res.exit_code == 2 and "training command after '--'" in res.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("args", [("--submit",), ("--submit", "--backend", "kubernetes", "--wait"),
                                  ("--wait",), ("--test-only",), ("--submit", "--dry-run", "--backend", "slurm")])
def test_submit_option_rules(cli: Cli, tmp_path: Path, args: tuple[str, ...]) -> None:
    res = cli(*V2_LITE_1, *args, "--out-dir", tmp_path / "x", "--", "train.py")
    assert res.exit_code == 2, res.stderr
    assert res.stderr.startswith("error: ") and not (tmp_path / "x").exists()


def test_missing_sbatch_is_exit_3(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_bin(tmp_path, monkeypatch, {})
    res = cli(*V2_LITE_1, "--backend", "slurm", "--submit", "--out-dir", tmp_path / "x", "--", "train.py")
    assert res.exit_code == 3
    assert res.stderr.splitlines()[0] == "error: sbatch not found on PATH: nothing was submitted"
    assert "hint:" in res.stderr and not (tmp_path / "x").exists()


def test_slurm_submit_and_wait(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_bin(tmp_path, monkeypatch, {
        "sbatch": 'echo "$@" > "$0.args"; echo "4242;ci"',
        "scontrol": 'echo "JobId=4242 JobState=COMPLETED ExitCode=0:0 StdOut=/runs/x-4242.out"',
    })
    out = tmp_path / "run"
    res = cli(*V2_LITE_1, "--backend", "slurm", "--submit", "--wait", "--out-dir", out, "-f", "json", "--", "t.py")
    assert res.exit_code == 0, res.stderr
    data = res.json()
    assert (data["state"], data["job_id"], data["job_exit_code"]) == ("COMPLETED", "4242", 0)
    assert data["log_path"] == "/runs/x-4242.out" and data["out_dir"] == str(out)
    assert (tmp_path / "bin" / "sbatch.args").read_text().split() == ["--parsable", str(out / "job.sbatch")]
    assert f"#SBATCH --output={out}/dsctl-train-%j.out" in (out / "job.sbatch").read_text()


def test_slurm_submit_from_an_odd_folder(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a space must not cut the #SBATCH --output path; a literal '%' must not become a Slurm pattern
    fake_bin(tmp_path, monkeypatch, {"sbatch": "echo 5", "scontrol": 'echo "JobId=5 JobState=PENDING StdOut=/l"'})
    out = tmp_path / "my runs" / "100%"
    out.parent.mkdir()
    res = cli(*V2_LITE_1, "--backend", "slurm", "--submit", "--out-dir", out, "-f", "json", "--", "t.py")
    assert res.exit_code == 0, res.stderr
    line = next(x for x in (out / "job.sbatch").read_text().splitlines() if x.startswith("#SBATCH --output="))
    assert shlex.split(line)[1:] == [f"--output={tmp_path}/my runs/100%%/dsctl-train-%j.out"]


def test_slurm_failed_job_is_exit_1(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_bin(tmp_path, monkeypatch, {"sbatch": "echo 7",
                                     "scontrol": 'echo "JobId=7 JobState=FAILED ExitCode=3:0 StdOut=/l"'})
    res = cli(*V2_LITE_1, "--backend", "slurm", "--submit", "--wait", "--out-dir", tmp_path / "r", "--", "t.py")
    assert res.exit_code == 1
    assert "FAILED" in res.stdout and "the job ended FAILED" in res.stdout


def test_slurm_without_wait_reports_submitted(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_bin(tmp_path, monkeypatch, {"sbatch": "echo 8", "scontrol": 'echo "JobId=8 JobState=PENDING StdOut=/l"'})
    res = cli(*V2_LITE_1, "--backend", "slurm", "--submit", "--out-dir", tmp_path / "r", "-f", "json", "--", "t.py")
    assert res.exit_code == 0, res.stderr
    assert (res.json()["state"], res.json()["job_id"]) == ("SUBMITTED", "8")


def test_sbatch_refusal_is_reported(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_bin(tmp_path, monkeypatch, {
        "sbatch": 'echo "sbatch: error: Batch job submission failed: Requested node configuration is not '
                  'available" >&2; exit 1'})
    res = cli(*V2_LITE_1, "--backend", "slurm", "--submit", "--out-dir", tmp_path / "r", "--", "t.py")
    assert res.exit_code == 1
    assert "Requested node configuration is not available" in res.stderr.splitlines()[0]


def test_slurm_test_only(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_bin(tmp_path, monkeypatch, {
        "sbatch": 'echo "sbatch: Job 9 to start at 2026-11-29T12:00:00 using 8 processors on nodes n1" >&2'})
    res = cli(*V2_LITE_1, "--backend", "slurm", "--submit", "--test-only", "--out-dir", tmp_path / "r", "-f", "json",
              "--", "t.py")
    assert res.exit_code == 0, res.stderr
    assert res.json()["state"] == "ACCEPTED" and res.json()["message"].startswith("Job 9 to start")


def test_torchrun_submit_runs_locally_and_returns_its_code(cli: Cli, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    fake_bin(tmp_path, monkeypatch, {"torchrun": 'echo "args=$* pp=$DSCTL_PP ep=$DSCTL_EP"; exit 5'})
    # DeepSeek's recipe keeps V2-Lite's activations small enough for pp 2 (its profile's selective needs pp 8, ep 1)
    res = cli(*V2_LITE_1, "--recipe", "deepseek", "--backend", "torchrun", "--submit", "--out-dir", tmp_path / "r",
              "-f", "json", "--", "train.py", "--lr", "1")
    assert res.exit_code == 5
    assert "args=--standalone --nnodes 1 --nproc-per-node 8 train.py --lr 1 pp=2 ep=4" in res.stderr
    data = res.json()
    assert (data["state"], data["job_exit_code"], data["world_size"]) == ("EXITED", 5, 8)


def test_torchrun_submit_is_single_host(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_bin(tmp_path, monkeypatch, {"torchrun": "exit 0"})
    res = cli("launch", "--nodes", "2", "--model", "deepseek-v2-lite", "--backend", "torchrun", "--hosts", "a,b",
              "--submit", "--", "t.py")
    assert res.exit_code == 2 and "runs one node on this host" in res.stderr


def test_kubernetes_without_kubectl_refuses(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_bin(tmp_path, monkeypatch, {})
    res = cli(*V2_LITE_1, "--backend", "kubernetes", "--image", "i:1", "--submit", "--out-dir", tmp_path / "k",
              "--", "t.py")
    assert res.exit_code == 3
    assert res.stderr.splitlines()[0] == "error: kubectl not found on PATH: nothing was submitted"
    assert not (tmp_path / "k").exists()


def test_kubernetes_apply(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_bin(tmp_path, monkeypatch, {"kubectl": 'echo "jobset.jobset.x-k8s.io/dsctl-train created"'})
    res = cli(*V2_LITE_1, "--backend", "kubernetes", "--image", "i:1", "--submit", "--out-dir", tmp_path / "k",
              "-f", "json", "--", "t.py")
    assert res.exit_code == 0, res.stderr
    assert res.json()["state"] == "APPLIED" and res.json()["command"][1:] == ["apply", "-f",
                                                                              str(tmp_path / "k" / "jobset.yaml")]
    fake_bin(tmp_path, monkeypatch, {"kubectl": 'echo "The connection to the server was refused" >&2; exit 1'})
    res = cli(*V2_LITE_1, "--backend", "kubernetes", "--image", "i:1", "--submit", "--out-dir", tmp_path / "k2",
              "--", "t.py")
    assert res.exit_code == 1 and "connection to the server was refused" in res.stderr


def test_plan_that_does_not_fit_is_not_submitted(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_bin(tmp_path, monkeypatch, {"sbatch": "echo 1", "scontrol": 'echo "JobId=1 JobState=PENDING"'})
    args = ("launch", "--nodes", "4", "--backend", "slurm", "--submit", "--out-dir", tmp_path / "r")
    res = cli(*args, "--", "t.py")
    assert res.exit_code == 1 and "does not fit in GPU memory" in res.stderr
    assert not (tmp_path / "r").exists()
    res = cli(*args, "--force", "--", "t.py")
    assert res.exit_code == 0, res.stderr


def test_submit_default_folder_is_the_job_name(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_bin(tmp_path, monkeypatch, {"torchrun": "exit 0"})
    monkeypatch.chdir(tmp_path)
    res = cli(*V2_LITE_1, "--backend", "torchrun", "--submit", "--job-name", "mini", "--", "t.py")
    assert res.exit_code == 0, res.stderr
    assert sorted(os.listdir(tmp_path / "mini")) == [".dsctl-manifest.json", "layout.json", "ranks.csv", "torchrun.sh"]
    assert "EXITED" in res.stdout


def test_out_on_an_unwritable_file_system_exits_2(cli: Cli) -> None:
    res = cli(*V2_LITE_1, "--backend", "slurm", "--out-dir", "/proc/dsctl-job", "--", "train.py")
    assert res.exit_code == 2 and "--out-dir /proc/dsctl-job: cannot write" in res.stderr


def test_resubmit_into_the_folder_of_an_earlier_run_keeps_its_logs(cli: Cli, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Slurm writes JOB-%j.out into ./JOB_NAME: the manifest declares it, a re-submit is accepted, every log kept
    in the new folder (same inode: a running job keeps writing), anything else still refused."""
    fake_bin(tmp_path, monkeypatch, {"sbatch": "echo 8", "scontrol": 'echo "JobId=8 JobState=PENDING StdOut=/l"'})
    run = (*V2_LITE_1, "--backend", "slurm", "--submit", "--job-name", "proj", "--", "t.py")
    assert cli(*run).exit_code == 0
    folder = tmp_path / "proj"
    manifest = json.loads((folder / ".dsctl-manifest.json").read_text())
    assert manifest["job_outputs"] == ["proj-*.out"]
    (folder / "proj-8.out").write_text("step 1 loss 9.1\n")
    inode = (folder / "proj-8.out").stat().st_ino
    res = cli(*run)
    assert res.exit_code == 0, res.stderr
    assert (folder / "proj-8.out").read_text() == "step 1 loss 9.1\n" and (folder / "proj-8.out").stat().st_ino == inode
    assert sorted(os.listdir(tmp_path / "proj.prev")) == [".dsctl-manifest.json", "job.sbatch", "layout.json",
                                                          "ranks.csv"]
    (folder / "proj-9.out").write_text("second run\n")
    assert cli(*run).exit_code == 0  # the .prev (dsctl's files only) is replaced; both logs move on
    assert {"proj-8.out", "proj-9.out"} <= set(os.listdir(folder))
    assert not any(name.endswith(".out") for name in os.listdir(tmp_path / "proj.prev"))
    (folder / "notes.txt").write_text("mine")  # not a job output: the folder is foreign again
    (folder / "other-1.out").write_text("another job's log")
    res = cli(*run)
    assert res.exit_code == 2 and "notes.txt, other-1.out" in res.stderr, res.stderr
    assert (folder / "notes.txt").read_text() == "mine"


def test_a_prev_holding_job_outputs_is_refused_not_deleted(cli: Cli, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    fake_bin(tmp_path, monkeypatch, {"sbatch": "echo 8", "scontrol": 'echo "JobId=8 JobState=PENDING StdOut=/l"'})
    run = (*V2_LITE_1, "--backend", "slurm", "--submit", "--job-name", "proj", "--", "t.py")
    assert cli(*run).exit_code == 0 and cli(*run).exit_code == 0
    (tmp_path / "proj.prev" / "proj-3.out").write_text("log of an interrupted run")
    res = cli(*run)
    assert res.exit_code == 2 and "job outputs (proj-3.out)" in res.stderr, res.stderr
    assert (tmp_path / "proj.prev" / "proj-3.out").read_text() == "log of an interrupted run"
