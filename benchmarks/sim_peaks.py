"""CPU seconds and peak RSS of ``topology simulate`` at 16,384 GPUs, each case in a fresh process (issue 32).

    PYTHONPATH=. python -m benchmarks.sim_peaks [--nodes 2048] [--only alltoall-adaptive,ep-dispatch-adaptive]
        [--numpy]

Each child builds the MPFT plan (untimed), then times ``dsctl.topology.sim.run`` (graph, traffic, routing,
max-min) by its process CPU time and reports ``ru_maxrss``. Targets: all-to-all adaptive < 3 s, EP dispatch
< 5 s, ECMP < 8 s, each < 600 MB. ``solver``: ``numba`` where the dsctl[fast] kernels ran (ECMP planes, numba
installed; its import and cached-code load are inside the timed CPU), ``numpy`` otherwise; ``--numpy`` hides
numba from the children to time the reference.

The child runs ``run`` inside ``dsctl.runners.pages.small_pages()``, as ``dsctl topology simulate`` does (no
transparent huge pages for the process, prctl(PR_SET_THP_DISABLE): THP compaction on fault cost 1-2 s of system
time).

Issue 32, ECMP all-to-all at 16,384 GPUs on the shared 2-core machine (CPU seconds of one run vary by 1.5x with
the neighbours' load): main before issue 32 28.6-37.3 s / 630-638 MB. First pass: numba (dsctl[fast]) 5.9-10.7 s,
median 7.6 s (6 of 10 runs under 8 s), 514 MB. Second pass (buffers reused plane after plane, no huge pages,
fewer flow-long copies; load average 1.9-6.1): numba 5.0-7.5 s, median 5.6 s, 23 of 23 runs under 8 s, 509 MB
(per run: numba's import and cached code 0.5 s; per plane: routing 0.14 s, max-min 0.37-0.45 s); numpy
(--numpy) 23.2-26.1 s / 504 MB against main's 32.7 s / 555 MB side by side (two pairs). The other three cases:
adaptive 1.0-1.6 s / 387 MB, ep-dispatch 1.1-1.6 s / 508 MB, ep-combine 1.1-1.5 s / 508 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = {"alltoall-adaptive": ("alltoall", "adaptive", 3.0), "ep-dispatch-adaptive": ("ep-dispatch", "adaptive", 5.0),
         "ep-combine-adaptive": ("ep-combine", "adaptive", 5.0), "alltoall-ecmp": ("alltoall", "ecmp", 8.0)}
TARGET_MB = 600

CHILD = """
import json, resource, sys, time
if {numpy}:
    sys.modules["numba"] = None  # compiled.available() is then False: the numpy reference runs
from dsctl.topology.sim import compiled
from benchmarks.bench_topology_simulate import _plan_json
from dsctl.topology.sim import SimRequest, Workload, run
from dsctl.topology.sim.api import EpModel
from dsctl.runners.pages import small_pages
text = _plan_json({nodes})
start = time.process_time()
with small_pages():  # as dsctl topology simulate runs it
    result = run(text, "plan.json", 200e9, SimRequest(Workload("w", "{workload}"), "{routing}", 0,
                                                      model=EpModel(7168, 8, 4)))
cpu = time.process_time() - start
print(json.dumps({{"cpu_s": cpu, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "mirrored": len(result.mirrored_planes),
                  "solver": "numba" if sys.modules.get("numba") is not None else "numpy"}}))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sim_peaks", description=__doc__)
    parser.add_argument("--nodes", type=int, default=2048)
    parser.add_argument("--only", default=",".join(CASES))
    parser.add_argument("--numpy", action="store_true", help="hide numba: time the numpy reference")
    args = parser.parse_args(argv)
    failures = 0
    print(f"{'case':<24} {'GPUs':>7} {'cpu_s':>7} {'target':>7} {'rss_mb':>7} {'solver':>6} ok")
    # the caller's PYTHONPATH stays after the repository (where an extra such as numba was installed aside)
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    for name in args.only.split(","):
        workload, routing, target_s = CASES[name]
        code = CHILD.format(nodes=args.nodes, workload=workload, routing=routing, numpy=args.numpy)
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                             env={"PYTHONPATH": path, "PATH": "/usr/bin:/bin"})
        row = json.loads(out.stdout.strip().splitlines()[-1])
        ok = row["cpu_s"] <= target_s and row["rss_mb"] <= TARGET_MB
        failures += not ok
        print(f"{name:<24} {args.nodes * 8:>7,} {row['cpu_s']:>7.2f} {target_s:>7.1f} {row['rss_mb']:>7.0f} "
              f"{row['solver']:>6} {'yes' if ok else 'NO'}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
