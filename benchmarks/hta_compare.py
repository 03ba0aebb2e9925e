"""Side by side with Holistic Trace Analysis (HTA), outside the test suite and outside dsctl's dependencies.

HTA goes into its own virtual environment (never dsctl's)::

    python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install HolisticTraceAnalysis
    python -m benchmarks.hta_compare --hta-python /tmp/hta-venv/bin/python TRACE_DIR

For each tool: wall time and peak RSS of a child process, and the overlap figures it reports for every rank in
TRACE_DIR (HTA: ``get_comm_comp_overlap`` and the kernel-type breakdown; dsctl: ``trace overlap --format json``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HTA_SCRIPT = r"""
import json, sys, warnings
warnings.filterwarnings("ignore")
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=sys.argv[1])
overlap = ta.get_comm_comp_overlap(visualize=False)
out = {"overlap": {str(k): v for k, v in overlap.set_index("rank")["comp_comm_overlap_pctg"].to_dict().items()}}
try:
    types, _ = ta.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True)
    out["kernel_types"] = {str(r["kernel_type"]): float(r["sum"]) for _, r in types.iterrows()}
except Exception as exc:
    out["kernel_types"] = {"error": str(exc)[:200]}
print(json.dumps(out, default=str))
"""


_PEAK = "import resource, subprocess, sys; subprocess.run(sys.argv[1:]); " \
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)"


def run(argv: list[str]) -> tuple[float, float, str, str]:
    """Wall seconds, peak RSS (MB) of the largest process of ``argv`` (measured by a fresh wrapper), output."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _PEAK, *argv], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    lines = done.stderr.strip().splitlines()
    peak_kb = float(lines[-1]) if lines and lines[-1].isdigit() else float("nan")
    return wall, peak_kb / 1024, done.stdout, "\n".join(lines[:-1])[-500:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hta_compare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace_dir", type=Path)
    parser.add_argument("--hta-python", default="/tmp/hta-venv/bin/python")
    args = parser.parse_args(argv)
    wall, rss, out, err = run([args.hta_python, "-c", HTA_SCRIPT, str(args.trace_dir)])
    print(f"HTA: {wall:.2f} s, peak RSS {rss:.0f} MB")
    print(out.strip() or err)
    wall, rss, out, err = run([sys.executable, "-m", "dsctl", "trace", "overlap", str(args.trace_dir / "*.json*"),
                               "--format", "json", "--jobs", "1"])
    print(f"dsctl: {wall:.2f} s, peak RSS {rss:.0f} MB")
    if out:
        for row in json.loads(out)["ranks"]:
            print(json.dumps({k: row[k] for k in ("source", "rank", "comm_busy_us", "overlapped_us",
                                                   "exposed_comm_us", "overlap_ratio")}))
            print(json.dumps({c["category"]: c["kernel_us"] for c in row["categories"]}))
    else:
        print(err)
    return 0


if __name__ == "__main__":
    sys.exit(main())
