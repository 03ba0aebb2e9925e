"""Issue 23 items 2 and 3: bounds before work on every input, exit 2 never 4, escaping, signals, argv limits.
Each test failed (exit 4, a hang, a duplicate series, a live srun...) before the fix it names."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trace_builder as tb  # tests/trace_builder.py

from dsctl.errors import InputError
from dsctl.output.prometheus import Exposition, escape
from dsctl.profiles.textyaml import MAX_YAML_NODES, load_yaml
from tests.cli.refused import assert_refused

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
HUGE = "9" * 4400  # above Python's 4,300-digit int() limit


def _bad(result: Any, *needles: str) -> None:
    assert_refused(result, *needles)


# -- exit 2, never 4 --------------------------------------------------------------------------------------------

@pytest.fixture
def plan(cli, tmp_path: Path) -> Path:
    assert cli("topology", "plan", "--nodes", "4", "--out-dir", tmp_path / "plan").exit_code == 0
    return tmp_path / "plan"


def test_verify_csv_port_of_4400_digits(cli, tmp_path: Path, plan: Path) -> None:
    rows = list(csv.reader((plan / "cabling.csv").read_text().splitlines()))
    header = rows[0]
    switch_port = header.index("b_port")
    rows[1][switch_port] = HUGE
    links = tmp_path / "links.csv"
    links.write_text("\n".join(",".join(r) for r in rows) + "\n")
    _bad(cli("topology", "verify", plan, links), "is not a port number")


def test_links_csv_field_above_the_csv_limit(cli, tmp_path: Path, plan: Path) -> None:
    links = tmp_path / "links.csv"
    links.write_text("a_device,a_port,b_device,b_port\n" + "x" * 200_000 + ",1,a,1\n")
    _bad(cli("topology", "verify", plan, links), "line 2: not valid CSV", "field larger than field limit")


def test_chain_table_and_create_target_ids_of_4400_digits(cli, tmp_path: Path) -> None:
    src = DATA / "storage" / "tiny_v3_k2_r2_d2"
    for name, edit in (("create_target_cmd.txt", lambda t: t.replace("10001", HUGE, 1)),
                       ("generated_chain_table.csv", lambda t: t.replace("900100001", HUGE, 1)),
                       ("generated_chains.csv", lambda t: t.replace("900100001", HUGE, 1))):
        folder = tmp_path / name
        folder.mkdir()
        for f in src.iterdir():
            text = f.read_text()
            (folder / f.name).write_text(edit(text) if f.name == name else text)
        result = cli("storage", "expand", "--from", folder, "--add-nodes", "1")
        assert result.exit_code in (1, 2) and "internal error" not in result.stderr, (name, result.stderr)
        check = cli("storage", "check-chains", *sorted(folder.iterdir()))
        assert check.exit_code in (1, 2) and "internal error" not in check.stderr, (name, check.stderr)


@pytest.mark.parametrize("edit", ["chain", "target", "node", "cell"])
def test_doctor_ids_of_4400_digits(cli, tmp_path: Path, edit: str) -> None:
    src = DATA / "storage" / "doctor" / "healthy"
    chains, targets = (src / "list-chains.txt").read_text(), (src / "list-targets.txt").read_text()
    if edit == "chain":
        chains = chains.replace("\n900100001", "\n" + HUGE, 1)
    elif edit == "cell":
        chains = chains.replace("101000100101(", HUGE + "(", 1)
    elif edit == "target":
        targets = targets.replace("\n101000100101", "\n" + HUGE, 1)
    else:
        targets = targets.replace("10001 ", HUGE + " ", 1)
    (tmp_path / "c.txt").write_text(chains)
    (tmp_path / "t.txt").write_text(targets)
    _bad(cli("storage", "doctor", "--chains", tmp_path / "c.txt", "--targets", tmp_path / "t.txt"))


def test_doctor_counts_a_duplicated_chain_row_once(cli, tmp_path: Path) -> None:
    src = DATA / "storage" / "doctor" / "node_down"
    chains = (src / "list-chains.txt").read_text().splitlines()
    lost = next(line for line in chains[1:] if "SERVING(" in line or "OFFLINE" in line)
    (tmp_path / "c.txt").write_text("\n".join([*chains, lost]) + "\n")
    once = cli("storage", "doctor", "--chains", src / "list-chains.txt", "--targets", src / "list-targets.txt",
               "--format", "json").json()
    twice = cli("storage", "doctor", "--chains", tmp_path / "c.txt", "--targets", src / "list-targets.txt",
                "--format", "json").json()
    assert twice["chains_lost_redundancy"] == once["chains_lost_redundancy"]
    assert twice["chains_serving"] == once["chains_serving"]
    dup = [f for f in twice["findings"] if f["kind"] == "duplicate_row"]
    assert len(dup) == 1 and f"line {len(chains) + 1}" in dup[0]["detail"], dup


@pytest.mark.parametrize("content", [f"[launch]\npartition = {HUGE}\n", "x = " + "[" * 100_000 + "]" * 100_000],
                         ids=["4400-digit-int", "deep-nesting"])
def test_site_config_huge_int_and_deep_nesting(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               content: str) -> None:
    path = tmp_path / "dsctl.toml"
    path.write_text(content)
    monkeypatch.setenv("DSCTL_CONFIG", str(path))
    _bad(cli("profiles", "list"), str(path), "not valid TOML")


@pytest.mark.parametrize("kind", ["fifo", "device", "stdin"])
def test_site_config_fifo_device_and_stdin_never_block(tmp_path: Path, kind: str) -> None:
    """A FIFO nobody writes blocked every command forever; /dev/zero grew without limit."""
    path = {"fifo": tmp_path / "dsctl.toml", "device": Path("/dev/zero"), "stdin": Path("-")}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DSCTL_CONFIG": str(path)}
    proc = subprocess.run([sys.executable, "-m", "dsctl", "profiles", "list"], env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.PIPE if kind == "stdin" else None)
    assert proc.returncode == 2 and proc.stderr.startswith("error: "), proc.stderr


def test_npy_header_with_a_syntax_error(cli, tmp_path: Path) -> None:
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), "
    header += " " * (118 - len(header)) + "\n"
    path = tmp_path / "s.npy"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + b"\0" * 32)
    _bad(cli("eplb", "rebalance", path, "--replicas", "4", "--gpus", "2", "--nodes", "1"), "not a readable .npy")


def test_ssds_per_node_of_309_digits(cli) -> None:
    """OverflowError (integer division result too large for a float) before the bound check."""
    _bad(cli("storage", "chains", "--nodes", "6", "--ssds-per-node", "9" * 309), "--ssds-per-node", "309 digits")
    _bad(cli("storage", "chains", "--nodes", "6", "--ssds-per-node", "9" * 30), "--ssds-per-node", "1..999")


def test_from_record_relative_to_a_deleted_folder(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    code = ("import os, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); from dsctl.cli import main; "
            "sys.exit(main(['health', 'fleet', '--nodes', 'n1', '--from-record', 'r.yaml']))")
    proc = subprocess.run([sys.executable, "-c", code, str(gone)], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "--from-record" in proc.stderr


def _two_ranks(tmp_path: Path, **kernel: object) -> list[Path]:
    paths = []
    for rank in (0, 1):
        doc = tb.trace([tb.compute(0, 5), tb.nccl(10, 5 + rank), tb.compute(20, 5)], rank=rank)
        for ev in doc["traceEvents"]:
            if ev.get("cat") == "kernel" and ev["name"].startswith("sm90"):
                ev.setdefault("args", {}).update({k: v for k, v in kernel.items() if k != "name"})
                if "name" in kernel:
                    ev["name"] = kernel["name"]
        path = tmp_path / f"r{rank}.json"
        path.write_text(json.dumps(doc))
        paths.append(path)
    return paths


@pytest.mark.parametrize("command", [["stragglers"], ["timeline", "--out", "t.svg"], ["overlap"]])
def test_trace_device_superscript_one(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      command: list[str]) -> None:
    """'¹'.isdigit() is True but int('¹') raises ValueError (found by the random property run)."""
    monkeypatch.chdir(tmp_path)
    result = cli("trace", command[0], *_two_ranks(tmp_path, device="\u00b9", stream="\u00b2"), *command[1:])
    assert result.exit_code in (0, 1), result.stderr


@pytest.mark.parametrize("fmt", ["table", "json", "yaml"])
def test_lone_surrogate_and_escapes_in_a_kernel_name_at_output(cli, tmp_path: Path, fmt: str) -> None:
    paths = _two_ranks(tmp_path, name="\ud800gemm\x1b]0;owned\x07\x1b[2J")
    result = cli("trace", "overlap", "--explain-classes", *paths, "--format", fmt)
    assert result.exit_code == 0, result.stderr
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    if fmt == "table":
        assert "\\ud800gemm\\x1b]0;owned\\x07\\x1b[2J" in result.stdout
    if fmt == "json":
        names = [c["name"] for c in result.json()["names"]] if "names" in result.json() else []
        assert "\ud800gemm\x1b]0;owned\x07\x1b[2J" in names or "\\ud800" in result.stdout


def test_terminal_escapes_in_a_record_are_shown_escaped(cli, tmp_path: Path) -> None:
    record = (DATA / "health" / "hgx_h800_healthy.yaml").read_text()
    record = record.replace("hostname: ", 'hostname: "evil\\e[2J\\e]0;x\\a"\nold_hostname: ', 1)
    record = "\n".join(line for line in record.splitlines() if not line.startswith("old_hostname"))
    (tmp_path / "r.yaml").write_text(record)
    result = cli("health", "check", "--from-record", tmp_path / "r.yaml")
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout, result.stdout[:400]


# -- bounds ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "x: [" + "1," * 300_000 + "1]\n",                                        # many nodes in a flow list
    "".join(f"k{i}: 1\n" for i in range(200_000)),                            # many nodes in a block mapping
    "a: &a [1,1,1,1,1,1,1,1,1,1]\n" + "".join(                                # a billion laughs
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 10) + "]\n" for i in range(10)),
    "x: " + "y" * (5 * 1024**2) + "\n",                                       # 5 MiB of characters
], ids=["flow-list", "block-mapping", "aliases", "5-mib"])
def test_yaml_is_bounded_before_parsing(text: str) -> None:
    start = time.monotonic()
    with pytest.raises(InputError, match="at most"):
        load_yaml(text, "in.yaml")
    assert time.monotonic() - start < 30  # refused from a count, not after building the document


def test_yaml_under_the_bounds_still_loads() -> None:
    assert load_yaml("x: [" + "1," * (MAX_YAML_NODES // 2) + "1]\n", "in.yaml")["x"][-1] == 1
    doc = load_yaml("a: &a [1, 2]\nb: *a\n", "in.yaml")
    assert doc == {"a": [1, 2], "b": [1, 2]}


def test_yaml_record_of_5_mb_is_refused(cli, tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("".join(f"k{i}: [1, 2, 3]\n" for i in range(400_000))[:5_000_000])
    _bad(cli("health", "check", "--from-record", path), "at most")


def test_trace_event_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from dsctl.trace import parse, read_trace

    monkeypatch.setattr(parse, "MAX_EVENTS", 100)
    data = tb.encode(tb.trace([tb.compute(i * 10, 5) for i in range(150)]))
    with pytest.raises(InputError, match="more than 100 trace events"):
        read_trace([data], "t.json")
    read_trace([tb.encode(tb.trace([tb.compute(i * 10, 5) for i in range(50)]))], "t.json")


def test_fleet_keeps_only_the_digest_of_each_answer() -> None:
    from dsctl.health.fleet import NodeInput, digest, judge

    report = {"findings": [{"check": "G1", "severity": "OK", "subject": "gpu0", "message": "x" * 1000}] * 50
              + [{"check": "G6", "severity": "CRIT", "subject": "gpu3", "message": "down", "extra": "y" * 10}],
              "metrics": [{"name": "m", "value": 1}] * 100}
    small = digest(report)
    assert small == {"findings": [{"check": "G6", "severity": "CRIT", "subject": "gpu3", "message": "down"}]}
    assert judge(NodeInput("n1", small)) == judge(NodeInput("n1", report))
    for bad in ({"x": 1}, {"findings": [{"severity": 3}]}):
        assert judge(NodeInput("n1", digest(bad)))[0] == judge(NodeInput("n1", bad))[0]


# -- Prometheus ----------------------------------------------------------------------------------------------------

def test_prometheus_escapes_backslash_quote_newline_and_carriage_return() -> None:
    assert escape('a\\b"c\nd\re\r\nf') == 'a\\\\b\\"c\\nd\\ne\\nf'
    assert escape("esc\x1b") == "esc\ufffd"
    out = Exposition()
    out.add("finding", [("node", "n1"), ("subject", "gpu0\r\n# TYPE x counter")], 1.0)
    assert len(out.text().splitlines()) == 3 and "\r" not in out.text()


def test_prometheus_fleet_has_no_duplicate_series() -> None:
    from dsctl.health.fleet import FleetFinding, FleetReport, NodeVerdict
    from dsctl.output.prometheus import render_fleet

    finding = FleetFinding("n1", "G6", "CRIT", "gpu3", "down")
    report = FleetReport({"nodes": 2, "healthy": 0, "warn": 0, "crit": 2, "unreachable": 0},
                         (NodeVerdict("n1", "crit", 2), NodeVerdict("n1", "crit", 2)), (finding, finding), ())
    series = [line.rsplit(" ", 1)[0] for line in render_fleet(report, 0.0).splitlines() if not line.startswith("#")]
    assert len(series) == len(set(series))


# -- Slurm: abbreviations, argv limits, signals --------------------------------------------------------------------

@pytest.mark.parametrize("arg", ["--outpu=/etc/cron.d/x", "--o=/tmp/x", "--job-nam=x", "--nodel=gpu1", "--exclu"])
def test_sbatch_arg_abbreviations_of_reserved_options_are_refused(cli, tmp_path: Path, arg: str) -> None:
    out = tmp_path / "job"
    _bad(cli("launch", "--nodes", "2", "--backend", "slurm", f"--sbatch-arg={arg}", "--out-dir", out, "--", "t.py"),
         "dsctl writes")
    assert not out.exists()


@pytest.mark.parametrize("arg", ["--nodel=n2", "--job=x", "--tim=5", "--no-k", "--imm=1"])
def test_srun_arg_abbreviations_are_refused(cli, arg: str) -> None:
    _bad(cli("health", "fleet", "--nodelist", "n1", f"--srun-arg={arg}"), "--srun-arg")


def test_hostlists_for_65536_nodes_fit_in_argv() -> None:
    from dsctl.runners.fleet import MAX_ARG_CHARS, hostlist_chunks, srun_argv

    nodes = [f"gpu{i:05d}" for i in range(1, 65537)]
    assert hostlist_chunks(nodes) == ["gpu[00001-65536]"]
    argv = srun_argv("srun", nodes, ["true"], token="t", timeout_s=5, launch_timeout_s=5, partition=None,
                     job_name="j")
    assert max(len(a) for a in argv) < MAX_ARG_CHARS
    odd = [f"n{i * 7919 % 1000003:x}z{i}" for i in range(65536)]  # names that do not compress
    chunks = hostlist_chunks(odd)
    assert len(chunks) > 1 and max(len(c) for c in chunks) <= MAX_ARG_CHARS
    assert sum(c.count(",") + 1 for c in chunks) == len(odd)


RECORDING_SRUN = """#!/bin/sh
for arg in "$@"; do
  case "$arg" in --nodelist=*) list="${arg#--nodelist=}";; esac
done
printf '%s' "$list" > "$PIDS/nodelist"
case "$list" in */*) cp "$list" "$PIDS/nodefile";; esac
exit 0
"""


def test_names_that_do_not_compress_reach_srun_in_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """65,536 names without a common numbered stem: srun gets --nodelist=FILE (a path: srun reads the names from
    it), the file lists every node once and is gone afterwards; before, this was exit 2 (no hostlist fits argv)."""
    from dsctl.runners.fleet import run_on_nodes

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(RECORDING_SRUN)
    (bin_dir / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("PIDS", str(tmp_path))
    odd = [f"n{i * 7919 % 1000003:x}z{i}" for i in range(65536)]
    run = run_on_nodes(odd, ["true"], check_states=False, timeout_s=5, launch_timeout_s=5)
    listed = (tmp_path / "nodelist").read_text()
    assert "/" in listed and not Path(listed).exists()
    assert (tmp_path / "nodefile").read_text().splitlines() == odd
    assert len(run.answers) == len(odd) and all(a.document is None for a in run.answers)
    run_on_nodes(["gpu001", "gpu002"], ["true"], check_states=False, timeout_s=5, launch_timeout_s=5)
    assert (tmp_path / "nodelist").read_text() == "gpu[001-002]"  # names that compress stay on the command line


FAKE_SRUN = """#!/bin/sh
echo $$ > "$PIDS/srun"
sleep 300 &
echo $! > "$PIDS/task"
wait
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_srun_and_its_tasks_end_when_dsctl_is_signalled(tmp_path: Path, sig: signal.Signals) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(FAKE_SRUN)
    (bin_dir / "srun").chmod(0o755)
    code = ("import sys; from dsctl.runners.fleet import run_on_nodes\n"
            "try:\n    run_on_nodes(['n1', 'n2'], ['true'], check_states=False, timeout_s=300)\n"
            "except KeyboardInterrupt:\n    sys.exit(130)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{bin_dir}:{os.environ['PATH']}", "PIDS": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "task").exists() or not (tmp_path / "task").read_text().strip():
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.05)
    pids = [int((tmp_path / name).read_text()) for name in ("srun", "task")]
    proc.send_signal(sig)
    assert proc.wait(timeout=60) == 128 + sig
    time.sleep(0.2)
    for pid in pids:
        alive = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True).stdout.strip()
        assert not alive or alive.startswith("Z"), (pid, alive)


def test_timeline_of_spans_near_float_max_draws_no_nan() -> None:
    """Found by the random exploration (DSCTL_HOSTILE_EXAMPLES=300): inf - inf and inf * 0 in the drawing gave
    a RuntimeWarning and 'nan' coordinates."""
    import warnings

    import numpy as np

    from dsctl.trace.timeline import Lane, RankLanes, timeline

    lane = Lane(0, "gpu0", 7, {"computation": (np.array([-1e308, 0.0]), np.array([1e308, 1.0]))})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        svg = timeline([RankLanes("r0.json", 1.7e308, [lane]), RankLanes("r1.json", 0.0, [])], "t")
    assert "nan" not in svg.lower() and "inf" not in svg.lower()


def test_error_lines_show_terminal_escapes_escaped(cli, tmp_path: Path) -> None:
    result = cli("health", "check", "--from-record", str(tmp_path / "\x1b[2J\x1b]0;x\x07r.yaml"))
    assert result.exit_code == 2 and "\x1b" not in result.stderr and "\\x1b[2J" in result.stderr, result.stderr


def test_statistics_above_float32_are_one_error_line(tmp_path: Path) -> None:
    """Found by the random exploration: a load of 1e39 printed numpy's 'overflow encountered in cast' warning
    before the error line."""
    stats = tmp_path / "s.json"
    stats.write_text("[[1e39, 1, 2, 3], [1, 2, 3, 4]]")
    proc = subprocess.run([sys.executable, "-W", "default", "-m", "dsctl", "eplb", "rebalance", str(stats),
                           "--replicas", "4", "--gpus", "2", "--nodes", "1"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("error: "), proc.stderr
    assert "RuntimeWarning" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("boot", ["253402300800.0", "1e300"])
def test_a_boot_time_past_the_year_9999_is_bad_input(cli, tmp_path: Path, boot: str) -> None:
    """Found by DSCTL_HOSTILE_EXAMPLES=2000: host.boot_time_s 253402300800 (10000-01-01) passed the record check and
    made the table's "booted" date raise (exit 4)."""
    source = (ROOT / "tests" / "data" / "health" / "hgx_h800_healthy.yaml").read_text()
    record = tmp_path / "node.yaml"
    record.write_text(source.replace("boot_time_s: 1790000000.0", f"boot_time_s: {boot}", 1))
    _bad(cli("health", "check", "--from-record", record), "host.boot_time_s", "year 10000")
    record.write_text(source.replace("boot_time_s: 1790000000.0", "boot_time_s: 253402300799.0", 1))
    assert "booted 9999-12-31 23:59 UTC" in cli("health", "check", "--from-record", record).stdout


def test_trace_files_sort_naturally_whatever_digits_their_names_hold() -> None:
    """Names with non-ASCII digits ("٣") stay text in the natural sort: int and str parts are never compared
    (the sort raised TypeError after digit tests became ASCII-only)."""
    from dsctl.runners.trace_files import _natural

    names = ["a\u0663.json", "a1.json", "a10.json", "a2.json", "a\u00b9.json"]
    assert sorted(names, key=_natural)[:3] == ["a1.json", "a2.json", "a10.json"]
