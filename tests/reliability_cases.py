"""The hostile inputs and injected faults behind docs/reliability.md, one ``Case`` per (input class, command).

``tests/cli/test_reliability_doc.py`` runs every case and checks its exit code; ``tests/make_reliability_doc.py``
runs them and writes the document from what it observed (and ``--check`` compares it with the file).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIG = "9" * 400
FAMILIES = ("profiles", "topology", "eplb", "health", "storage", "launch", "model", "trace")


@dataclass(frozen=True)
class Case:
    """One hostile input (or fault) given to one command; ``run(tmp)`` returns the exit code it ended with."""

    input_class: str
    family: str
    example: str
    args: Callable[[Path], list[str]] | None
    exit_code: int
    fault: Callable[[Path], int] | None = None


def _w(tmp: Path, name: str, content: bytes | str) -> str:
    path = tmp / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogateescape"))
    return str(path)


def _stats(tmp: Path, content: bytes | str = "1,2,3,4\n4,3,2,1\n", name: str = "s.csv") -> list[str]:
    return ["eplb", "rebalance", _w(tmp, name, content), "--replicas", "4", "--gpus", "2", "--nodes", "1"]


def _placement(tmp: Path, content: str) -> list[str]:
    return ["eplb", "simulate", _w(tmp, "s.json", "[[1, 2, 3, 4]]"), _w(tmp, "p.json", content), "--gpus", "2"]


def _record() -> str:
    return (ROOT / "tests" / "data" / "health" / "hgx_h800_healthy.yaml").read_text()


def _profile(tmp: Path, content: str) -> list[str]:
    (tmp / "models").mkdir(exist_ok=True)
    return ["profiles", "validate", _w(tmp / "models", "m.yaml", content)]


def _node_profile() -> str:
    return (ROOT / "profiles" / "nodes" / "h800-hgx.yaml").read_text()


def _bad_profile_name(tmp: Path) -> list[str]:
    text = "kind: node\n" + _node_profile().replace("name: h800-hgx\n", "")
    return ["profiles", "validate", _w(tmp, "v3\nrm -rf ~.yaml", text)]


def _fifo(tmp: Path) -> str:
    path = tmp / "fifo"
    os.mkfifo(path)
    return str(path)


def _sparse_gib(tmp: Path) -> str:
    path = tmp / "big.csv"
    with open(path, "wb") as handle:
        handle.truncate(1024**3)
    return str(path)


def _npy(tmp: Path) -> str:
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (100000, 100000), }"
    header += " " * (118 - len(header)) + "\n"
    return _w(tmp, "s.npy", b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + b"\0" * 8)


#: an ``ibnetdiscover -p`` open port as older infiniband-diags print it: the description without quotes
BARE_OPEN_PORT = "SW   479 22 0x0002c9020040f161 4x QDR" + " " * 35 + "Infiniscale-IV Mellanox Technologies\n"


def _plan_dir(tmp: Path) -> str:
    from tests.conftest import run_cli

    run_cli("topology", "plan", "--nodes", "4", "--out-dir", str(tmp / "plan"))
    return str(tmp / "plan")


def _bom_links(tmp: Path) -> list[str]:
    plan = _plan_dir(tmp)
    links = _w(tmp, "links.csv", b"\xef\xbb\xbf" + (Path(plan) / "cabling.csv").read_bytes())
    return ["topology", "verify", plan, links]


def _bom_chains(tmp: Path) -> list[str]:
    from tests.conftest import run_cli

    run_cli("storage", "chains", "--nodes", "6", "--ssds-per-node", "2", "--out-dir", str(tmp / "c"))
    content = b"\xef\xbb\xbf" + (tmp / "c" / "generated_chains.csv").read_bytes()
    return ["storage", "check-chains", _w(tmp, "chains.csv", content)]


def _pt(name: str) -> bytes:
    from tests.hostile_pickles import HOSTILE

    return HOSTILE[name][1]()


def _eplb_case(tmp: Path, name: str) -> list[str]:
    from tests.hostile_eplb import CASES as EPLB_CASES

    return EPLB_CASES[name][1](tmp)


def _subprocess(args: list[str], **kwargs: object) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = "import sys; from dsctl.cli import main; sys.exit(main())"
    proc = subprocess.run([sys.executable, "-c", code, *args], env=env, timeout=120, capture_output=False,
                          stderr=subprocess.PIPE, **kwargs)  # type: ignore[call-overload]
    assert b"Traceback" not in proc.stderr, proc.stderr[-2000:]
    return int(proc.returncode)


def _full_stdout(args: list[str]) -> Callable[[Path], int]:
    def run(_: Path) -> int:
        with open("/dev/full", "wb") as full:
            return _subprocess(args, stdout=full)
    return run


def _sigterm_during_out(tmp: Path) -> int:
    """SIGTERM while --out-dir is being written: exit 143, no temporary folder, no result folder left behind."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = (
        "import os, signal, sys\n"
        "from dsctl.output import files\n"
        "real = files._swap_in\n"
        "def swap(stage, out):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    real(stage, out)\n"
        "files._swap_in = swap\n"
        "from dsctl.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, "topology", "plan", "--nodes", "4", "--out-dir",
                           str(tmp / "plan")], env=env, timeout=120, capture_output=True)
    left = sorted(p.name for p in tmp.iterdir())
    return proc.returncode if not left else -1


def _killed_run_leftovers(tmp: Path) -> int:
    """A SIGKILLed run's temporary folder (its pid gone) is removed by the next run into the same place."""
    from tests.conftest import run_cli

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    (tmp / f".plan.dsctl-{dead}-abc").mkdir()
    code = run_cli("topology", "plan", "--nodes", "4", "--out-dir", str(tmp / "plan")).exit_code
    return code if sorted(p.name for p in tmp.iterdir()) == ["plan"] else -1


def _out_existing(tmp: Path) -> int:
    """--out-dir into a folder of an earlier run: the new result replaces it whole, the old one is DIR.prev; a file
    added there since makes it foreign (refused, exit 2, nothing moved)."""
    from tests.conftest import run_cli

    run_cli("launch", "layout", "--nodes", "128", "--out-dir", str(tmp / "job"))
    run_cli("launch", "layout", "--nodes", "256", "--out-dir", str(tmp / "job"))
    (tmp / "job" / "stale.txt").write_text("from another run")
    code = run_cli("launch", "layout", "--nodes", "64", "--out-dir", str(tmp / "job")).exit_code
    fine = (tmp / "job" / "stale.txt").exists() and (tmp / "job.prev" / "layout.json").exists()
    return code if fine else -1


def _plan_json(tmp: Path, rename: dict[str, str] | None = None, **over: object) -> str:
    """plan.json of a 16-node plan with devices renamed (``rename``) or top-level keys replaced (``over``)."""
    import json

    from tests.conftest import run_cli

    run_cli("topology", "plan", "--nodes", "16", "--out-dir", str(tmp / "p16"))
    doc = json.loads((tmp / "p16" / "plan.json").read_text())
    names = rename or {}
    doc["devices"] = [[names.get(c, c) if isinstance(c, str) else c for c in row] for row in doc["devices"]]
    doc["cables"] = [[names.get(c, c) if isinstance(c, str) else c for c in row] for row in doc["cables"]]
    doc.update(over)
    return _w(tmp, "plan.json", json.dumps(doc))


def _huge_plan(tmp: Path) -> str:
    """20,000 nodes x 20,000 NICs in 0.9 MB (before: 3-27 GB allocated by burn-in, simulate and trace --plan)."""
    import json

    nics = [f"m{i}" for i in range(20_000)]
    return _w(tmp, "plan.json", json.dumps({
        "schema": "dsctl.topology.plan/1", "spec": {"num_gpus_per_node": 8, "port_gbps": 400},
        "cable_columns": ["plane", "kind", "a_device", "a_port", "b_device", "b_port"], "nics": nics,
        "nic_plane": [0] * len(nics), "devices": [[f"n{i}", "node", -1, -1, 1] for i in range(20_000)],
        "cables": []}))


def _no_faults(tmp: Path) -> str:
    return _w(tmp, "faults.json", '{"faults": [{"node": "node0004", "rate": 0.0}]}')


def _trace_plan(tmp: Path, plan: str) -> list[str]:
    """trace stragglers of two ranks on nodes 0 and 1 of ``plan`` (--ranks, --plan)."""
    ranks = _w(tmp, "ranks.csv", "rank,node,local_gpu,plane,pp,dp,tp,ep,edp,stages\n0,0,0,0,0,0,0,0,0,0\n"
                                 "1,1,0,0,0,1,0,1,0,0\n")
    return ["trace", "stragglers", *_trace_ranks(tmp), "--ranks", ranks, "--plan", plan]


def _burn_in_prev_as_input(tmp: Path) -> int:
    """burn-in OUT.prev --out-dir OUT: OUT.prev holds the input plan, so it is not deleted (exit 2, nothing moved)."""
    from tests.conftest import run_cli

    run_cli("topology", "plan", "--nodes", "16", "--out-dir", str(tmp / "out.prev"))
    model = _w(tmp, "m.json", '{"faults": []}')
    run_cli("health", "burn-in", str(tmp / "out.prev"), "--fabric-model", model, "--out-dir", str(tmp / "out"))
    code = run_cli("health", "burn-in", str(tmp / "out.prev"), "--fabric-model", model, "--out-dir",
                   str(tmp / "out")).exit_code
    fine = (tmp / "out.prev" / "plan.json").exists() and (tmp / "out" / "burnin.json").exists()
    return code if fine else -1


def _read_only_out(tmp: Path) -> int:
    from tests.conftest import run_cli

    locked = tmp / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):  # root ignores permissions: use a pseudo file system instead
            return run_cli("storage", "chains", "--nodes", "6", "--ssds-per-node", "2", "--out-dir",
                           "/proc/dsctl-out").exit_code
        return run_cli("storage", "chains", "--nodes", "6", "--ssds-per-node", "2", "--out-dir",
                       str(locked / "c")).exit_code
    finally:
        locked.chmod(0o700)


HUGE = "9" * 4400  # above Python's 4,300-digit int() limit


def _verify_port(tmp: Path) -> list[str]:
    plan = _plan_dir(tmp)
    lines = (Path(plan) / "cabling.csv").read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[1].split(",")
    cells[header.index("b_port")] = HUGE
    return ["topology", "verify", plan, _w(tmp, "l.csv", "\n".join([lines[0], ",".join(cells)]) + "\n")]


def _doctor(tmp: Path) -> list[str]:
    src = ROOT / "tests" / "data" / "storage" / "doctor" / "healthy"
    chains = (src / "list-chains.txt").read_text().replace("\n900100001", "\n" + HUGE, 1)
    return ["storage", "doctor", "--chains", _w(tmp, "c.txt", chains), "--targets", str(src / "list-targets.txt")]


def _expand_create(tmp: Path) -> list[str]:
    src = ROOT / "tests" / "data" / "storage" / "tiny_v3_k2_r2_d2"
    folder = tmp / "c"
    folder.mkdir()
    for f in src.iterdir():
        text = f.read_text()
        (folder / f.name).write_text(text.replace("10001", HUGE, 1) if f.name == "create_target_cmd.txt" else text)
    return ["storage", "expand", "--from", str(folder), "--add-nodes", "1"]


def _npy_syntax(tmp: Path) -> list[str]:
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), "
    header += " " * (118 - len(header)) + "\n"
    content = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + b"\0" * 32
    return _stats(tmp, content, "s.npy")


def _trace_ranks(tmp: Path, **fields: object) -> list[str]:
    import json

    sys.path.insert(0, str(ROOT / "tests"))
    import trace_builder as tb

    paths = []
    for rank in (0, 1):
        doc = tb.trace([tb.compute(0, 5), tb.nccl(10, 5 + rank)], rank=rank)
        for ev in doc["traceEvents"]:
            if ev.get("cat") == "kernel":
                ev.setdefault("args", {}).update(fields)
        paths.append(_w(tmp, f"r{rank}.json", json.dumps(doc)))
    return paths


def _site_config(kind: str) -> Callable[[Path], int]:
    def run(tmp: Path) -> int:
        path = {"fifo": tmp / "dsctl.toml", "device": Path("/dev/zero")}.get(kind, tmp / "dsctl.toml")
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "deep":
            path.write_text("x = " + "[" * 100_000 + "]" * 100_000)
        elif kind == "huge-int":
            path.write_text(f"[launch]\npartition = {HUGE}\n")
        env = {**os.environ, "PYTHONPATH": str(ROOT), "DSCTL_CONFIG": str(path)}
        proc = subprocess.run([sys.executable, "-m", "dsctl", "profiles", "list"], env=env, timeout=60,
                              capture_output=True)
        assert b"Traceback" not in proc.stderr, proc.stderr[-2000:]
        return int(proc.returncode)
    run.__doc__ = {"fifo": "at once (a FIFO nobody writes blocked every command)",
                   "device": "at once (/dev/zero grew without limit)"}.get(kind, "one error: line naming the file")
    return run


def _laughs() -> str:
    text = "a: &a [1,1,1,1,1,1,1,1,1,1]\n"
    for i in range(10):
        text += f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 10) + "]\n"
    return text


def _lldp(tmp: Path, port: str) -> list[str]:
    import json

    (tmp / "lldp").mkdir(exist_ok=True)
    doc = {"lldp": {"interface": [{"mlx5_0": {"via": "LLDP", "chassis": {"p0-leaf01": {"id": {}}},
                                              "port": {"id": {"type": "ifname", "value": port}}}}]}}
    return ["topology", "verify", _plan_dir(tmp), _w(tmp / "lldp", "node0001.json", json.dumps(doc))]


def _perfquery(tmp: Path) -> list[str]:
    plan = _plan_dir(tmp)
    counters = _w(tmp, "pq.txt", f"# Port counters: Lid {HUGE} port 1\nSymbolErrorCounter:....1\n")
    return ["topology", "verify", plan, str(Path(plan) / "expected-plane0.ibnet"), "--counters", counters]


def _trace_events(tmp: Path, name: str, events: list[dict[str, object]], rank: int = 0) -> str:
    import json

    sys.path.insert(0, str(ROOT / "tests"))
    import trace_builder as tb

    return _w(tmp, name, json.dumps(tb.trace(events, rank=rank)))


def _trace_seq(tmp: Path) -> list[str]:
    sys.path.insert(0, str(ROOT / "tests"))
    import trace_builder as tb

    args = {"Collective name": "allreduce", "Process Group Name": "0", "Seq": 2**63 - 1}
    return ["trace", "stragglers", "-j", "1", *(_trace_events(tmp, f"r{r}.json", [tb.nccl(1.0, 2.0 + r, **args)], r)
                                                for r in (0, 1))]


def _trace_streams(tmp: Path, command: list[str], count: int) -> list[str]:
    sys.path.insert(0, str(ROOT / "tests"))
    import trace_builder as tb

    return ["trace", *command, "-j", "1",
            _trace_events(tmp, "s.json", [tb.compute(float(i), 0.5, stream=i) for i in range(count)])]


def _slurm_answer(tmp: Path) -> int:
    """one line naming the node and field (before: printed nan, exit 0)"""
    import dsctl.runners.fleet as fleet
    from tests.conftest import run_cli

    sys.path.insert(0, str(ROOT / "tests"))
    import trace_builder as tb

    doc = run_cli("trace", "overlap", "--format", "json", "-j", "1",
                  _trace_events(tmp, "t.json", [tb.compute(0, 10), tb.nccl(5, 10)])).json()
    doc["ranks"][0]["wall_us"] = float("inf")
    saved = fleet.run_on_nodes, fleet.expand_hostlist
    fleet.run_on_nodes = lambda names, command, **kw: fleet.FleetRun(  # type: ignore[assignment]
        tuple(fleet.NodeAnswer(n, doc, 0) for n in names))
    fleet.expand_hostlist = lambda text, option="": text.split(",")  # type: ignore[assignment]
    try:
        result = run_cli("trace", "overlap", "/t/{node}.json", "--slurm", "-w", "n1")
    finally:
        fleet.run_on_nodes, fleet.expand_hostlist = saved
    assert "node n1" in result.stderr and "wall_us" in result.stderr, result.stderr
    return result.exit_code


_PROFILE_DUP = "name: m\nkind: model\nname: n\n"
_TRACE = '{"traceEvents": [{"ph": "X", "name": "k", "ts": 1e400, "dur": 1, "pid": 0, "tid": 7}]}'

CASES: list[Case] = [
    # integers of hundreds of digits
    Case("integer of 400+ digits", "launch", "--global-batch 9...9 (400 digits)",
         lambda t: ["launch", "layout", "--nodes", "16", "--global-batch", BIG], 2),
    Case("integer of 400+ digits", "eplb", "a statistics cell of 400 digits", lambda t: _stats(t, f"1,{BIG}\n"), 2),
    Case("integer of 400+ digits", "profiles", "num_layers: 9...9",
         lambda t: _profile(t, f"name: m\nnum_layers: {BIG}\n"), 2),
    Case("integer of 400+ digits", "storage", "--clients 9...9",
         lambda t: ["storage", "size", "--dataset", "5 PiB", "--clients", BIG], 2),
    Case("integer of 400+ digits", "topology", "--nodes 9...9", lambda t: ["topology", "plan", "--nodes", BIG], 2),
    Case("integer of 400+ digits", "model", "--hidden 9...9",
         lambda t: ["model", "ep-speed-limit", "--hidden", BIG], 2),
    Case("integer of 400+ digits", "health", "pcie.width: 9...9 in a record",
         lambda t: ["health", "check", "--from-record",
                    _w(t, "r.yaml", _record().replace("width: 16", f"width: {BIG}", 1))], 2),
    Case("integer above int64", "eplb", "placement slot 2^63", lambda t: _placement(t, '{"phy2log": [[0, 1, 2, '
                                                                                       f'{2**63}]]}}'), 2),
    # floats beyond range, NaN
    Case("float overflow (1e400)", "eplb", "a statistics cell 1e400", lambda t: _stats(t, "1,1e400\n"), 2),
    Case("float overflow (1e400)", "storage", "--dataset '1e400 PiB'",
         lambda t: ["storage", "size", "--dataset", "1e400 PiB", "--clients", "10"], 2),
    Case("float overflow (1e400)", "model", "--nic-gbps 1e400", lambda t: ["model", "ep-speed-limit", "--nic-gbps",
                                                                           "1e400"], 2),
    Case("float overflow (1e400)", "launch", "schedule --f 1e308 (step time overflows to inf)",
         lambda t: ["launch", "schedule", "--f-cost", "1e308", "--svg", str(t / "s.svg")], 2),
    Case("float overflow (1e400)", "topology", "--oversubscription 1e400",
         lambda t: ["topology", "plan", "--nodes", "16", "--oversubscription", "1e400"], 2),
    Case("simulation too large", "launch", "schedule --pp 100000 --micro-batches 1000000",
         lambda t: ["launch", "schedule", "--pp", "100000", "--micro-batches", "1000000"], 2),
    Case("simulation too large", "topology", "plan --kind ft3 --nodes 3000000",
         lambda t: ["topology", "plan", "--kind", "ft3", "--nodes", "3000000"], 2),
    Case("NaN option", "launch", "schedule --f nan", lambda t: ["launch", "schedule", "--f-cost", "nan"], 2),
    Case("NaN option", "model", "cost --mfu nan", lambda t: ["model", "cost", "--mfu", "nan"], 2),
    Case("NaN option", "storage", "size --fill nan",
         lambda t: ["storage", "size", "--dataset", "5 PiB", "--clients", "10", "--fill", "nan"], 2),
    Case("NaN option", "health", "check --interval-s nan",
         lambda t: ["health", "check", "--interval-s", "nan"], 2),
    Case("NaN option", "topology", "--oversubscription nan",
         lambda t: ["topology", "plan", "--nodes", "16", "--oversubscription", "nan"], 2),
    # names reaching generated files
    Case("newline or control character in a name", "launch", "--job-name 'v3\\n#SBATCH --uid=0'",
         lambda t: ["launch", "--nodes", "16", "--backend", "slurm", "--job-name", "v3\n#SBATCH --uid=0",
                    "--out-dir", str(t / "job"), "--", "train.py"], 2),
    Case("newline or control character in a name", "profiles", "profile file named 'v3\\nrm -rf ~.yaml'",
         _bad_profile_name, 2),
    Case("newline or control character in a name", "topology", "--leaf-name 'p{plane}\\x01{leaf}'",
         lambda t: ["topology", "plan", "--nodes", "16", "--leaf-name", "p{plane}\x01{leaf}"], 2),
    Case("'#' or '=' in a Slurm name", "topology", "--leaf-name 'leaf#{leaf}' (topology.conf comment)",
         lambda t: ["topology", "plan", "--nodes", "16", "--leaf-name", "leaf#{leaf}{plane}"], 2),
    Case("'#' or '=' in a Slurm name", "launch", "--partition 'gpu=x'",
         lambda t: ["launch", "--nodes", "256", "--backend", "slurm", "--partition", "gpu=x", "--out-dir",
                    str(t / "job"), "--", "t.py"], 2),
    Case("non-UTF-8 argument", "topology", "--node-name $'\\xff{n}'",
         lambda t: ["topology", "plan", "--nodes", "4", "--node-name", b"\xff{n}".decode("utf-8", "surrogateescape")],
         2),
    Case("non-UTF-8 argument", "launch", "--model $'\\xff'",
         lambda t: ["launch", "layout", "--nodes", "4", "--model", b"\xff".decode("utf-8", "surrogateescape")], 2),
    # file contents
    Case("non-UTF-8 file", "eplb", "statistics starting 0xff 0xfe", lambda t: _stats(t, b"\xff\xfe1,2\n"), 2),
    Case("non-UTF-8 file", "health", "record with byte 0xff", lambda t: ["health", "check", "--from-record",
                                                                          _w(t, "r.yaml", b"a: \xff\n")], 2),
    Case("non-UTF-8 file", "storage", "chain table with byte 0xff",
         lambda t: ["storage", "check-chains", _w(t, "c.csv", b"\xff\n")], 2),
    Case("non-UTF-8 file", "trace", "trace with byte 0xff", lambda t: ["trace", "overlap", _w(t, "t.json",
                                                                                         b"\xff")], 2),
    Case("non-UTF-8 file", "launch", "calibrate a trace with byte 0xff",
         lambda t: ["launch", "calibrate", _w(t, "t.json", b"\xff")], 2),
    Case("trace of another shape", "launch", "calibrate a trace of one 1 ms kernel (not one F&B pair of the model)",
         lambda t: ["launch", "calibrate", _w(t, "t.json", '{"traceEvents": [{"ph": "X", "cat": "kernel", '
                    '"name": "gemm", "pid": 0, "tid": 7, "ts": 0, "dur": 1000, "args": {"stream": 7}}]}'),
                    "-o", str(t / "p.yaml")], 2),
    Case("unterminated CSV quote", "eplb", "'\"1,2' on line 1", lambda t: _stats(t, '"1,2\n3,4\n5,6\n'), 2),
    Case("unterminated CSV quote", "topology", "links CSV '\"node0001,...'",
         lambda t: ["topology", "verify", _plan_dir(t), _w(t, "l.csv", 'a_device,a_port,b_device,b_port\n'
                                                                       '"node0001,mlx5_0,p0-leaf01,1\n')], 2),
    # check-chains reports a garbled row as a finding naming file and line (issue 14): exit 1, not 2
    Case("unterminated CSV quote", "storage", "chain table '\"900100003,1'",
         lambda t: ["storage", "check-chains", _w(t, "c.csv", 'ChainId,TargetId\n"900100003,1\n')], 1),
    Case("byte-order mark (BOM)", "eplb", "statistics CSV starting with a BOM",
         lambda t: _stats(t, b"\xef\xbb\xbf1,2,3,4\n"), 0),
    Case("byte-order mark (BOM)", "topology", "links CSV starting with a BOM", _bom_links, 0),
    Case("byte-order mark (BOM)", "storage", "chain table starting with a BOM", _bom_chains, 0),
    Case("byte-order mark (BOM)", "profiles", "profile YAML starting with a BOM",
         lambda t: _profile(t, "\ufeffkind: node\n" + _node_profile().replace("name: h800-hgx\n", "")), 0),
    Case("duplicate YAML key", "profiles", "'name:' twice", lambda t: _profile(t, _PROFILE_DUP), 2),
    Case("duplicate YAML key", "health", "a record key twice",
         lambda t: ["health", "check", "--from-record", _w(t, "r.yaml", _record() + "hostname: again\n")], 2),
    Case("deep nesting", "eplb", "[[[[... 100,000 levels", lambda t: _stats(t, "[" * 100_000 + "]" * 100_000,
                                                                             "s.json"), 2),
    Case("deep nesting", "profiles", "x: [[[[... 50,000 levels",
         lambda t: _profile(t, "x: " + "[" * 50_000 + "]" * 50_000), 2),
    Case("wrong type in a record field", "health", "pcie.width: 'wide'",
         lambda t: ["health", "check", "--from-record",
                    _w(t, "r.yaml", _record().replace("width: 16", "width: wide", 1))], 2),
    Case("forged .npy header", "eplb", "header shape (100000, 100000) over 8 bytes of data",
         lambda t: _stats(t, Path(_npy(t)).read_bytes(), "s.npy"), 2),
    # file kinds and sizes
    Case("file above the input limit", "eplb", "1 GiB (sparse) statistics file",
         lambda t: ["eplb", "rebalance", _sparse_gib(t), "--replicas", "4", "--gpus", "2", "--nodes", "1"], 2),
    Case("file above the input limit", "profiles", "--max-input-bytes 10 and a profile",
         lambda t: ["--max-input-bytes", "10", "profiles", "validate", str(ROOT / "profiles" / "nodes" /
                                                                           "h800-hgx.yaml")], 2),
    Case("file above the input limit", "topology", "--max-input-bytes 10 and a fabric dump",
         lambda t: ["--max-input-bytes", "10", "topology", "verify", _plan_dir(t),
                    str(ROOT / "tests" / "data" / "topology" / "perfect.ibnet")], 2),
    Case("device as input (/dev/zero)", "eplb", "/dev/zero as statistics",
         lambda t: ["eplb", "rebalance", "/dev/zero", "--replicas", "4", "--gpus", "2", "--nodes", "1"], 2),
    Case("device as input (/dev/zero)", "health", "--from-record /dev/zero",
         lambda t: ["health", "check", "--from-record", "/dev/zero"], 2),
    Case("device as input (/dev/zero)", "storage", "check-chains /dev/zero",
         lambda t: ["storage", "check-chains", "/dev/zero"], 2),
    Case("device as input (/dev/zero)", "profiles", "validate /dev/zero",
         lambda t: ["profiles", "validate", "/dev/zero"], 2),
    Case("device as input (/dev/zero)", "topology", "verify PLAN /dev/zero",
         lambda t: ["topology", "verify", _plan_dir(t), "/dev/zero"], 2),
    Case("FIFO as input", "eplb", "a named pipe nobody writes", lambda t: ["eplb", "rebalance", _fifo(t),
                                                                          "--replicas", "4", "--gpus", "2",
                                                                          "--nodes", "1"], 2),
    Case("FIFO as input", "health", "--from-record FIFO", lambda t: ["health", "check", "--from-record",
                                                                     _fifo(t)], 2),
    Case("FIFO as input", "storage", "check-chains FIFO", lambda t: ["storage", "check-chains", _fifo(t)], 2),
    Case("FIFO as input", "topology", "verify PLAN FIFO", lambda t: ["topology", "verify", _plan_dir(t),
                                                                     _fifo(t)], 2),
    Case("folder as input file", "eplb", "statistics path is a folder", lambda t: ["eplb", "rebalance", str(t),
                                                                                   "--replicas", "4", "--gpus",
                                                                                   "2", "--nodes", "1"], 2),
    Case("missing file", "health", "--from-record absent.yaml",
         lambda t: ["health", "check", "--from-record", str(t / "absent.yaml")], 2),
    # issue 23: exit 2, never 4
    Case("integer of 4,400 digits", "topology", "links CSV b_port of 4,400 digits", _verify_port, 2),
    Case("integer of 4,400 digits", "storage", "admin_cli list-chains chain id of 4,400 digits", _doctor, 2),
    Case("integer of 4,400 digits", "storage", "create_target_cmd.txt --node-id of 4,400 digits", _expand_create, 2),
    Case("integer of 4,400 digits", "storage", "storage chains --ssds-per-node of 309 digits (float overflow)",
         lambda t: ["storage", "chains", "--nodes", "6", "--ssds-per-node", "9" * 309], 2),
    Case("CSV field above 131,072 characters", "topology", "links CSV field of 200,000 characters",
         lambda t: ["topology", "verify", _plan_dir(t), _w(t, "l.csv", "a_device,a_port,b_device,b_port\n"
                                                                       + "x" * 200_000 + ",1,a,1\n")], 2),
    Case("CSV field above 131,072 characters", "eplb", "statistics CSV field of 200,000 characters",
         lambda t: _stats(t, "1,2\n" + "x" * 200_000 + ",1\n"), 2),
    Case("forged .npy header", "eplb", "header with a syntax error (open brace)", _npy_syntax, 2),
    Case("non-ASCII digit as an id", "trace", "kernel device '\u00b9' (str.isdigit but not int)",
         lambda t: ["trace", "stragglers", *_trace_ranks(t, device="\u00b9")], 0),
    Case("terminal control characters", "trace", "kernel name '\\ud800\\x1b[2J' in a table",
         lambda t: ["trace", "overlap", "--explain-classes", *_trace_ranks(t, name="\ud800\x1b[2J")], 0),
    Case("reserved option abbreviated", "launch", "--sbatch-arg=--outpu=/etc/cron.d/x",
         lambda t: ["launch", "--nodes", "2", "--backend", "slurm", "--sbatch-arg=--outpu=/etc/cron.d/x",
                    "--out-dir", str(t / "job"), "--", "t.py"], 2),
    Case("reserved option abbreviated", "health", "fleet --srun-arg=--nodel=n2",
         lambda t: ["health", "fleet", "--nodelist", "n1", "--srun-arg=--nodel=n2"], 2),
    # issue 23: bounds before work
    Case("YAML above its bounds", "health", "5 MB record (400,000 keys)",
         lambda t: ["health", "check", "--from-record",
                    _w(t, "r.yaml", "".join(f"k{i}: [1, 2, 3]\n" for i in range(400_000))[:5_000_000])], 2),
    Case("YAML above its bounds", "profiles", "a billion laughs (10 levels of 10 aliases)",
         lambda t: _profile(t, _laughs()), 2),
    Case("YAML above its bounds", "topology", "--jobs with a 500,000-item flow list",
         lambda t: ["topology", "simulate", _plan_dir(t), "--jobs-file", _w(t, "j.yaml", "x: [" + "1," * 500_000
                                                                         + "1]\n")], 2),
    # issue 33: plan names Slurm reads as many nodes, plan sizes, non-finite thresholds
    Case("plan node name Slurm reads as many nodes", "health", "burn-in --drain of a plan whose node is 'ALL'",
         lambda t: ["health", "burn-in", _plan_json(t, {"node0005": "ALL"}), "--fabric-model", _no_faults(t),
                    "--drain"], 2),
    Case("plan node name Slurm reads as many nodes", "health", "burn-in of a plan whose node is 'node[1-2]'",
         lambda t: ["health", "burn-in", _plan_json(t, {"node0005": "node[1-2]"}), "--fabric-model",
                    _no_faults(t)], 2),
    Case("plan node name Slurm reads as many nodes", "topology", "simulate of a plan whose node is 'default'",
         lambda t: ["topology", "simulate", _plan_json(t, {"node0002": "default"})], 2),
    Case("plan node name Slurm reads as many nodes", "topology", "plan --node-name ALL",
         lambda t: ["topology", "plan", "--nodes", "16", "--node-name", "ALL"], 2),
    Case("newline or control character in a name", "health", "burn-in of a plan whose leaf name holds ESC",
         lambda t: ["health", "burn-in", _plan_json(t, {"p0-leaf01": "p0-leaf\x1b01"}), "--fabric-model",
                    _no_faults(t), "--out-dir", str(t / "o")], 2),
    Case("plan above its size bounds", "health", "burn-in of 20,000 nodes x 20,000 NICs (0.9 MB)",
         lambda t: ["health", "burn-in", _huge_plan(t), "--fabric-model", _no_faults(t)], 2),
    Case("plan above its size bounds", "topology", "simulate of 20,000 nodes x 20,000 NICs (0.9 MB)",
         lambda t: ["topology", "simulate", _huge_plan(t)], 2),
    Case("plan node name Slurm reads as many nodes", "trace", "stragglers --plan whose node is 'ALL'",
         lambda t: _trace_plan(t, _plan_json(t, {"node0002": "ALL"})), 2),
    Case("plan above its size bounds", "trace", "stragglers --plan of 20,000 nodes x 20,000 NICs (0.9 MB)",
         lambda t: _trace_plan(t, _huge_plan(t)), 2),
    Case("NaN option", "topology", "verify --threshold effective_ber=nan",
         lambda t: ["topology", "verify", _plan_dir(t), str(Path(_plan_dir(t)) / "cabling.csv"), "--threshold",
                    "effective_ber=nan"], 2),
    # issue 33: hostlists bounded from the expression, before any name is made
    Case("hostlist past its bounds", "health", "fleet -w with a 5,000-digit range",
         lambda t: ["health", "fleet", "-w", "n[1-" + "9" * 5000 + "]"], 2),
    Case("hostlist past its bounds", "health", "fleet -w 'a' x 100,000 + '[0-99998]' (~10 GB expanded)",
         lambda t: ["health", "fleet", "-w", "a" * 100_000 + "[0-99998]"], 2),
    Case("hostlist past its bounds", "trace", "overlap --slurm -w n[0-255]n[0-255]n[0-255] (16.7M names)",
         lambda t: ["trace", "overlap", "x.json", "--slurm", "-w", "n[0-255]n[0-255]n[0-255]"], 2),
    # issue 33: one integer rule, no backtracking, trace sizes before allocation
    Case("integer of 4,400 digits", "topology", "perfquery --counters 'Lid 9...9' (4,400 digits)", _perfquery, 2),
    Case("integer of 4,400 digits", "topology", "LLDP neighbour port 'swp9...9' (4,400 digits)",
         lambda t: _lldp(t, "swp" + HUGE), 2),
    Case("integer above int64", "trace", "Kineto Seq 2^63-1 matched on two ranks", _trace_seq, 0),
    Case("pattern that backtracks", "topology", "LLDP port of 480,000 digits then 'x1' (was 275 s)",
         lambda t: _lldp(t, "9" * 480_000 + "x1"), 1),
    Case("pattern that backtracks", "storage", "--dataset of 120,000 digits then '!' (was minutes)",
         lambda t: ["storage", "size", "--dataset", "9" * 120_000 + "!", "--clients", "10"], 2),
    Case("trace above its bounds", "trace", "overlap of 4,097 one-kernel streams in one file",
         lambda t: _trace_streams(t, ["overlap"], 4097), 2),
    Case("trace above its bounds", "trace", "timeline of 1,025 lanes (counted before drawing)",
         lambda t: _trace_streams(t, ["timeline", "-o", str(t / "t.svg")], 1025), 2),
    # issue 29: field formats of fabric dumps: read, or refused in one line, never read as zero links
    Case("LLDP output that is not understood", "topology",
         "verify of a node's lldpctl '{\"lldp\": {}}' (no neighbour)",
         lambda t: ["topology", "verify", _plan_dir(t), _w(t, "node0001.json", '{"lldp": {}}')], 2),
    Case("LLDP output that is not understood", "topology", "verify of lldpctl json0 with \"interface\": 3",
         lambda t: ["topology", "verify", _plan_dir(t), _w(t, "node0001.json", '{"lldp": [{"interface": 3}]}')], 2),
    Case("ibnetdiscover -p with an unquoted open port", "topology",
         "verify of a -p report whose open-port description is bare (read: no links, every cable missing)",
         lambda t: ["topology", "verify", _plan_dir(t), _w(t, "p.ports", BARE_OPEN_PORT)], 1),
    # issue 33: the .pt reader as a bounded interpreter, eplb sizes bounded before the work
    Case("hostile pickle (.pt)", "eplb", "BUILD of a 2-D array into a storage, then a tensor at an offset",
         lambda t: _stats(t, _pt("build_on_storage"), "d.pt"), 2),
    Case("hostile pickle (.pt)", "eplb", "a 2,000,000-deep chain of 1-tuples as a dict key",
         lambda t: _stats(t, _pt("tuple_chain_key"), "d.pt"), 2),
    Case("hostile pickle (.pt)", "eplb", "a memo index of 2^27 (257 bytes)", lambda t: _stats(t, _pt("memo_index"),
                                                                                           "d.pt"), 2),
    Case("hostile pickle (.pt)", "eplb", "a stride-0 tensor of 1,000^3 values over one element",
         lambda t: _stats(t, _pt("stride_zero"), "d.pt"), 2),
    Case("hostile pickle (.pt)", "eplb", "4 MiB of EMPTY_LIST", lambda t: _stats(t, _pt("open_lists_4mib"), "d.pt"),
         2),
    Case("hostile pickle (.pt)", "eplb", "a global named 'os\\nerror: ...'",
         lambda t: _stats(t, _pt("newline_global"), "d.pt"), 2),
    Case("corrupt zip member (.pt)", "eplb", "CRC mismatch", lambda t: _stats(t, _pt("corrupt_crc"), "d.pt"), 2),
    Case("corrupt zip member (.pt)", "eplb", "encrypted member", lambda t: _stats(t, _pt("encrypted_member"), "d.pt"),
         2),
    Case("corrupt zip member (.pt)", "eplb", "compression method 99", lambda t: _stats(t, _pt("unknown_method"),
                                                                                     "d.pt"), 2),
    Case("corrupt zip member (.pt)", "eplb", "broken deflate stream", lambda t: _stats(t, _pt("bad_deflate"), "d.pt"),
         2),
    Case("planning work above its bounds", "eplb", "balanced, 4 x 4,096 experts at 8,192 slots",
         lambda t: _eplb_case(t, "balanced_large"), 2),
    Case("planning work above its bounds", "eplb", "a placement giving one expert 61,441 of 65,536 slots",
         lambda t: _eplb_case(t, "simulate_hot_placement"), 2),
    Case("planning work above its bounds", "eplb", "replay of 40 windows at 1,024 slots, balanced",
         lambda t: _eplb_case(t, "replay_many_windows"), 2),
    Case("planning work above its bounds", "eplb", "a placement file of 3,000,000 slot ids",
         lambda t: _eplb_case(t, "simulate_many_numbers"), 2),
    Case("NaN option", "eplb", "replay --min-gain nan", lambda t: _eplb_case(t, "replay_min_gain_nan"), 2),
]

FAULTS: list[Case] = [
    Case("site config is a FIFO", "profiles", "DSCTL_CONFIG=FIFO dsctl profiles list", None, 2, _site_config("fifo")),
    Case("site config is a device", "profiles", "DSCTL_CONFIG=/dev/zero dsctl profiles list", None, 2,
         _site_config("device")),
    Case("site config nested 100,000 deep", "profiles", "DSCTL_CONFIG=deep.toml dsctl profiles list", None, 2,
         _site_config("deep")),
    Case("site config integer of 4,400 digits", "profiles", "DSCTL_CONFIG=int.toml dsctl profiles list", None, 2,
         _site_config("huge-int")),
    Case("stdout on a full device (/dev/full)", "profiles", "profiles list --format json > /dev/full", None, 2,
         _full_stdout(["profiles", "list", "--format", "json"])),
    Case("stdout on a full device (/dev/full)", "model", "model kv-cache > /dev/full", None, 2,
         _full_stdout(["model", "kv-cache"])),
    Case("SIGTERM while --out-dir is written", "topology", "topology plan --out-dir DIR, SIGTERM before the swap", None,
         128 + signal.SIGTERM, _sigterm_during_out),
    Case("temporaries of a SIGKILLed run", "topology", ".DIR.dsctl-<dead pid>-* beside --out-dir DIR", None, 0,
         _killed_run_leftovers),
    Case("--out-dir into an earlier run's folder", "launch",
         "launch layout --out-dir DIR twice, then a file added to DIR", None, 2, _out_existing),
    Case("--out-dir DIR with DIR.prev as the input", "health", "health burn-in DIR.prev --out-dir DIR", None, 2,
         _burn_in_prev_as_input),
    Case("--out-dir on a read-only place", "storage", "storage chains --out-dir under a read-only folder", None, 2,
         _read_only_out),
    Case("node answer with Infinity", "trace", "trace overlap --slurm, a node's wall_us is Infinity", None, 2,
         _slurm_answer),
]


def run_case(case: Case, tmp: Path) -> tuple[int, str]:
    """Run one case in the empty folder ``tmp``: (exit code, first stderr line)."""
    from tests.conftest import run_cli

    if case.fault is not None:
        return case.fault(tmp), ""
    assert case.args is not None
    result = run_cli(*case.args(tmp))
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    return result.exit_code, (result.stderr.splitlines() or [""])[0]
