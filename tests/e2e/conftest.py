"""End-to-end fixtures: a real single-host Slurm cluster (tests/ci/slurm_up.sh) and real torchrun.

When slurm-wlm or torch is missing these tests SKIP with the reason locally, and FAIL when CI=true, so that CI
cannot pass without running them (.ci/run installs both).
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CI_DIR = Path(__file__).resolve().parents[1] / "ci"
LAYOUT_CHECK = CI_DIR / "layout_check.py"
#: emulated nodes; 256 so that a DeepSeek-V3-sized script can be accepted and run with a light payload
SLURM_NODES = int(os.environ.get("DSCTL_E2E_SLURM_NODES", "256"))
SLURM_DIR = os.environ.get("SLURM_CI_DIR", "/tmp/dsctl-slurm")
#: slurmd runs this as HealthCheckProgram every HEALTH_CHECK_INTERVAL_S on every node; a no-op until a test
#: (tests/e2e/test_health_slurm_e2e.py) swaps in a script that runs dsctl health check --slurm-healthcheck
HEALTH_CHECK_PROGRAM = Path(SLURM_DIR) / "health_check.sh"
HEALTH_CHECK_NOOP = "#!/bin/sh\nexit 0\n"
HEALTH_CHECK_INTERVAL_S = 10


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def need(ok: bool, reason: str) -> None:
    """Skip (locally) or fail (CI=true) when a real component is missing."""
    if ok:
        return
    if in_ci():
        pytest.fail(f"CI=true but {reason}: .ci/run must install it", pytrace=False)
    pytest.skip(reason)


def env_bin() -> Path:
    """The folder of this interpreter's scripts (torchrun of the same environment)."""
    return Path(sys.executable).parent


@pytest.fixture(scope="session")
def torch_ready() -> Path:
    """Path of torchrun next to this Python, with torch importable."""
    torchrun = env_bin() / "torchrun"
    need(importlib.util.find_spec("torch") is not None and torchrun.exists(),
         "torch is not installed in this environment (pip install torch==2.13.0)")
    return torchrun


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[int]:
    """Start munge + slurmctld + SLURM_NODES slurmd (8 fake GPUs, 8 CPUs each) for the session; stop at the end."""
    need(shutil.which("slurmctld") is not None and shutil.which("sbatch") is not None,
         "Slurm is not installed (apt-get install slurm-wlm munge)")
    extra = "\n".join([os.environ.get("SLURM_CI_EXTRA_CONF", ""), f"HealthCheckProgram={HEALTH_CHECK_PROGRAM}",
                       f"HealthCheckInterval={HEALTH_CHECK_INTERVAL_S}", "HealthCheckNodeState=ANY"]).strip()
    env = {**os.environ, "SLURM_CI_NODES": str(SLURM_NODES), "SLURM_CI_GPUS": "8", "SLURM_CI_CPUS": "8",
           "SLURM_CI_DIR": SLURM_DIR, "SLURM_CI_EXTRA_CONF": extra}
    with _machine_lock(Path(SLURM_DIR + ".lock")):
        subprocess.run(["bash", str(CI_DIR / "slurm_down.sh")], env=env, capture_output=True, check=False)
        set_health_check_program(HEALTH_CHECK_NOOP)
        up = subprocess.run(["bash", str(CI_DIR / "slurm_up.sh")], env=env, capture_output=True, text=True,
                            check=False, timeout=300)
        if up.returncode != 0:
            pytest.fail(f"tests/ci/slurm_up.sh failed ({up.returncode}):\n{up.stdout[-2000:]}\n"
                        f"{up.stderr[-2000:]}", pytrace=False)
        try:
            yield SLURM_NODES
        finally:
            subprocess.run(["bash", str(CI_DIR / "slurm_down.sh")], env=env, capture_output=True, check=False,
                           timeout=300)


def set_health_check_program(text: str) -> None:
    """Replace the cluster's HealthCheckProgram atomically (slurmd never runs a half-written script)."""
    HEALTH_CHECK_PROGRAM.parent.mkdir(parents=True, exist_ok=True)
    tmp = HEALTH_CHECK_PROGRAM.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.chmod(0o755)
    os.replace(tmp, HEALTH_CHECK_PROGRAM)


@pytest.fixture
def health_check_program(slurm_cluster: int) -> Iterator[Callable[[str], None]]:
    """Set the text of the cluster's HealthCheckProgram for one test (run every HEALTH_CHECK_INTERVAL_S s on
    every node); the no-op comes back afterwards."""
    yield set_health_check_program
    set_health_check_program(HEALTH_CHECK_NOOP)


def resume_nodes(names: list[str], timeout_s: float = 60.0) -> None:
    """``scontrol update State=RESUME``, then wait until sinfo shows every node idle and responding: slurmctld pings a
    resumed node first (``idle*``), and a job submitted in between is refused."""
    subprocess.run(["scontrol", "update", f"NodeName={','.join(names)}", "State=RESUME"], check=False,
                   capture_output=True, timeout=60)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        out = subprocess.run(["sinfo", "-h", "-N", "-n", ",".join(names), "-o", "%T"], check=False,
                             capture_output=True, text=True, timeout=60).stdout.split()
        if out and all(state == "idle" for state in out):
            return
        time.sleep(0.5)


@pytest.fixture(scope="session")
def resume() -> Callable[[list[str]], None]:
    """Give drained nodes back to the session's later tests (see resume_nodes)."""
    return resume_nodes


@contextmanager
def _machine_lock(path: Path, timeout_s: float = 900.0) -> Iterator[None]:
    """One test session at a time owns the machine's Slurm (/etc/slurm/slurm.conf, the daemons): wait for it."""
    with path.open("a") as handle:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"another test session held {path} for {timeout_s:.0f} s", pytrace=False)
                time.sleep(1.0)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture
def job_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Put this environment's scripts (torchrun) first on PATH: sbatch passes PATH on to every task. Run from
    tmp_path, which holds the train.py the tests name (--submit checks that the training script exists)."""
    monkeypatch.setenv("PATH", f"{env_bin()}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("raise SystemExit('a stand-in: the tests replace torchrun')\n")


def cpu_node_profile(folder: Path, gpus: int, nic_rate: str = "1 Gb/s") -> Path:
    """A profiles folder with node profile ``cpu{gpus}``: ``gpus`` workers per node, HBM large enough to fit,
    compute NICs of ``nic_rate``."""
    nodes = folder / "nodes"
    nodes.mkdir(parents=True, exist_ok=True)
    (nodes / f"cpu{gpus}.yaml").write_text(
        f"name: cpu{gpus}\n"
        "description: CPU stand-in for end-to-end tests (one gloo worker per 'GPU')\n"
        f"gpu: {{model: none, count: {gpus}, hbm: 4096 GiB, bf16_dense_tflops: 1, fp8_dense_tflops: 2}}\n"
        "nvlink: {bandwidth: 1 GB/s, links_per_gpu: 1}\n"
        f"compute_nics: {{count: {gpus}, model: loopback, rate: {nic_rate}, link_layer: ethernet}}\n"
        "storage_nics: {count: 1, rate: 1 Gb/s, link_layer: ethernet}\n")
    return folder


@pytest.fixture(scope="session")
def cpu_profiles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Profiles folder with node profiles cpu2 and cpu4 (for ``--profiles-dir``)."""
    folder = tmp_path_factory.mktemp("profiles")
    cpu_node_profile(folder, 2)
    cpu_node_profile(folder, 4)
    return folder


@pytest.fixture(scope="session")
def layout_check() -> Path:
    """The torchrun payload that checks the rank layout (tests/ci/layout_check.py)."""
    return LAYOUT_CHECK
