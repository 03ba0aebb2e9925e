"""Run every benchmark case and print a table of median timings.

Each module ``benchmarks/bench_*.py`` defines ``CASES``: a list of ``Case(name, setup, run, target_s)``.
``setup()`` builds the inputs once (not timed) and returns them; ``run(inputs)`` is timed.
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
    print(f"{'case':<{width}}  {'median_s':>10}  {'min_s':>10}  {'target_s':>9}  ok")
    failures = 0
    for case in cases:
        inputs = case.setup()
        case.run(inputs)  # warm-up
        times = []
        for _ in range(max(1, args.repeat)):
            start = time.perf_counter()
            case.run(inputs)
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        ok = case.target_s is None or median <= case.target_s
        failures += not ok
        target = f"{case.target_s:>9.3f}" if case.target_s is not None else f"{'-':>9}"
        verdict = "yes" if ok else "NO"
        print(f"{case.name:<{width}}  {median:>10.4f}  {min(times):>10.4f}  {target}  {verdict}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
