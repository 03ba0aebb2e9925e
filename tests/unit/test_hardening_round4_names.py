"""Issue 33 (hardening round 4): plain node names at the plan reader and at every drain, Slurm's confirmation
before a drain, the writer's input check over everything it deletes, and the plan's size bounds."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsctl.cluster.hostlist import compress, expand
from dsctl.cluster.plan_file import MAX_ENDPOINTS, MAX_GPUS_PER_NODE, MAX_NICS_PER_NODE, load_plan
from dsctl.errors import DsctlError, EnvironmentMissing, InputError
from dsctl.health.drain import DrainLimit, drain_argv, plan_drain
from dsctl.names import NODE_NAME, plain_node_name

COLUMNS = ["plane", "kind", "a_device", "a_port", "b_device", "b_port"]


def plan_text(nodes: list[str], nics: list[str] | None = None, switches: tuple[str, ...] = ("leaf1",),
              gpus: object = 8) -> str:
    nics = ["mlx5_0"] if nics is None else nics
    devices = [[n, "node", -1, -1, len(nics)] for n in nodes] + [[s, "leaf", 0, -1, 64] for s in switches]
    cables = [[0, "node-leaf", n, nics[0], switches[0], i + 1] for i, n in enumerate(nodes[:64])] if nics else []
    return json.dumps({"schema": "dsctl.topology.plan/1", "spec": {"num_gpus_per_node": gpus, "port_gbps": 400},
                       "cable_columns": COLUMNS, "nics": nics, "nic_plane": [0] * len(nics), "devices": devices,
                       "cables": cables})


@pytest.mark.parametrize("name", ["ALL", "all", "aLL", "DEFAULT", "default", "n[1-2]", "a,b", "a b", "a\tb",
                                  "a\n", "-x", ".x", "", "n" * 65, "n\x1b", "gpu*", "n=1", "n:1", "n/1", "n@x",
                                  "\u0661", "n\u00e9"])
def test_names_slurm_reads_otherwise_are_not_plain(name: str) -> None:
    assert not plain_node_name(name)
    with pytest.raises(InputError, match=r"devices\[1\]\[0\] \(name\) must be a (non-empty|plain node) name"):
        load_plan(plan_text(["n1", name]))
    with pytest.raises(InputError, match="refusing to drain"):
        drain_argv(name, "dsctl:burnin x")


@pytest.mark.parametrize("name", ["node0001", "gpu-a.1", "n_1", "1", "ALLx", "xall", "defaults", "n" * 64])
def test_plain_names_pass_everywhere(name: str) -> None:
    assert plain_node_name(name)
    assert load_plan(plan_text([name, "zz9"])).nodes == (name, "zz9")
    assert drain_argv(name, "r")[2] == f"NodeName={name}"


@given(st.text(max_size=80))
def test_a_plain_name_is_one_node_to_any_hostlist_reader(name: str) -> None:
    """Whatever the text, the reader either refuses it (InputError) or accepts a name that a hostlist expands to
    itself alone, that is no reserved word, and that the drain command takes as one NodeName."""
    try:
        plan = load_plan(plan_text([name, "zz9"]))
    except InputError:
        assert not plain_node_name(name) or name == "zz9"
        return
    assert plan.nodes[0] == name and NODE_NAME.fullmatch(name) and name.lower() not in ("all", "default")
    assert expand(name) == [name] and compress([name]) == name
    assert drain_argv(name, "r")[2] == f"NodeName={name}"


@given(st.text(max_size=80))
def test_switch_and_nic_names_never_carry_control_or_markup(name: str) -> None:
    for text in (plan_text(["n1"], switches=(name,)), plan_text(["n1"], nics=[name])):
        try:
            load_plan(text)
        except InputError:
            continue
        assert len(name) <= 64 and not any(c in name for c in "<>&\"' ,#=\x1b\n\r\t\x00")


def test_the_breaker_counts_plain_nodes_only() -> None:
    """A wanted drain of 'ALL' was one step of 16: the breaker let it through. Now it is refused outright."""
    with pytest.raises(InputError, match="refusing to drain 'ALL'"):
        plan_drain([("n1", "r"), ("ALL", "r")], {}, 16, DrainLimit("10%", percent=10.0))
    plan = plan_drain([("n1", "r")], {}, 16, DrainLimit("10%", percent=10.0))
    assert not plan.tripped and [s.node for s in plan.runnable] == ["n1"]


def test_plan_sizes_are_bounded_from_the_lengths() -> None:
    with pytest.raises(InputError, match=f"at most {MAX_NICS_PER_NODE} NICs per node"):
        load_plan(plan_text(["n1"], nics=[f"m{i}" for i in range(MAX_NICS_PER_NODE + 1)]))
    with pytest.raises(InputError, match=r"spec.num_gpus_per_node must be a whole number 1\.\.64"):
        load_plan(plan_text(["n1"], gpus=MAX_GPUS_PER_NODE + 1))
    nodes = MAX_ENDPOINTS // MAX_NICS_PER_NODE
    nics = [f"m{i}" for i in range(MAX_NICS_PER_NODE)]
    names = [f"n{i}" for i in range(nodes + 1)]
    with pytest.raises(InputError, match=f"more than {nodes:,} nodes of {MAX_NICS_PER_NODE} NICs"):
        load_plan(plan_text(names, nics=nics))
    assert len(load_plan(plan_text(names[:nodes], nics=nics)).nodes) == nodes


# --- drain time: Slurm confirms the name is exactly one node ---

def fake_scontrol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, show: str, code: int = 0) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "scontrol.log"
    script = bin_dir / "scontrol"
    script.write_text(f'#!/bin/sh\necho "$@" >> {log}\ncase "$1" in show) printf "%s" "{show}"; exit {code};; '
                      'esac\nexit 0\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return log


@pytest.mark.parametrize(("show", "code", "why"), [
    ("NodeName=n1 State=IDLE\nNodeName=n2 State=IDLE\n", 0, "2 records"),
    ("NodeName=n7 State=IDLE Reason=x\n", 0, "NodeName=n7"),
    ("", 1, "exit 1"),
    ("", 0, "0 records"),
])
def test_a_drain_needs_slurm_to_confirm_one_node_of_that_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              show: str, code: int, why: str) -> None:
    """A site NodeSet named like a node (or an alias) reads as one name to dsctl and as other nodes to Slurm:
    nothing is drained, exit 3 naming scontrol."""
    from dsctl.runners.drain import plan_and_drain

    log = fake_scontrol(tmp_path, monkeypatch, show, code)
    with pytest.raises(EnvironmentMissing) as caught:
        plan_and_drain([("n1", "dsctl:burnin x")], 16, DrainLimit("10%", percent=10.0))
    assert "scontrol show node -o n1" in caught.value.message and why in caught.value.message
    assert caught.value.exit_code == 3
    assert [line.split()[0] for line in log.read_text().splitlines()] == ["show"]  # no update ran


def test_a_confirmed_node_is_drained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dsctl.runners.drain import plan_and_drain

    log = fake_scontrol(tmp_path, monkeypatch, "NodeName=n1 Arch=x86_64 State=IDLE Reason=(null)\n")
    plan = plan_and_drain([("n1", "dsctl:burnin x")], 16, DrainLimit("10%", percent=10.0))
    assert [s.done for s in plan.steps] == [True]
    assert log.read_text().splitlines()[-1] == "update NodeName=n1 State=DRAIN Reason=dsctl:burnin x"


def test_runner_refuses_a_name_before_asking_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dsctl.runners.slurm_nodes import drain_node, node_drain_state, unique_names

    log = fake_scontrol(tmp_path, monkeypatch, "NodeName=ALL\n")
    for call in (lambda: node_drain_state("ALL"), lambda: drain_node("all", "r"),
                 lambda: unique_names(["n1", "ALL"], option="--nodelist")):  # health fleet's nodes, too
        with pytest.raises(DsctlError):
            call()
    assert not log.exists()


# --- the writer: every path it deletes is under the input check ---

def test_a_stale_temporary_that_is_an_input_is_never_swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dsctl.inputs import forget_inputs, note_input
    from dsctl.output.files import atomic_write

    monkeypatch.chdir(tmp_path)
    dead = 2**22 + 12345  # above any pid_max default: never a running process
    stale = tmp_path / f".out.txt.dsctl-{dead}-abc.tmp"
    stale.write_text("the input")
    forget_inputs()
    note_input(stale, "INPUT")
    atomic_write(tmp_path / "out.txt", "result")
    assert stale.read_text() == "the input"
    other = tmp_path / f".out.txt.dsctl-{dead}-def.tmp"
    other.write_text("left by a killed run")
    atomic_write(tmp_path / "out.txt", "result")
    assert not other.exists() and stale.exists()
    forget_inputs()


# --- burn-in answers: a node is believed only for the flows it received ---

def _round_and_spec() -> tuple[object, object, dict[str, object]]:
    from dsctl.health.burnin.design import design
    from dsctl.runners.burnin import ProbeOptions, round_spec
    from tests.unit.burnin_plans import graph_and_hops

    graph, hops = graph_and_hops("mpft", 16)
    rnd = design(graph, hops).rounds[0]
    spec, _names, ends = round_spec(graph, rnd, ProbeOptions(backend="gloo"), 29600)
    return rnd, ends, spec


ROUND = _round_and_spec()
#: every flow of the round as a probe would report it: most generated answers then hold real flows, sent by the
#: node that received them or by another one
_REAL_FLOWS = [{"src": a, "dst": b, "median_gbps": 390.0, "min_gbps": 380.0}
               for x, y in ROUND[2]["pairs"] for a, b in ((x, y), (y, x))]  # type: ignore[index]
_VALUE = st.one_of(st.integers(-3, 200), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                   st.none(), st.text(max_size=3), st.lists(st.integers(0, 3), max_size=2))


@given(st.lists(st.tuples(st.sampled_from([f"node{i:04d}" for i in range(1, 18)]),
                          st.one_of(st.none(), st.fixed_dictionaries({"flows": st.lists(
                              st.one_of(st.sampled_from(_REAL_FLOWS), st.sampled_from(_REAL_FLOWS), _VALUE,
                                        st.fixed_dictionaries(
                                  {"src": _VALUE, "dst": _VALUE, "median_gbps": _VALUE, "min_gbps": _VALUE})),
                              max_size=6)}))), max_size=6))
def test_any_answer_is_accepted_only_for_own_receives_or_refused_as_one_line(
        answers: list[tuple[str, dict[str, object] | None]]) -> None:
    import math

    from dsctl.runners.burnin import measured_from

    rnd, ends, spec = ROUND
    try:
        got = measured_from(rnd, ends, spec, answers)  # type: ignore[arg-type]
    except InputError as exc:
        assert "\n" not in exc.message and "answered" in exc.message and " node node" in exc.message
        return
    node_of = [spec["nodes"][r[0]] for r in spec["ranks"]]  # type: ignore[index]
    rank_of = {int(e): r for r, e in enumerate(ends.tolist())}  # type: ignore[attr-defined]
    reported_by_receiver = {(flow["src"], flow["dst"]) for n, doc in answers if doc
                            for flow in doc["flows"]  # type: ignore[attr-defined]
                            if flow in _REAL_FLOWS and node_of[flow["dst"]] == n}
    for f in range(rnd.num_flows):  # type: ignore[attr-defined]
        key = (rank_of[int(rnd.src[f])], rank_of[int(rnd.dst[f])])  # type: ignore[attr-defined]
        assert bool(got.answered[f]) == (key in reported_by_receiver), key
        assert math.isfinite(got.median_gbps[f]) and got.median_gbps[f] >= 0


def test_probe_reads_its_round_from_standard_input(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util
    import io
    import sys

    from dsctl.probe.__main__ import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    spec = {"nodes": ["a", "b"], "ranks": [[0, "", 0], [1, "", 0]], "pairs": [[0, 1]], "bytes": 1024,
            "repeats": 1, "backend": "gloo", "port": 29500}
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(spec)))
    assert main(["--round", "-"]) == 3  # the spec parsed; only torch is missing here
    monkeypatch.setattr(sys, "stdin", io.StringIO("[" * 100_000))
    assert main(["--round", "-"]) == 2
    assert capsys.readouterr().err.count("error:") == 2
