"""dsctl health fleet over the emulated Slurm nodes of tests/ci/slurm_up.sh (run it first; needs root).

    SLURM_CI_NODES=256 SLURM_CI_CPUS=8 SLURM_CI_GPUS=8 bash tests/ci/slurm_up.sh
    python -m benchmarks.fleet_slurm [--nodes 'n[1-256]'] [--slots 24]
    bash tests/ci/slurm_down.sh

Three timed runs over the same nodes, to say what dominates:
1. the fan-out alone: srun runs ``sh -c 'echo {}'`` on every node (allocation, step launch, labelled output);
2. one ``dsctl health check --format json --from-record`` on this host (Python start-up plus the checks);
3. ``dsctl health fleet`` end to end, every node replaying the healthy H800 record.

One host emulates every node, so at most ``--slots`` dsctl processes run at once (each needs ~60 MB); on a real
fleet each node runs its own check and the wall time is about (1) plus (2) plus the counter interval.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dsctl.health.fleet import NodeInput, aggregate
from dsctl.runners.fleet import expand_hostlist, run_on_nodes

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "tests" / "data" / "health" / "hgx_h800_healthy.yaml"
TARGET_S = 60.0


def node_command(folder: Path, slots: int) -> Path:
    """dsctl as each emulated node runs it, with at most ``slots`` at once on this host."""
    (folder / "slots").mkdir()
    script = folder / "dsctl-on-node"
    script.write_text("#!/bin/sh\n"
                      f"export PYTHONPATH={ROOT}\n"
                      "[ -d /dev/shm ] && export TMPDIR=/dev/shm\n"  # replays render a sysfs tree per node
                      f'exec flock {folder}/slots/$(( ${{SLURMD_NODENAME#n}} % {slots} )) '
                      f'{sys.executable} -m dsctl "$@"\n')
    script.chmod(0o755)
    return script


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fleet_slurm", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default=None, help="hostlist (default: every node sinfo lists)")
    parser.add_argument("--slots", type=int, default=24, help="dsctl processes at once on this host")
    parser.add_argument("--timeout", type=float, default=300.0, help="per-node timeout, seconds")
    args = parser.parse_args(argv)
    if shutil.which("srun") is None or subprocess.run(["sinfo", "-h"], capture_output=True).returncode != 0:
        print("no Slurm cluster: start one with tests/ci/slurm_up.sh", file=sys.stderr)
        return 3
    spec = args.nodes or subprocess.run(["sinfo", "-h", "-o", "%N"], capture_output=True, text=True,
                                        check=True).stdout.split()[0]
    nodes = expand_hostlist(spec)
    with tempfile.TemporaryDirectory(prefix="dsctl-fleet-bench-") as tmp:
        folder = Path(tmp)
        records = folder / "records"
        records.mkdir()
        for node in nodes:
            shutil.copyfile(RECORD, records / f"{node}.yaml")
        dsctl = node_command(folder, args.slots)

        t0 = time.perf_counter()
        fan = run_on_nodes(nodes, ["sh", "-c", "echo {}"], timeout_s=args.timeout)
        fan_s = time.perf_counter() - t0
        assert all(a.answered for a in fan.answers), [a.reason for a in fan.answers if not a.answered][:3]

        cmd = [str(dsctl), "health", "check", "--format", "json", "--from-record", str(records / f"{nodes[0]}.yaml")]
        t0 = time.perf_counter()
        cpu0 = _children_cpu_s()
        subprocess.run(cmd, capture_output=True, check=False, env={**os.environ, "SLURMD_NODENAME": nodes[0]})
        one_s = time.perf_counter() - t0
        one_cpu_s = _children_cpu_s() - cpu0

        cmd = [str(dsctl), "health", "check", "--format", "json", "--from-record", str(records / "{node}.yaml")]
        t0 = time.perf_counter()
        run = run_on_nodes(nodes, cmd, timeout_s=args.timeout, ok_exit_codes=(0, 1))
        report = aggregate([NodeInput(a.node, a.document, a.reason) for a in run.answers])
        fleet_s = time.perf_counter() - t0
    cores = os.cpu_count() or 1
    print(f"{'case':<52}  {'wall_s':>8}")
    print(f"{f'srun fan-out, echo on {len(nodes)} nodes':<52}  {fan_s:>8.2f}")
    print(f"{'one dsctl health check --from-record on this host':<52}  {one_s:>8.2f}  ({one_cpu_s:.2f} s CPU)")
    print(f"{f'health fleet over {len(nodes)} nodes ({cores} cores, {args.slots} slots)':<52}  {fleet_s:>8.2f}")
    print(f"summary: {report.summary}; target {TARGET_S:g} s: {'yes' if fleet_s <= TARGET_S else 'NO'}; "
          f"CPU of one check x nodes / cores = {one_cpu_s * len(nodes) / cores:.1f} s")
    return 0 if report.summary["healthy"] == len(nodes) and fleet_s <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
