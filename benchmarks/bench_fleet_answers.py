"""dsctl health fleet's head node over many emulated nodes: srun's labelled output of N node answers, read,
parsed and aggregated by the whole command (``dsctl health fleet -w node[00001-N] -f json``).

A fake ``srun`` replays a prepared file (every node's real ``health check --format json`` answer, as today's nodes
print it: one line of ~14.7 KB, which srun hands over as 15 labelled lines of at most 1,024 bytes; or as older dsctl
printed it: indented, ~1,070 lines) and a fake ``sinfo`` lists every node idle, so what is timed is the head node's
own work (the fake srun's ``cat`` is a few ms, in another process). The run's token is fixed for the replay.

``python -m benchmarks.bench_fleet_answers [N ...] [compact] [indented]`` runs each size in a fresh process and
prints its head-node CPU seconds and peak RSS (issue 32: 8,192 nodes < 5 s, memory flat in N).
"""

from __future__ import annotations

import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks.case import Case
from dsctl.runners.fleet import SRUN_MESSAGE_BYTES

TOKEN = "0123456789abcdef"
FOLDER = Path(tempfile.gettempdir()) / "dsctl-bench-fleet"


def _document() -> dict[str, Any]:
    """A healthy H800 node's ``health check`` report with its ``dsctl`` header, as JSON data."""
    from benchmarks.bench_health import _record, _sample
    from dsctl.health import api
    from dsctl.health.expectations import GPU_SKUS, expectations_for
    from dsctl.output.emit import envelope
    from dsctl.profiles.loader import ProfileStore

    exp = expectations_for(ProfileStore().node("h800-hgx"), GPU_SKUS[1])
    report = api.run_checks(_sample(_record()), exp)
    return json.loads(json.dumps(envelope(report, "health check", 0)))


def prepare(num_nodes: int, indented: bool) -> Path:
    """Folder with bin/srun, bin/sinfo and the replayed output for ``num_nodes`` nodes: each node's answer as the
    real srun prints it (tests/fake_srun.py: cut into labelled lines of at most 1,024 bytes)."""
    from dsctl.output.emit import render_json
    from tests.fake_srun import labelled, wrapper_output

    folder = FOLDER / f"{num_nodes}-{'indented' if indented else 'compact'}-cut{SRUN_MESSAGE_BYTES}"
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    out = folder / "srun.out"
    if not out.exists():
        answer = render_json(_document(), indent=indented).encode()
        tok = f"@@dsctl-fleet-{TOKEN}"
        width = len(str(num_nodes - 1))
        with out.open("wb") as handle:
            for i in range(num_nodes):
                handle.write(labelled({i: wrapper_output(tok, f"node{i + 1:05d}", answer)}, width=width))
        (folder / "sinfo.out").write_text("".join(f"node{i + 1:05d} idle none\n" for i in range(num_nodes)))
    (bin_dir / "srun").write_text(f"#!/bin/sh\nexec cat {out}\n")
    (bin_dir / "sinfo").write_text(f"#!/bin/sh\nexec cat {folder / 'sinfo.out'}\n")
    for name in ("srun", "sinfo"):
        (bin_dir / name).chmod(0o755)
    return folder


def run_fleet(folder: Path, num_nodes: int) -> int:
    """``dsctl health fleet`` in this process against the folder's fake srun; returns the exit status."""
    import dsctl.runners.fleet as fleet
    from dsctl.cli import main

    path = os.environ.get("PATH", "")
    os.environ["PATH"] = f"{folder / 'bin'}{os.pathsep}{path}"
    real_secrets = fleet.secrets
    fleet.secrets = SimpleNamespace(token_hex=lambda _n: TOKEN)  # type: ignore[assignment]
    try:
        with redirect_stdout(io.StringIO()) as out, redirect_stderr(io.StringIO()):
            code = main(["health", "fleet", "-w", f"node[00001-{num_nodes:05d}]", "-f", "json"])
        report = json.loads(out.getvalue())
        answered = sum(1 for n in report["nodes"] if n.get("reachable", True) and not n.get("reason"))
        if answered != num_nodes:
            raise RuntimeError(f"{answered}/{num_nodes} nodes answered: {report['nodes'][0]}")
        return code
    finally:
        fleet.secrets = real_secrets
        os.environ["PATH"] = path


def _case(num_nodes: int, indented: bool, target_cpu_s: float | None = None) -> Case:
    form = "indented answers of old nodes" if indented else "one-line answers cut by srun"
    return Case(f"health fleet: {num_nodes} emulated nodes, {form} (head node)",
                lambda: prepare(num_nodes, indented), lambda folder: run_fleet(folder, num_nodes),
                target_s=target_cpu_s, target_cpu=True)


CASES = [*(_case(n, False) for n in (1024, 2048, 4096)), _case(8192, False, target_cpu_s=5.0), _case(1024, True)]


def measure(num_nodes: int, indented: bool) -> tuple[float, float, float]:
    """Head-node CPU seconds, wall seconds and peak RSS in MiB of one run in this (fresh) process."""
    folder = prepare(num_nodes, indented)
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    run_fleet(folder, num_nodes)
    wall_s = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu_s, wall_s, after.ru_maxrss / 1024


def main(argv: list[str]) -> None:
    if argv[:1] == ["--one"]:
        print(json.dumps(measure(int(argv[1]), argv[2] == "indented")))
        return
    sizes = [int(a) for a in argv if a.isdigit()] or [1024, 2048, 4096, 8192]
    forms = [f for f in ("compact", "indented") if f in argv] or ["compact"]
    for form in forms:
        for num in sizes:
            prepare(num, form == "indented")  # the replayed file is written once, not timed
            done = subprocess.run([sys.executable, "-m", "benchmarks.bench_fleet_answers", "--one", str(num), form],
                                  check=True, capture_output=True, text=True)
            cpu_s, wall_s, rss_mib = json.loads(done.stdout.splitlines()[-1])
            print(f"{form:>8} {num:>6} nodes: head-node CPU {cpu_s:6.2f} s, wall {wall_s:6.2f} s,"
                  f" peak RSS {rss_mib:7.1f} MiB", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
