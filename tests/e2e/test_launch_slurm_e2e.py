"""dsctl launch --backend slurm --submit on a real single-host Slurm cluster (tests/ci/slurm_up.sh).

- 4 emulated nodes x 2 gloo workers under real torchrun: the generated script's rendezvous, node ranks and
  DSCTL_* layout checked by tests/ci/layout_check.py (all_reduce in every pp/dp/ep/edp group, ranks.csv rows);
- DeepSeek-V3's 256-node script: accepted by ``sbatch --test-only`` and run with a stand-in torchrun (a shell
  script) that reports which node rank each of the 256 agents got;
- a failing payload: the job ends FAILED and dsctl exits 1.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Cli = Callable[..., Any]
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("slurm_cluster", "job_path")]


def stub_torchrun(folder: Path, body: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Put a shell script named torchrun first on PATH (sbatch passes PATH to the tasks)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "torchrun"
    script.write_text("#!/bin/bash\n" + body + "\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


def test_four_nodes_real_torchrun_layout(cli: Cli, tmp_path: Path, torch_ready: Path, cpu_profiles: Path,
                                         layout_check: Path) -> None:
    out = tmp_path / "job"
    reports = tmp_path / "reports"
    reports.mkdir()
    res = cli("--profiles-dir", cpu_profiles, "launch", "--nodes", "4", "--node-profile", "cpu2",
              "--model", "deepseek-v2-lite", "--pp", "2", "--ep", "2",  # the layout the check script verifies
              "--backend", "slurm", "--job-name", "e2e-torch", "--port", "29531",
              "--cpus-per-task", "2", "--submit", "--wait", "--wait-timeout-s", "300", "--out-dir", out, "-f", "json",
              "--", str(layout_check), "--ranks-csv", str(out / "ranks.csv"), "--report-dir", str(reports))
    data = res.json()
    log = Path(data["log_path"]).read_text() if data.get("log_path") else "(no log)"
    assert res.exit_code == 0, f"{res.stderr}\n{log[-3000:]}"
    assert (data["state"], data["job_exit_code"], data["layout"]) == ("COMPLETED", 0, "PP2 EP2 TP1 DP4")
    assert (reports / "ok.txt").read_text() == "layout_check OK world=8 pp=2 ep=2 tp=1 dp=4 edp=2 nodes=4\n"
    # one file per rank: lines from several srun tasks may interleave in the log
    lines = [(reports / f"rank-{r}.txt").read_text() for r in range(8)]
    assert all(re.match(rf"layout_check rank={r} node={r // 2} local={r % 2} .* ok$", line)
               for r, line in enumerate(lines)), lines
    assert "MISMATCH" not in log


def test_256_node_script_accepted(cli: Cli, tmp_path: Path, slurm_cluster: int) -> None:
    if slurm_cluster < 256:
        pytest.skip(f"the e2e cluster has {slurm_cluster} nodes (DSCTL_E2E_SLURM_NODES)")
    res = cli("launch", "--nodes", "256", "--backend", "slurm", "--submit", "--test-only", "--out-dir",
              tmp_path / "v3", "-f", "json", "--", "train.py", "--config", "v3.yaml")
    assert res.exit_code == 0, res.stderr
    message = res.json()["message"]
    assert re.match(r"Job \d+ to start at \S+ using 2048 processors on nodes n\[1-256\]", message), message


def test_256_node_script_runs_one_agent_per_node(cli: Cli, tmp_path: Path, slurm_cluster: int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    if slurm_cluster < 256:
        pytest.skip(f"the e2e cluster has {slurm_cluster} nodes (DSCTL_E2E_SLURM_NODES)")
    stub_torchrun(tmp_path / "bin", 'echo "agent node=$SLURMD_NODENAME pp=$DSCTL_PP ep=$DSCTL_EP args=$*"',
                  monkeypatch)
    out = tmp_path / "v3"
    res = cli("launch", "--nodes", "256", "--pp", "16", "--ep", "64",  # DeepSeek's layout (the search may tie it)
              "--backend", "slurm", "--job-name", "v3-stub", "--port", "29532",
              "--submit", "--wait", "--wait-timeout-s", "300", "--out-dir", out, "-f", "json", "--", "train.py")
    data = res.json()
    log = Path(data["log_path"]).read_text()
    assert res.exit_code == 0 and data["state"] == "COMPLETED", log[-3000:]
    agents = re.findall(r"agent node=n(\d+) pp=16 ep=64 args=--nnodes 256 --nproc-per-node 8 --node-rank (\d+) "
                        r"--master-addr (\S+) --master-port 29532 train\.py", log)
    assert len(agents) == 256, log[-3000:]
    node_rank = {int(name): int(rank) for name, rank, _ in agents}
    assert node_rank == {i + 1: i for i in range(256)}  # n1 -> 0 ... n256 -> 255: SLURM_NODEID order
    assert {addr for _, _, addr in agents} == {"127.0.0.1"}
    # node rank i holds ranks 8i..8i+7 in dsctl's rank map, as torchrun numbers them (GROUP_RANK x 8 + LOCAL_RANK)
    with (out / "ranks.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert all(int(row["node"]) == int(row["rank"]) // 8 for row in rows) and len(rows) == 2048


def test_failing_payload_fails_the_job(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       cpu_profiles: Path) -> None:
    stub_torchrun(tmp_path / "bin", 'case "$*" in *"--node-rank 1 "*) echo "rank 1 fails"; exit 7;; esac; sleep 2',
                  monkeypatch)
    res = cli("--profiles-dir", cpu_profiles, "launch", "--nodes", "4", "--node-profile", "cpu2",
              "--model", "deepseek-v2-lite", "--backend", "slurm", "--job-name", "e2e-fail", "--submit", "--wait",
              "--wait-timeout-s", "120", "--out-dir", tmp_path / "f", "-f", "json", "--", "train.py")
    assert res.exit_code == 1, res.stdout + res.stderr
    data = res.json()
    assert data["state"] == "FAILED" and data["job_exit_code"] not in (None, 0)
    assert "rank 1 fails" in Path(data["log_path"]).read_text()


def test_slurm_user_options_are_accepted_by_sbatch(cli: Cli, tmp_path: Path, cpu_profiles: Path) -> None:
    """--exclusive, --exclude, --nodelist and a raw --sbatch-arg reach real sbatch, which accepts the job."""
    res = cli("--profiles-dir", cpu_profiles, "launch", "--nodes", "2", "--node-profile", "cpu2",
              "--model", "deepseek-v2-lite", "--backend", "slurm", "--job-name", "e2e-opts", "--cpus-per-task", "2",
              "--exclusive", "--exclude", "n3", "--nodelist", "n[1-2]", "--sbatch-arg=--comment=dsctl e2e",
              "--submit", "--test-only", "--out-dir", tmp_path / "opts", "-f", "json", "--", "train.py")
    assert res.exit_code == 0, res.stderr
    assert re.match(r"Job \d+ to start at \S+ using \d+ processors on nodes n\[1-2\]", res.json()["message"])
    missing = cli("--profiles-dir", cpu_profiles, "launch", "--nodes", "2", "--node-profile", "cpu2",
                  "--model", "deepseek-v2-lite", "--backend", "slurm", "--submit", "--test-only",
                  "--out-dir", tmp_path / "missing", "--", "no-such-train.py")
    assert missing.exit_code == 2 and "training script no-such-train.py does not exist" in missing.stderr
