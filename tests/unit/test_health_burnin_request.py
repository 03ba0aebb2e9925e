"""The burn-in request decides in the domain (issue 31): its option rules in field names, the NVLink round, the
drain plan; the command layer only says the fields as its flags (FIELD_OPTIONS of dsctl/commands/health.py)."""

from __future__ import annotations

import numpy as np
import pytest

import dsctl.commands.health  # noqa: F401  (its FIELD_OPTIONS table spells the fields)
from dsctl.commands._common import option_for
from dsctl.errors import InputError
from dsctl.health.burnin.api import BurninResult, with_drain_plan
from dsctl.health.burnin.design import CableCoverage, RoundDesign
from dsctl.health.burnin.locate import FaultFinding
from dsctl.health.burnin.request import BurninRequest
from dsctl.health.drain import NodeState, parse_max_drain


@pytest.mark.parametrize(("request_", "runs"), [
    (BurninRequest(), True),                                   # the nccl probe drives NVLink
    (BurninRequest(transport="gloo"), False),                  # gloo runs on CPUs: no NVLink round to run
    (BurninRequest(transport="gloo", rehearse=True), True),    # a rehearsal simulates it whatever the transport
    (BurninRequest(nvlink=False, rehearse=True), False),       # not wanted
])
def test_the_request_decides_whether_an_nvlink_round_runs(request_: BurninRequest, runs: bool) -> None:
    assert request_.nvlink_round is runs


@pytest.mark.parametrize(("request_", "fields", "field_text", "flag_text"), [
    (BurninRequest(fraction=1.5), ("fraction",), "fraction 1.5 must lie in (0, 1)", "--fraction 1.5 must lie"),
    (BurninRequest(mad_k=0), ("mad_k",), "mad_k 0 must be a positive", "--mad-k 0 must be a positive"),
    (BurninRequest(reports=True, rehearse=True), ("reports", "rehearse"), "reports and rehearse are two ways",
     "--from-perf and --fabric-model are two ways"),
    (BurninRequest(reports=True, nodes=("a", "b")), ("reports", "nodes"), "reports judges the nodes the reports "
     "name: nodes does not apply", "--from-perf judges the nodes the reports name: --nodelist does not apply"),
    (BurninRequest(reports=True, nvlink=False), ("reports", "nvlink"), "reports judges what the reports ran: "
     "nvlink does not apply", "--from-perf judges what the reports ran: --no-nvlink does not apply"),
    (BurninRequest(transport="mpi"), ("transport",), "transport 'mpi': use gloo or nccl", "--transport 'mpi'"),
    (BurninRequest(repeats=0), ("repeats", "timeout_s"), "repeats must be 1..100 and timeout_s seconds",
     "--repeats must be 1..100 and --timeout-s seconds"),
])
def test_rules_are_said_in_fields_by_the_domain_and_in_flags_by_the_command(
        request_: BurninRequest, fields: tuple[str, ...], field_text: str, flag_text: str) -> None:
    with pytest.raises(InputError) as caught:
        request_.check()
    error = caught.value
    assert (error.field, *error.mentions) == fields and field_text in error.message
    assert "--" not in error.message  # the domain names no flag
    error.name_options(lambda field: option_for(field, "health burn-in"))
    assert flag_text in error.message
    BurninRequest().check()  # the defaults obey every rule


def test_a_value_with_braces_is_never_read_as_a_field() -> None:
    error = InputError(": 'n{nodes}{0}x' is not a node of the plan", field="nodes")
    error.name_options(lambda field: option_for(field, "health burn-in"))
    assert error.message.startswith("--nodelist: 'n{nodes}{0}x'")
    for field in ("nodes", "fraction", "mad_k", "reports", "rehearse", "transport", "repeats", "timeout_s"):
        assert (option_for(field, "health burn-in") or "").startswith("--"), field


def result(findings: tuple[FaultFinding, ...], selected: tuple[str, ...], num_nodes: int = 20) -> BurninResult:
    design = RoundDesign((), 0, 1, CableCoverage(np.zeros(0, dtype=bool), {}, ()))
    nan = np.zeros(0)
    return BurninResult("plan.json", "mpft", num_nodes, 1, design, (), findings, 0.9, 4.0, 0, nan, nan, nan, "x",
                        selected)


def test_the_drain_plan_is_built_in_the_domain_against_the_nodes_covered() -> None:
    nic = FaultFinding("nic", "n1:mlx5_0", "n1", 0.5, False, "")
    cable = FaultFinding("cable", "l1:1 <-> s1:1", "", 0.5, False, "")
    assert with_drain_plan(result((cable,), ()), parse_max_drain("10%")).drain is None  # a cable drains nothing
    planned = with_drain_plan(result((nic, cable), ()), parse_max_drain("10%")).drain
    assert planned is not None and [(s.node, s.action) for s in planned.steps] == [("n1", "drain")]
    assert planned.limit == 2  # 10% of the plan's 20 nodes
    # 10% of the 4 nodes a run covered is less than one node: at least one
    few = result((nic,), ("n1", "n2", "n3", "n4"))
    assert few.fleet_size == 4 and with_drain_plan(few, parse_max_drain("10%")).drain.limit == 1  # type: ignore[union-attr]
    foreign = with_drain_plan(few, parse_max_drain("1"), {"n1": NodeState(True, "operator: RMA")}).drain
    assert foreign is not None and foreign.steps[0].action == "foreign"
