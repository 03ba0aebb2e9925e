"""The progress audit of issue 30: every command family on its largest documented input, timed as a user runs it.

    python -m benchmarks.progress_audit            # prints one markdown row per command (docs/usage.md, Progress)
    python -m benchmarks.progress_audit --filter storage

Each command runs as a child process (``python -m dsctl``, ``--format json``) in a fresh ``dsctl examples`` folder
in a scratch directory, in order (later lines read what earlier ones wrote: ``big/``, ``plan.json``). Reported:
wall seconds and the child's CPU seconds (user + system, from ``getrusage``), start-up included. A command over
about two seconds should show counted progress (bar, percent, ETA) on a terminal; docs/usage.md lists what each
counts. ``health fleet`` and a 1M-event trace are timed by ``python -m benchmarks`` (they need fake srun / a
synthetic trace).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DUMPS = [f"big/expected-plane{p}.ibnet" for p in range(8)]
#: (label, arguments after ``dsctl``), in the order they run
COMMANDS: list[tuple[str, list[str]]] = [
    ("dsctl --version (start-up)", ["--version"]),
    ("topology plan --gpus 16384 --out-dir big", ["topology", "plan", "--gpus", "16384", "--out-dir", "big"]),
    ("topology verify big, 8 dumps (16,384 GPUs)", ["topology", "verify", "big", *DUMPS]),
    ("topology simulate big (adaptive)", ["topology", "simulate", "big"]),
    ("topology simulate big --routing ecmp", ["topology", "simulate", "big", "--routing", "ecmp"]),
    ("topology compare", ["topology", "compare"]),
    ("storage chains --nodes 1000 --ssds-per-node 16", ["storage", "chains", "--nodes", "1000", "--ssds-per-node",
                                                        "16"]),
    ("storage chains --nodes 180 --out-dir c180", ["storage", "chains", "--nodes", "180", "--ssds-per-node", "16",
                                                   "--out-dir", "c180"]),
    ("storage expand --from c180 --add-nodes 20", ["storage", "expand", "--from", "c180", "--add-nodes", "20"]),
    ("storage size --nodes 180", ["storage", "size", "--nodes", "180"]),
    ("eplb rebalance today.npy", ["eplb", "rebalance", "today.npy", "--out", "plan.json"]),
    ("eplb rebalance stats/*.npy --algorithm balanced", ["eplb", "rebalance", "--algorithm", "balanced", "STATS"]),
    ("eplb simulate today.npy plan.json", ["eplb", "simulate", "today.npy", "plan.json"]),
    ("eplb replay stats/*.npy -m deepseek-v3", ["eplb", "replay", "-m", "deepseek-v3", "STATS"]),
    ("launch --nodes 256", ["launch", "--nodes", "256"]),
    ("launch --nodes 2048", ["launch", "--nodes", "2048"]),
    ("launch --nodes 128-256", ["launch", "--nodes", "128-256"]),
    ("launch layout --min-nodes", ["launch", "layout", "--min-nodes"]),
    ("launch schedule --pp 16 --micro-batches 1024", ["launch", "schedule", "--pp", "16", "--micro-batches", "1024",
                                                      "--schedule", "dualpipe"]),
    ("health check --from-record node.yaml", ["health", "check", "--from-record", "node.yaml"]),
    ("health burn-in big --fabric-model faults.yaml", ["health", "burn-in", "big", "--fabric-model", "faults.yaml"]),
    ("trace overlap traces/rank*.json.gz --all-steps", ["trace", "overlap", "TRACES", "--all-steps"]),
    ("trace stragglers traces/rank*.json.gz", ["trace", "stragglers", "TRACES"]),
    ("model memory", ["model", "memory"]),
]


def _expand(args: list[str], folder: Path) -> list[str]:
    out: list[str] = []
    for arg in args:
        if arg == "STATS":
            out += sorted(str(p.relative_to(folder)) for p in (folder / "stats").glob("*.npy"))
        elif arg == "TRACES":
            out += sorted(str(p.relative_to(folder)) for p in (folder / "traces").glob("rank*.json.gz"))
        else:
            out.append(arg)
    return out


def _timed(args: list[str], folder: Path, env: dict[str, str]) -> tuple[int, float, float]:
    """(exit code, wall seconds, CPU seconds) of one ``python -m dsctl`` child."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    argv = [sys.executable, "-m", "dsctl", *args]
    if args[0] != "--version":
        argv += ["--format", "json"]
    done = subprocess.run(argv, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return done.returncode, wall, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.progress_audit", description=__doc__)
    parser.add_argument("--filter", default="", help="run only commands whose label contains this text (the "
                                                     "ones before it that write inputs run too)")
    args = parser.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory(prefix="dsctl-progress-audit-") as scratch:
        subprocess.run([sys.executable, "-m", "dsctl", "examples"], cwd=scratch, env=env, check=True,
                       stdout=subprocess.DEVNULL)
        folder = Path(scratch) / "dsctl-examples"
        print("| command | exit | wall s | CPU s |\n|---|---:|---:|---:|")
        writes_inputs = ("--out-dir", "--out")
        for label, command in COMMANDS:
            if args.filter not in label and not any(w in command for w in writes_inputs):
                continue
            code, wall, cpu = _timed(_expand(command, folder), folder, env)
            print(f"| `{label}` | {code} | {wall:.2f} | {cpu:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
