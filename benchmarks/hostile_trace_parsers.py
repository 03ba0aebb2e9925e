"""Peak memory and wall time of issue 33's hostile trace and parser inputs, each in a fresh ``dsctl`` process.

    PYTHONPATH=. python -m benchmarks.hostile_trace_parsers [--only seq,devices,streams,lldp,...]

Target per case (issue 33): under 300 MB peak and 10 s, exit 0 or 2. Printed per case: exit code, wall and CPU
seconds (user + system: the figure that does not depend on other load), peak RSS (``ru_maxrss`` of the child)
and the first output line. The table in docs/trace.md (Limits) and
docs/topology.md (Limits) comes from this run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import trace_builder as tb  # noqa: E402

HUGE = "9" * 4400
_SEQ = {"Collective name": "allreduce", "Process Group Name": "0"}


def _child(argv: list[str]) -> tuple[int, float, float, float, str]:
    """(exit code, wall s, CPU s, peak RSS MiB, first output line) of one child process (``wait4``: its own)."""
    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env={**os.environ, "PYTHONPATH": str(ROOT)})
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
        err.seek(0)
        out.seek(0)
        lines = err.read().decode(errors="replace").splitlines() or out.read().decode(errors="replace").splitlines()
    return (os.waitstatus_to_exitcode(status), wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
            (lines or [""])[0][:120])


def _trace(path: Path, events: list[dict[str, Any]], rank: int = 0) -> str:
    path.write_text(json.dumps(tb.trace(events, rank=rank)))
    return str(path)


def seq(tmp: Path) -> list[str]:
    files = [_trace(tmp / f"r{r}.json", [tb.nccl(10.0, 5 + r, **_SEQ, Seq=2**63 - 1),
                                         tb.nccl(20.0, 5 + r, **_SEQ, Seq=3)], r) for r in (0, 1)]
    return ["trace", "stragglers", *files, "-j", "1"]


def devices(tmp: Path) -> list[str]:
    events = [tb.nccl(float(d), 1.0, device=d, **_SEQ, Seq=d // 2) for d in range(20_000)]
    return ["trace", "stragglers", _trace(tmp / "d.json", events), "-j", "1"]


def devices_overlap(tmp: Path) -> list[str]:
    return ["trace", "overlap", _trace(tmp / "d.json", [tb.nccl(float(d), 1.0, device=d) for d in range(20_000)]),
            "-j", "1", "--format", "json"]


def _streams(tmp: Path, count: int, per_stream: int = 1) -> str:
    return _trace(tmp / "s.json", [(tb.nccl if i % 3 == 0 else tb.compute)(float(i), 2.5, stream=i % count)
                                   for i in range(count * per_stream)])


def streams_overlap(tmp: Path) -> list[str]:
    return ["trace", "overlap", _streams(tmp, 300_000), "-j", "1", "--format", "json"]


def streams_timeline(tmp: Path) -> list[str]:
    return ["trace", "timeline", _streams(tmp, 300_000), "-o", str(tmp / "t.svg"), "-j", "1"]


def streams_at_limit(tmp: Path) -> list[str]:
    """4,096 streams (the limit) of 73 kernels each: 300,000 kernels analysed."""
    return ["trace", "overlap", _streams(tmp, 4096, 73), "-j", "1", "--format", "json"]


def lanes_at_limit(tmp: Path) -> list[str]:
    """1,024 lanes (the picture's limit) of 293 kernels each: 300,000 kernels drawn."""
    return ["trace", "timeline", _streams(tmp, 1024, 293), "-o", str(tmp / "t.svg"), "-j", "1"]


def _dist_info(tmp: Path, num_ranks: int) -> list[str]:
    path = tmp / "pg.json"
    path.write_text('{"distributedInfo": {"rank": 0, "pg_config": [{"pg_name": "0", "ranks": ['
                    + ",".join(["0"] * num_ranks) + ']}]}, "traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", '
                    '"ts": 1, "dur": 1, "pid": 0, "tid": 7}]}')
    return ["trace", "overlap", str(path), "-j", "1"]


def _plan(tmp: Path) -> str:
    _child([sys.executable, "-m", "dsctl", "topology", "plan", "--nodes", "10", "--radix", "8", "--out",
            str(tmp / "plan")])
    return str(tmp / "plan")


def _lldp(tmp: Path, port: str) -> str:
    (tmp / "lldp").mkdir(exist_ok=True)
    path = tmp / "lldp" / "node0001.json"
    path.write_text(json.dumps({"lldp": {"interface": [{"mlx5_0": {"via": "LLDP", "chassis": {
        "p0-leaf01": {"id": {"type": "mac", "value": "x"}}}, "port": {"id": {"type": "ifname", "value": port}}}}]}}))
    return str(path)


def lldp_digits(tmp: Path) -> list[str]:
    return ["topology", "verify", _plan(tmp), _lldp(tmp, "swp" + HUGE)]


def lldp_backtrack(tmp: Path) -> list[str]:
    return ["topology", "verify", _plan(tmp), _lldp(tmp, "9" * 480_000 + "x1")]


def perfquery(tmp: Path) -> list[str]:
    (tmp / "pq.txt").write_text(f"# Port counters: Lid {HUGE} port 1\nSymbolErrorCounter:....1\n")
    plan = _plan(tmp)
    return ["topology", "verify", plan, f"{plan}/expected-plane0.ibnet", "--counters", str(tmp / "pq.txt")]


def perfquery_dots(tmp: Path) -> list[str]:
    (tmp / "pq.txt").write_text("# Port counters: Lid 1 port 1\n" + ("X:" + "." * 480_000 + "a b\n") * 2)
    plan = _plan(tmp)
    return ["topology", "verify", plan, f"{plan}/expected-plane0.ibnet", "--counters", str(tmp / "pq.txt")]


def ports_report(tmp: Path) -> list[str]:
    head = "CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( '"
    (tmp / "p.txt").write_text(head + "' - '" * 96_000 + "' )\n")
    return ["topology", "verify", _plan(tmp), str(tmp / "p.txt")]


def size_digits(tmp: Path) -> list[str]:
    return ["storage", "size", "--dataset", "9" * 120_000 + "!", "--clients", "10"]


CASES: dict[str, tuple[str, Callable[[Path], list[str]]]] = {
    "seq": ("trace stragglers, Seq 2^63-1 on two ranks", seq),
    "devices": ("trace stragglers, one file of 20,000 devices (Seq d // 2)", devices),
    "devices-overlap": ("trace overlap, one file of 20,000 devices", devices_overlap),
    "streams": ("trace overlap, 300,000 one-kernel streams", streams_overlap),
    "streams-timeline": ("trace timeline, 300,000 one-kernel streams", streams_timeline),
    "streams-limit": ("trace overlap, 4,096 streams x 73 kernels (at the limit)", streams_at_limit),
    "lanes-limit": ("trace timeline, 1,024 lanes x 293 kernels (at the limit)", lanes_at_limit),
    "dist-info": ("trace overlap, distributedInfo of 40 MB (20 M ranks)", lambda t: _dist_info(t, 20_000_000)),
    "dist-info-limit": ("trace overlap, distributedInfo of 16 MB (8 M ranks)", lambda t: _dist_info(t, 8_000_000)),
    "lldp": ("topology verify, LLDP port of 4,400 digits", lldp_digits),
    "lldp-backtrack": ("topology verify, LLDP port of 480 KB digits + 'x1'", lldp_backtrack),
    "perfquery": ("topology verify --counters, perfquery Lid of 4,400 digits", perfquery),
    "perfquery-dots": ("topology verify --counters, 480 KB field lines of dots", perfquery_dots),
    "ports-report": ("topology verify, ibnetdiscover -p line of 96,000 ' - '", ports_report),
    "size": ("storage size --dataset of 120,000 digits + '!'", size_digits),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hostile_trace_parsers", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(CASES))
    parser.add_argument("--build", nargs=2, metavar=("CASE", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.build:  # in its own process: the child measured next must not inherit this one's peak (fork)
        print(json.dumps(CASES[args.build[0]][1](Path(args.build[1]))))
        return 0
    for key in args.only.split(","):
        what = CASES[key][0]
        with tempfile.TemporaryDirectory() as tmp:
            built = subprocess.run([sys.executable, "-m", "benchmarks.hostile_trace_parsers", "--build", key, tmp],
                                   capture_output=True, text=True, check=True, cwd=ROOT)
            code, wall, cpu, peak, line = _child([sys.executable, "-m", "dsctl", *json.loads(built.stdout)])
        print(f"{what}: exit {code}, {wall:.1f} s wall, {cpu:.1f} s CPU, peak {peak:.0f} MiB: {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
