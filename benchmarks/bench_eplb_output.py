"""``dsctl eplb rebalance --format json`` against ``--format table`` at 240 layers x 1,024 experts (1,280 slots on
64 GPUs of 8 nodes, 8 groups): the whole command in this process, stdout a file (so JSON is one line, as into a pipe),
and the indented JSON a terminal gets (DSCTL_JSON_INDENT=1) for comparison. Issue 32: JSON within 1.5x the
table's CPU.

``python -m benchmarks.bench_eplb_output [ROUNDS]`` runs each form in a fresh process ROUNDS times (default 5,
forms interleaved) and prints the median and least CPU seconds, peak RSS and the ratios to the table (the least
is the run the shared machine disturbed least).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np

from benchmarks.case import Case

LAYERS, EXPERTS = 240, 1024
ARGS = ["-r", "1280", "-g", "64", "-N", "8", "--groups", "8"]
STATS = Path(tempfile.gettempdir()) / f"dsctl-bench-eplb-{LAYERS}x{EXPERTS}.npy"
FORMS = {"table": ("table", None), "json": ("json", "0"), "json-indented": ("json", "1")}


def prepare() -> Path:
    """Zipf-like expert loads with per-layer noise, written once as .npy."""
    if not STATS.exists():
        rng = np.random.default_rng(7)
        loads = (1e6 / np.arange(1, EXPERTS + 1))[None, :] * rng.lognormal(0, 0.3, (LAYERS, EXPERTS))
        np.save(STATS, np.round(loads).astype(np.int64))
    return STATS


def run(stats: Path, form: str) -> int:
    """The whole command, stdout into a scratch file; returns the exit status."""
    from dsctl.cli import main

    fmt, indent = FORMS[form]
    before = os.environ.get("DSCTL_JSON_INDENT")
    if indent is None:
        os.environ.pop("DSCTL_JSON_INDENT", None)
    else:
        os.environ["DSCTL_JSON_INDENT"] = indent
    try:
        with tempfile.TemporaryFile("w+", encoding="utf-8") as out, redirect_stdout(out):
            code = main(["eplb", "rebalance", str(stats), *ARGS, "-f", fmt])
        if code != 0:
            raise RuntimeError(f"eplb rebalance -f {fmt} exited {code}")
        return code
    finally:
        if before is None:
            os.environ.pop("DSCTL_JSON_INDENT", None)
        else:
            os.environ["DSCTL_JSON_INDENT"] = before


CASES = [Case(f"eplb rebalance {LAYERS}x{EXPERTS} --format {name}", prepare, lambda s, n=name: run(s, n))
         for name in FORMS]


def measure(form: str) -> tuple[float, float]:
    """CPU seconds and peak RSS (MiB) of one run in this (fresh) process."""
    stats = prepare()
    before = resource.getrusage(resource.RUSAGE_SELF)
    run(stats, form)
    after = resource.getrusage(resource.RUSAGE_SELF)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), after.ru_maxrss / 1024


def main(argv: list[str]) -> None:
    if argv[:1] == ["--one"]:
        print(json.dumps(measure(argv[1])))
        return
    prepare()
    cpu: dict[str, list[float]] = {name: [] for name in FORMS}
    rss: dict[str, float] = {}
    start = time.perf_counter()
    for _ in range(int(argv[0]) if argv else 5):
        for name in FORMS:  # interleaved: the machine's load falls on every form alike
            done = subprocess.run([sys.executable, "-m", "benchmarks.bench_eplb_output", "--one", name],
                                  check=True, capture_output=True, text=True)
            cpu_s, rss_mib = json.loads(done.stdout.splitlines()[-1])
            cpu[name].append(cpu_s)
            rss[name] = max(rss.get(name, 0.0), rss_mib)
    table, table_min = statistics.median(cpu["table"]), min(cpu["table"])
    for name in FORMS:
        median, least = statistics.median(cpu[name]), min(cpu[name])
        print(f"{name:>14}: CPU median {median:5.2f} s, least {least:5.2f} s, peak RSS {rss[name]:6.1f} MiB; "
              f"{median / table:4.2f}x / {least / table_min:4.2f}x the table's", flush=True)
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main(sys.argv[1:])
