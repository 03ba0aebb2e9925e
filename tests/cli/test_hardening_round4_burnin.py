"""Issue 33 (hardening round 4), burn-in, plan names and drains: reproductions of each finding.

- a plan node named ``ALL`` (or a hostlist, a reserved word, a control character) is refused at the plan reader
  before any work, by every command that reads plans; a drain only ever names one plain node that Slurm confirms;
- ``--out DIR`` with ``DIR.prev`` as the input no longer deletes the input;
- real-path burn-in (fake ``srun``/``sinfo`` emulating every node's probe) reaches every round at 2,048 nodes: the
  round travels on srun's standard input, never in argv; a node's answer counts only for flows it received; a
  non-finite number in an answer is one line naming the node;
- a plan too large for memory is refused from its lengths.
"""

from __future__ import annotations

import json
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Cli = Callable[..., Any]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def plan16(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.conftest import run_cli

    out = tmp_path_factory.mktemp("plan") / "p16"
    assert run_cli("topology", "plan", "-N", "16", "--out-dir", str(out)).exit_code == 0
    return out


def renamed(plan: Path, tmp_path: Path, old: str, new: str) -> Path:
    """A copy of ``plan``'s plan.json with device ``old`` renamed ``new`` everywhere it appears."""
    doc = json.loads((plan / "plan.json").read_text())
    doc["devices"] = [[new if c == old else c for c in row] for row in doc["devices"]]
    doc["cables"] = [[new if c == old else c for c in row] for row in doc["cables"]]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    return path


def one_error_line(result: Any) -> str:
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert lines and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


FAULT_MODEL = {"seed": 1, "noise": 0.0, "faults": []}


@pytest.mark.parametrize("name", ["ALL", "all", "Default", "node[1-2]", "node1,node2", "node 1", "-n",
                                  "node\x1b[2J", "n" * 65, "gpu*"])
def test_a_plan_node_slurm_reads_as_many_nodes_is_refused_before_any_work(cli: Cli, plan16: Path, tmp_path: Path,
                                                                        name: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: 'ALL' was accepted (names were only checked non-empty); the rehearsal below found it at 0% and
    --drain ran 'scontrol update NodeName=ALL State=DRAIN', which drains every node of the cluster."""
    import dsctl.runners.drain as drain

    asked: list[str] = []
    monkeypatch.setattr(drain, "node_drain_state", lambda node: asked.append(node) or (False, ""))
    monkeypatch.setattr(drain, "drain_node", lambda node, why: asked.append(node))
    plan = renamed(plan16, tmp_path, "node0005", name)
    model = tmp_path / "m.json"
    model.write_text(json.dumps({**FAULT_MODEL, "faults": [{"node": "node0004", "rate": 0.0}]}))
    out = tmp_path / "out"
    r = cli("health", "burn-in", str(plan), "--fabric-model", str(model), "--drain", "--out-dir", str(out))
    assert r.exit_code == 2, r.stdout
    line = one_error_line(r)
    assert "devices[4][0] (name)" in line and "plain node name" in line, line
    assert "\x1b" not in r.stderr
    assert asked == [] and not out.exists()


@pytest.mark.parametrize("args", [["topology", "simulate", "{plan}"], ["topology", "verify", "{plan}", "{links}"]])
def test_every_command_reading_plans_refuses_the_name(cli: Cli, plan16: Path, tmp_path: Path,
                                                      args: list[str]) -> None:
    plan = renamed(plan16, tmp_path, "node0002", "ALL")
    argv = [a.format(plan=plan, links=plan16 / "cabling.csv") for a in args]
    r = cli(*argv)
    assert r.exit_code == 2 and "devices[1][0] (name)" in one_error_line(r), r.stderr


def test_a_switch_name_with_an_escape_is_refused_and_svg_escapes_free_text(cli: Cli, plan16: Path,
                                                                          tmp_path: Path) -> None:
    """Before: an ESC byte in a plan's names reached the burn-in SVG as is (invalid XML 1.0). Names are now
    refused at the reader; free text (spec.kind, a title) is escaped by the SVG writer."""
    import xml.etree.ElementTree as ET

    plan = renamed(plan16, tmp_path, "p0-leaf01", "p0-leaf\x1b01")
    model = tmp_path / "m.json"
    model.write_text(json.dumps(FAULT_MODEL))
    r = cli("health", "burn-in", str(plan), "--fabric-model", str(model), "--out-dir", str(tmp_path / "o"))
    assert r.exit_code == 2 and "a device name" in one_error_line(r)
    doc = json.loads((plan16 / "plan.json").read_text())
    doc["spec"]["kind"] = "mpft\x1b[2J<&"
    plan.write_text(json.dumps(doc))
    r = cli("health", "burn-in", str(plan), "--fabric-model", str(model), "--out-dir", str(tmp_path / "o"))
    assert r.exit_code == 0, r.stderr
    svg = (tmp_path / "o" / "plane0.svg").read_text()
    assert "\x1b" not in svg and "mpft\ufffd[2J&lt;&amp;" in svg
    ET.fromstring(svg)  # well-formed XML


def test_plan_name_template_making_all_is_refused_by_the_writer(cli: Cli, tmp_path: Path) -> None:
    r = cli("topology", "plan", "-N", "16", "--node-name", "ALL", "--out-dir", str(tmp_path / "p"))
    assert r.exit_code == 2 and "--node-name" in one_error_line(r)


def test_out_dir_prev_as_the_input_is_never_deleted(cli: Cli, plan16: Path, tmp_path: Path) -> None:
    """Before: 'burn-in OUT.prev --out OUT' deleted OUT.prev (the input plan) to keep the old OUT there."""
    prev = tmp_path / "out.prev"
    assert cli("topology", "plan", "-N", "16", "--out-dir", str(prev)).exit_code == 0
    model = tmp_path / "m.json"
    model.write_text(json.dumps(FAULT_MODEL))
    out = tmp_path / "out"
    assert cli("health", "burn-in", str(prev), "--fabric-model", str(model), "--out-dir", str(out)).exit_code == 0
    before = (prev / "plan.json").read_bytes()
    r = cli("health", "burn-in", str(prev), "--fabric-model", str(model), "--out-dir", str(out))
    assert r.exit_code == 2, r.stdout
    line = one_error_line(r)
    assert "holds the input" in line and "out.prev" in line, line
    assert (prev / "plan.json").read_bytes() == before and (out / "burnin.json").exists()


def test_non_finite_threshold_is_refused(cli: Cli, plan16: Path) -> None:
    """Before: --threshold effective_ber=nan compared False with every BER: the check was silently off."""
    for value in ("nan", "inf", "-inf"):
        r = cli("topology", "verify", str(plan16), str(plan16 / "cabling.csv"), "--threshold",
                f"effective_ber={value}")
        assert r.exit_code == 2 and "effective_ber" in one_error_line(r), (value, r.stderr)


# --- real-path burn-in: a fake srun emulates every node's probe, a fake sinfo says every node is idle ---

FAKE_SRUN = '''#!{python}
import json, os, sys
args = sys.argv[1:]
cut = args.index("sh")
opts, rest = args[:cut], args[cut:]
token, command = rest[4], rest[6:]
nodelist = next(a.split("=", 1)[1] for a in opts if a.startswith("--nodelist="))
if "/" in nodelist:
    nodes = open(nodelist).read().split()
else:
    from dsctl.cluster.hostlist import expand as expand_hostlist_local
    nodes = expand_hostlist_local(nodelist)
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps({{"nodes": len(nodes), "longest_arg": max(len(a) for a in sys.argv),
                          "input_all": "--input=all" in opts, "command": command}}) + "\\n")
text = sys.stdin.read() if command[-2:] == ["--round", "-"] else command[command.index("--round") + 1]
spec = json.loads(text)
partner = {{}}
for a, b in spec["pairs"]:
    partner[a], partner[b] = b, a
ranks_of = {{}}
for r, (n, _nic, _gpu) in enumerate(spec["ranks"]):
    ranks_of.setdefault(spec["nodes"][n], []).append(r)
rate = float(os.environ["FAKE_GBPS"])
liar, inf, slow = (os.environ.get(k, "") for k in ("FAKE_LIAR", "FAKE_INF", "FAKE_SLOW"))
out = []
for task, node in enumerate(nodes):
    got = 1.0 if node == slow else rate
    flows = [{{"src": partner[r], "dst": r, "median_gbps": got, "min_gbps": got, "repeats": 1}}
             for r in ranks_of.get(node, []) if r in partner]
    if node == liar:  # also reports the flows the victim received, at 1 Gb/s
        victim = os.environ["FAKE_VICTIM"]
        flows += [{{"src": partner[r], "dst": r, "median_gbps": 1.0, "min_gbps": 1.0, "repeats": 1}}
                  for r in ranks_of.get(victim, []) if r in partner]
    if node == inf and flows:
        flows[0]["src"] = float("inf")
    doc = json.dumps({{"probe": "dsctl.probe/1", "node": node, "backend": "gloo", "flows": flows, "errors": []}})
    out.append(f"{{task}}: {{token}} node={{node}}\\n{{task}}: {{doc}}\\n{{task}}: \\n{{task}}: {{token}} exit=0\\n")
sys.stdout.write("".join(out))
'''

FAKE_SINFO = '''#!{python}
import sys
from dsctl.cluster.hostlist import expand as expand_hostlist_local
for name in expand_hostlist_local(sys.argv[sys.argv.index("-n") + 1]):
    print(name, "idle", "none")
'''


def fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> Path:
    """srun and sinfo stand-ins on PATH (no scontrol); returns the log of srun calls (one JSON line each)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("srun", FAKE_SRUN), ("sinfo", FAKE_SINFO)):
        path = bin_dir / name
        path.write_text(text.format(python=sys.executable))
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    system = [p for p in ("/usr/bin", "/bin") if Path(p).is_dir()]
    monkeypatch.setenv("PATH", ":".join([str(bin_dir), *system]))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    log = tmp_path / "srun.log"
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.setenv("FAKE_GBPS", "400")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return log


def calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def real_burn_in(cli: Cli, plan: Path, *more: str) -> Any:
    return cli("health", "burn-in", str(plan), "--transport", "gloo", "--timeout-s", "60", "-f", "json", *more)


def test_real_path_rounds_travel_on_standard_input(cli: Cli, plan16: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    log = fake_slurm(tmp_path, monkeypatch)
    r = real_burn_in(cli, plan16)
    assert r.exit_code == 0, r.stderr
    data = r.json()
    assert data["findings"] == [] and data["rounds_run"] == len(calls(log)) == 2
    for call in calls(log):
        assert call["input_all"] and call["command"][-2:] == ["--round", "-"] and call["nodes"] == 16


def test_a_node_answering_last_cannot_report_other_nodes_flows(cli: Cli, plan16: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the last answer's flows overwrote the receivers' own: healthy node0003 was found at 0% on the word
    of node0016 (and would have been drained with --drain)."""
    fake_slurm(tmp_path, monkeypatch, FAKE_LIAR="node0016", FAKE_VICTIM="node0003")
    r = real_burn_in(cli, plan16)
    assert r.exit_code == 0, r.stdout
    assert r.json()["findings"] == []
    monkeypatch.setenv("FAKE_SLOW", "node0003")  # control: the node's own report of slow receives is believed
    r = real_burn_in(cli, plan16)
    assert r.exit_code == 1 and {f["node"] for f in r.json()["findings"]} == {"node0003"}, r.stdout


def test_a_non_finite_number_in_an_answer_is_one_line_naming_the_node(cli: Cli, plan16: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: '"src": Infinity' raised OverflowError in int(): exit 4 with a traceback."""
    fake_slurm(tmp_path, monkeypatch, FAKE_INF="node0007")
    r = real_burn_in(cli, plan16)
    assert r.exit_code == 2, r.stdout
    line = one_error_line(r)
    assert "node node0007" in line and "flows[0].src = inf" in line, line


@pytest.mark.slow
def test_real_path_burn_in_over_2048_nodes_reaches_every_round(cli: Cli, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the round's spec was one argv string; at 768 nodes it passed Linux's 128 KiB limit and the run
    stopped with 'Argument list too long' (exit 3) in its first round."""
    plan = tmp_path / "p2048"
    assert cli("topology", "plan", "-N", "2048", "--out-dir", str(plan)).exit_code == 0
    log = fake_slurm(tmp_path, monkeypatch)
    r = real_burn_in(cli, plan)
    assert r.exit_code == 0, r.stderr
    data = r.json()
    seen = calls(log)
    assert data["rounds_run"] == len(data["rounds"]) == len(seen) == data["design"]["design_rounds"] >= 2
    assert data["findings"] == [] and data["design"]["coverage"] == 1.0
    assert all(c["nodes"] == 2048 and c["input_all"] for c in seen)
    assert max(c["longest_arg"] for c in seen) < 4096  # nothing in argv grows with the round


def test_plan_too_large_is_refused_from_its_lengths(cli: Cli, tmp_path: Path) -> None:
    """Before: 20,000 nodes x 20,000 NICs in 0.9 MB allocated 3-27 GB (burn-in, simulate, trace --plan)."""
    plan = tmp_path / "plan.json"
    nics = [f"m{i}" for i in range(20_000)]
    plan.write_text(json.dumps({"schema": "dsctl.topology.plan/1", "spec": {"num_gpus_per_node": 8,
                                                                            "port_gbps": 400},
                                "cable_columns": ["plane", "kind", "a_device", "a_port", "b_device", "b_port"],
                                "nics": nics, "nic_plane": [0] * len(nics),
                                "devices": [[f"n{i}", "node", -1, -1, 1] for i in range(20_000)], "cables": []}))
    r = cli("topology", "simulate", str(plan))
    assert r.exit_code == 2 and "nics: 20,000 NICs per node" in one_error_line(r)
    doc = json.loads(plan.read_text())
    doc["nics"], doc["nic_plane"] = nics[:256], [0] * 256
    plan.write_text(json.dumps(doc))
    r = cli("topology", "simulate", str(plan))
    assert r.exit_code == 2 and "4,194,304 endpoints" in one_error_line(r)


def bare_plan(path: Path, nodes: int, nics: int, gpus: int) -> Path:
    """A plan.json of ``nodes`` nodes and no switch or cable: the cheapest file that lists many endpoints."""
    names = [f"m{i}" for i in range(nics)]
    path.write_text(json.dumps({"schema": "dsctl.topology.plan/1", "spec": {"num_gpus_per_node": gpus,
                                                                            "port_gbps": 400, "kind": "mpft"},
                                "cable_columns": ["plane", "kind", "a_device", "a_port", "b_device", "b_port"],
                                "nics": names, "nic_plane": [0] * nics,
                                "devices": [[f"n{i}", "node", -1, -1, 1] for i in range(nodes)], "cables": []}))
    return path


def test_burn_in_bounds_its_endpoints_before_the_graph(cli: Cli, tmp_path: Path) -> None:
    """Within the plan reader's bounds, 65,536 nodes x 64 GPUs (2 MB) took burn-in 32 s and 2.1 GB; burn-in now
    refuses more than MAX_BURNIN_ENDPOINTS from the plan's lists, before the simulator's graph exists."""
    from dsctl.health.burnin.api import MAX_BURNIN_ENDPOINTS

    model = tmp_path / "m.json"
    model.write_text(json.dumps(FAULT_MODEL))
    plan = bare_plan(tmp_path / "plan.json", MAX_BURNIN_ENDPOINTS // 64 + 1, 64, 64)
    r = cli("health", "burn-in", str(plan), "--fabric-model", str(model))
    assert r.exit_code == 2 and f"a burn-in tests at most {MAX_BURNIN_ENDPOINTS:,}" in one_error_line(r)


def test_a_plane_without_switches_draws_an_empty_picture(cli: Cli, tmp_path: Path) -> None:
    """Found with the bounds cases: a plan whose plane has no switch made the SVG's max() raise (exit 4)."""
    import xml.etree.ElementTree as ET

    model = tmp_path / "m.json"
    model.write_text(json.dumps(FAULT_MODEL))
    plan = bare_plan(tmp_path / "plan.json", 64, 256, 8)
    r = cli("health", "burn-in", str(plan), "--fabric-model", str(model), "--out-dir", str(tmp_path / "o"))
    assert r.exit_code == 0, r.stderr
    ET.fromstring((tmp_path / "o" / "plane0.svg").read_text())


FAKE_SCONTROL = """#!/bin/sh
# 'show node -o LIST': one record per name; the site NodeSet 'gpus' stands for node0001 and node0002
echo "$@" >> "$FAKE_SCONTROL_LOG"
[ "$1 $2 $3" = "show node -o" ] || exit 0
echo "$4" | {python} -c '
import sys
from dsctl.cluster.hostlist import node_names
for name in node_names(sys.stdin.read().strip()):
    for one in (["node0001", "node0002"] if name == "gpus" else [name]):
        print(f"NodeName={{one}} Arch=x86_64 State=IDLE Reason=(null)")
'
"""


@pytest.mark.parametrize(("nodeset", "runs"), [("gpus", False), (None, True)])
def test_a_nodeset_named_like_a_node_is_refused_before_the_first_round(cli: Cli, plan16: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      nodeset: str | None, runs: bool) -> None:
    """A site NodeSet 'gpus' is a plain name to dsctl and many nodes to Slurm. With --drain on the real path,
    Slurm confirms every tested name as one node before any round: the NodeSet is exit 3 naming scontrol, srun
    never runs and nothing is drained (before: the report first, then the refusal at the drain)."""
    plan = renamed(plan16, tmp_path, "node0016", nodeset) if nodeset else plan16
    log = fake_slurm(tmp_path, monkeypatch)
    scontrol = tmp_path / "bin" / "scontrol"
    scontrol.write_text(FAKE_SCONTROL.format(python=sys.executable))
    scontrol.chmod(scontrol.stat().st_mode | stat.S_IEXEC)
    asked = tmp_path / "scontrol.log"
    monkeypatch.setenv("FAKE_SCONTROL_LOG", str(asked))
    r = real_burn_in(cli, plan, "--drain")
    if runs:
        assert r.exit_code == 0, r.stderr
        assert len(calls(log)) == 2
        assert asked.read_text().splitlines() == ["show node -o node[0001-0016]"]
        return
    assert r.exit_code == 3, r.stderr
    line = one_error_line(r)
    assert "Slurm does not confirm the 16 tested names" in line and "gpus is not a node" in line, line
    assert not log.exists()  # srun never ran
    assert all(not a.startswith("update") for a in asked.read_text().splitlines())
