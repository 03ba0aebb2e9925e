"""Peak memory and wall time of the bounded inputs of docs/reliability.md (issue 23 item 2), each in a fresh process.

    PYTHONPATH=. python -m benchmarks.memory_peaks [--nodes 8] [--answer-mib 15] [--only fleet,yaml,trace]

- ``fleet``: ``run_on_nodes`` over a fake ``srun`` (a script on PATH) whose tasks each answer a health report of
  ``--answer-mib`` MiB (mostly OK findings, as real reports are); printed: peak RSS above the idle process,
  divided by nodes and by the answer size (target < 2).
- ``yaml``: ``dsctl health check --from-record`` on 5 MB YAML files (block mapping, one flow list); target
  < 300 MB and < 5 s, or refused.
- ``trace``: ``dsctl trace overlap`` on 10M events in a ~28 MB gzip; target < 1 GB, or refused.

Peaks are ``ru_maxrss`` of the child process (Linux: KiB). The numbers in docs/reliability.md come from this.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FAKE_SRUN = r'''#!{python}
import json, sys
argv = sys.argv[1:]
nodes = int(next(a for a in argv if a.startswith("--nodes=")).split("=")[1])
token = argv[argv.index("-c") + 3]
size = int({size})
finding = {{"check": "G1", "severity": "OK", "subject": "gpu0", "message": "x" * 200}}
count = max(1, size // (len(json.dumps(finding, indent=2)) + 8))
doc = {{"findings": [finding] * count + [{{"check": "G6", "severity": "CRIT", "subject": "gpu3",
                                           "message": "1 NVLink(s) down"}}]}}
text = json.dumps(doc, indent=2)
out = sys.stdout
for i in range(nodes):
    out.write(f"{{i}}: {{token}} node=n{{i}}\n")
    for line in text.split("\n"):
        out.write(f"{{i}}: {{line}}\n")
    out.write(f"{{i}}: \n{{i}}: {{token}} exit=1\n")
out.flush()
'''

FLEET_CHILD = r'''
import resource, sys, time
from dsctl.health.fleet import NodeInput, aggregate, digest
from dsctl.runners.fleet import run_on_nodes
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.monotonic()
run = run_on_nodes([f"n{i}" for i in range(int(sys.argv[1]))], ["dsctl"], check_states=False,
                   ok_exit_codes=(0, 1), digest=digest)
report = aggregate([NodeInput(a.node, a.document, a.reason) for a in run.answers])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(base, peak, report.summary["crit"], time.monotonic() - start)
'''


def _child(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, float, float, str]:
    """(exit code, wall s, peak RSS MiB, first stderr line) of one child process (``wait4``: its own peak)."""
    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err,
                                env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
        err.seek(0)
        out.seek(0)
        lines = err.read().decode(errors="replace").splitlines() or out.read().decode(errors="replace").splitlines()
    return os.waitstatus_to_exitcode(status), wall, usage.ru_maxrss / 1024, (lines or [""])[0][:120]


def fleet(nodes: int, answer_mib: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        srun = Path(tmp) / "srun"
        srun.write_text(FAKE_SRUN.format(python=sys.executable, size=answer_mib * 1024**2))
        srun.chmod(0o755)
        env = {"PATH": f"{tmp}:{os.environ['PATH']}"}
        proc = subprocess.run([sys.executable, "-c", FLEET_CHILD, str(nodes)], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT), **env}, check=True)
        base_kib, peak_kib, crit, wall = proc.stdout.split()
        per_node = (int(peak_kib) - int(base_kib)) / 1024 / nodes
        return (f"fleet: {nodes} nodes x {answer_mib} MiB answers: {crit} crit, peak {int(peak_kib) / 1024:.0f} MiB "
                f"(idle {int(base_kib) / 1024:.0f} MiB): {per_node:.1f} MiB per node = "
                f"{per_node / answer_mib:.2f} x the answer, {float(wall):.1f} s")


def yaml_inputs() -> list[str]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        block = Path(tmp) / "block.yaml"
        block.write_text("".join(f"k{i}: [1, 2, 3]\n" for i in range(400_000))[:5_000_000])
        flow = Path(tmp) / "flow.yaml"
        flow.write_text("x: [" + "1," * 2_499_990 + "1]\n")
        under = Path(tmp) / "under.yaml"
        under.write_text("x: [" + "1," * 95_000 + "1]\n")
        for path in (block, flow, under):
            code, wall, peak, line = _child([sys.executable, "-m", "dsctl", "health", "check", "--from-record",
                                             str(path)])
            rows.append(f"yaml {path.name} ({path.stat().st_size / 1e6:.1f} MB): exit {code}, {wall:.1f} s, "
                        f"peak {peak:.0f} MiB: {line}")
    return rows


def trace() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t10m.json.gz"
        comp = zlib.compressobj(6, zlib.DEFLATED, 31)
        ev = (b'{"ph":"X","cat":"kernel","name":"sm90_xmma_gemm","ts":%d,"dur":1.5,"pid":0,"tid":7,'
              b'"args":{"device":0,"stream":7}},')
        block = b"".join(ev % (i * 3) for i in range(10_000))
        with open(path, "wb") as out:
            out.write(comp.compress(b'{"traceEvents": ['))
            for _ in range(1000):
                out.write(comp.compress(block))
            out.write(comp.compress(b'{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"pid":0,"tid":7}]}'))
            out.write(comp.flush())
        code, wall, peak, line = _child([sys.executable, "-m", "dsctl", "trace", "overlap", str(path)])
        return (f"trace 10M events ({path.stat().st_size / 1e6:.0f} MB gzip): exit {code}, {wall:.0f} s, "
                f"peak {peak:.0f} MiB: {line}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory_peaks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--answer-mib", type=int, default=15)
    parser.add_argument("--only", default="fleet,yaml,trace")
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    if "fleet" in only:
        print(fleet(args.nodes, args.answer_mib), flush=True)
    if "yaml" in only:
        for row in yaml_inputs():
            print(row, flush=True)
    if "trace" in only:
        print(trace(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
