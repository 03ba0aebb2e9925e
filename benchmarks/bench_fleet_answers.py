"""dsctl health fleet's head node over many emulated nodes: srun's labelled output of N node answers, read,
parsed and aggregated by the whole command (``dsctl health fleet -w node[00001-N] -f json``).

A fake ``srun`` replays a prepared file (every node's real ``health check --format json`` answer, as today's nodes
print it: one compact line; or as older dsctl printed it: indented, ~1,060 lines per node) and a fake ``sinfo``
lists every node idle, so what is timed is the head node's own work (the fake srun's ``cat`` is a few ms). The
run's token is fixed for the replay. ``python -m benchmarks.bench_fleet_answers [N ...]`` prints head-node CPU
seconds and peak RSS per size and answer form (issue 32: 8,192 nodes < 5 s, memory flat in N).
"""

from __future__ import annotations

import io
import json
import os
import resource
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks.case import Case

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
    """Folder with bin/srun, bin/sinfo and the replayed output for ``num_nodes`` nodes."""
    folder = FOLDER / f"{num_nodes}-{'indented' if indented else 'compact'}"
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    out = folder / "srun.out"
    if not out.exists():
        doc = _document()
        text = json.dumps(doc, indent=2) if indented else json.dumps(doc, separators=(",", ":"))
        tok = f"@@dsctl-fleet-{TOKEN}"
        with out.open("w") as handle:
            for i in range(num_nodes):
                body = "".join(f"{i}: {line}\n" for line in text.split("\n"))
                handle.write(f"{i}: {tok} node=node{i + 1:05d}\n{body}{i}: \n{i}: {tok} exit=0\n")
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


CASES = [
    Case("health fleet: 8192 emulated nodes, compact answers (head node)", lambda: prepare(8192, False),
         lambda folder: run_fleet(folder, 8192), target_s=5.0),
    Case("health fleet: 1024 emulated nodes, indented answers of old nodes (head node)",
         lambda: prepare(1024, True), lambda folder: run_fleet(folder, 1024)),
]


def main(argv: list[str]) -> None:
    sizes = [int(a) for a in argv if a.isdigit()] or [1024, 8192]
    forms = [f for f in ("compact", "indented") if f in argv] or ["compact"]
    for form in forms:
        for num in sizes:
            folder = prepare(num, form == "indented")
            before = resource.getrusage(resource.RUSAGE_SELF)
            start = time.perf_counter()
            run_fleet(folder, num)
            after = resource.getrusage(resource.RUSAGE_SELF)
            cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            print(f"{form:>8} {num:>6} nodes: head-node CPU {cpu_s:6.2f} s, wall {time.perf_counter() - start:6.2f} s,"
                  f" peak RSS {after.ru_maxrss / 1024:7.1f} MiB", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
