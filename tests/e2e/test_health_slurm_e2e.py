"""dsctl health check --slurm as Slurm's HealthCheckProgram on the real single-host cluster.

slurmd runs the program (no arguments, an environment of SLURMD_NODENAME only) every HealthCheckInterval on every
node. The program here is what a site installs: a two-line script that execs ``dsctl health check --slurm``; each
emulated node replays its own record. A node with a CRIT finding must go DRAIN with dsctl's reason within one
interval; healthy and WARN-only nodes stay IDLE; every run ends well inside Slurm's 60 s limit.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "health"
#: node -> record: one critical (G6), one healthy, one with a WARN only
NODES = {"n2": "nvlink_link_down", "n3": "hgx_h800_healthy", "n4": "row_remap_pending"}
WAIT_S = 120.0


def node_line(node: str) -> tuple[str, str]:
    out = subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T|%E"], check=True, capture_output=True,
                         text=True).stdout.strip().splitlines()
    state, _, reason = out[0].partition("|")
    return state, reason


def ended(log: Path) -> list[str]:
    """``NODE rc=N s=S`` lines of finished runs."""
    return [line for line in log.read_text().splitlines() if not line.startswith("begin ")]


def in_flight(log: Path) -> bool:
    lines = log.read_text().splitlines()
    return sum(line.startswith("begin ") for line in lines) > len(lines) / 2


def test_health_check_program_drains_the_critical_node_only(slurm_cluster: int, tmp_path: Path,
                                                            health_check_program: Callable[[str], None],
                                                            resume: Callable[[list[str]], None]) -> None:
    if slurm_cluster < 4:
        pytest.skip("needs 4 emulated nodes")
    records = tmp_path / "records"
    records.mkdir()
    for node, record in NODES.items():
        shutil.copyfile(DATA / f"{record}.yaml", records / f"{node}.yaml")
    log = tmp_path / "runs.log"
    log.touch()
    names = "|".join(NODES)
    # dsctl runs only on the three nodes under test (the other emulated nodes share this host's CPUs)
    health_check_program(
        "#!/bin/sh\n"
        f'case "$SLURMD_NODENAME" in {names}) ;; *) exit 0;; esac\n'
        "start=$(date +%s)\n"
        f'echo "begin $SLURMD_NODENAME" >> {log}\n'
        f"PYTHONPATH={ROOT} {sys.executable} -m dsctl health check --slurm-healthcheck "
        f"--from-record '{records}/{{node}}.yaml' >/dev/null 2>&1\n"
        "rc=$?\n"
        f'echo "$SLURMD_NODENAME rc=$rc s=$(( $(date +%s) - start ))" >> {log}\n')
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            done = {line.split()[0] for line in ended(log)}
            if done >= set(NODES) and node_line("n2")[0] == "drained":
                break
            time.sleep(1.0)
        runs = ended(log)
        state, reason = node_line("n2")
        assert state == "drained", (state, reason, runs)
        assert reason.startswith("dsctl:G6 crit gpu3 1 NVLink(s) down"), reason
        assert node_line("n3")[0] == "idle" and node_line("n4")[0] == "idle"
        by_node = {line.split()[0]: line for line in runs}
        assert {n: by_node[n].split()[1] for n in NODES} == {"n2": "rc=1", "n3": "rc=0", "n4": "rc=0"}
        assert all(int(line.split("s=")[1]) < 60 for line in runs), runs  # Slurm kills it at 60 s
    finally:
        # stop the checks and let a run in flight end first: it would drain n2 again after the resume
        health_check_program("#!/bin/sh\nexit 0\n")
        time.sleep(2 + max([int(line.split("s=")[1]) for line in ended(log)], default=5))  # started, not logged
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and in_flight(log):
            time.sleep(0.5)
        resume(["n2"])
