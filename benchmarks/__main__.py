"""Run every benchmark case and print a table of median timings.

Each module ``benchmarks/bench_*.py`` defines ``CASES``: a list of ``Case(name, setup, run, target_s)``.
``setup()`` builds the inputs once (not timed) and returns them; ``run(inputs)`` is timed: wall seconds (the
target's unit) and this process's CPU seconds (``cpu_s``, what a shared machine measures fairly; child processes
not counted). A target marked ``c`` is in CPU seconds.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import statistics
import sys
import time
from pathlib import Path

from benchmarks.case import Case


def discover() -> list[Case]:
    cases: list[Case] = []
    folder = Path(__file__).parent
    for info in sorted(pkgutil.iter_modules([str(folder)]), key=lambda m: m.name):
        if info.name.startswith("bench_"):
            module = importlib.import_module(f"benchmarks.{info.name}")
            cases.extend(getattr(module, "CASES", []))
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--filter", default="", help="run only cases whose name contains this text")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per case (median is reported)")
    args = parser.parse_args(argv)
    cases = [c for c in discover() if args.filter in c.name]
    if not cases:
        print(f"no benchmark case matches {args.filter!r}", file=sys.stderr)
        return 2
    width = max(len(c.name) for c in cases)
    print(f"{'case':<{width}}  {'median_s':>10}  {'min_s':>10}  {'cpu_s':>8}  {'target_s':>9}  ok")
    failures = 0
    for case in cases:
        inputs = case.setup()
        case.run(inputs)  # warm-up
        times = []
        cpu_times = []
        for _ in range(max(1, args.repeat)):
            start, start_cpu = time.perf_counter(), time.process_time()
            case.run(inputs)
            times.append(time.perf_counter() - start)
            cpu_times.append(time.process_time() - start_cpu)
        median, median_cpu = statistics.median(times), statistics.median(cpu_times)
        ok = case.target_s is None or (median_cpu if case.target_cpu else median) <= case.target_s
        failures += not ok
        unit = "c" if case.target_cpu else " "
        target = f"{case.target_s:>8.3f}{unit}" if case.target_s is not None else f"{'-':>9}"
        verdict = "yes" if ok else "NO"
        print(f"{case.name:<{width}}  {median:>10.4f}  {min(times):>10.4f}  {median_cpu:>8.3f}  "
              f"{target}  {verdict}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
