"""CPU seconds and peak RSS of ``dsctl topology plan --out-dir`` for a full ft3 fabric, in a fresh process (issue 32).

    PYTHONPATH=. python -m benchmarks.plan_files_peak [--nodes 65536] [--radix 128]

The child is the CLI itself (plan, every file rendered and streamed into the staged folder, the folder swapped in);
CPU is its user + system time and the peak its ``ru_maxrss`` (``wait4``). Default: ft3 with 128-port switches and
65,536 8-GPU nodes = 524,288 endpoints, 1,572,864 cables, 670 MB of files. Targets: < 10 s CPU, < 1 GB.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_CPU_S = 10.0
TARGET_MB = 1024


def measure(nodes: int, radix: int) -> tuple[float, float, int]:
    """(CPU s, peak RSS MB, bytes written) of one ``topology plan --out-dir`` run."""
    with tempfile.TemporaryDirectory(prefix="dsctl-plan-peak-") as tmp:
        out = Path(tmp) / "plan"
        argv = [sys.executable, "-m", "dsctl", "topology", "plan", "--kind", "ft3", "--radix", str(radix),
                "--nodes", str(nodes), "--out-dir", str(out), "-f", "json"]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)})
        _, status, usage = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"dsctl topology plan exited {os.waitstatus_to_exitcode(status)}")
        size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.plan_files_peak", description=__doc__)
    parser.add_argument("--nodes", type=int, default=65536)
    parser.add_argument("--radix", type=int, default=128)
    args = parser.parse_args(argv)
    cpu_s, peak_mb, size = measure(args.nodes, args.radix)
    ok = cpu_s < TARGET_CPU_S and peak_mb < TARGET_MB
    print(f"ft3 radix {args.radix}, {args.nodes:,} nodes: {cpu_s:.2f} s CPU, {peak_mb:,.0f} MB peak, "
          f"{size / 1e6:,.0f} MB written (targets {TARGET_CPU_S:.0f} s, {TARGET_MB:,} MB): {'ok' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
