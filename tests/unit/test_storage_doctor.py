"""storage doctor on admin_cli list-chains / list-targets output, one fixture folder per cluster state."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.storage.doctor import DoctorResult, doctor, parse_list_chains

DATA = Path(__file__).resolve().parents[1] / "data" / "storage" / "doctor"


def _run(state: str) -> DoctorResult:
    folder = DATA / state
    return doctor((folder / "list-chains.txt").read_text(), "list-chains.txt",
                  (folder / "list-targets.txt").read_text(), "list-targets.txt")


def _kinds(result: DoctorResult) -> dict[tuple[str, str], str]:
    return {(f.kind, f.subject): f.severity for f in result.findings}


def test_healthy() -> None:
    result = _run("healthy")
    assert result.exit_code == 0 and result.findings == [] and result.nodes == []
    assert (result.num_chains, result.num_targets, result.replication) == (10, 30, 3)
    assert result.state_counts == {"SERVING": 30}


def test_one_node_down() -> None:
    result = _run("node_down")
    assert result.exit_code == 1 and result.chains_lost_redundancy == 6 and result.chains_single_point == 0
    assert _kinds(result) == {("lost_redundancy", "6 chain(s)"): "warning", ("node_down", "node 10003"): "warning"}
    assert [(n.node_id, n.offline, n.disks_affected) for n in result.nodes] == [(10003, 6, [0, 1])]


def test_two_nodes_down_names_the_nodes_whose_failure_makes_chains_unavailable() -> None:
    result = _run("two_nodes_down")
    assert result.exit_code == 1 and result.chains_single_point == 4 and result.chains_unavailable == 0
    kinds = _kinds(result)
    assert kinds[("single_point", "node 10001")] == "critical" and kinds[("single_point", "node 10004")] == "critical"
    assert {n.node_id: n.chains_it_alone_serves for n in result.nodes} == {10001: 2, 10002: 0, 10003: 0, 10004: 2}


def test_lastsrv_and_unavailable() -> None:
    result = _run("lastsrv_unavailable")
    assert result.exit_code == 1 and result.chains_unavailable == 2
    assert "UNAVAILABLE" in result.verdict
    lastsrv = [f for f in result.findings if f.kind == "lastsrv"]
    assert len(lastsrv) == 2 and all("rotate-lastsrv" in f.action and "node 10001" in f.detail for f in lastsrv)
    assert result.findings[0].severity == "critical"


def test_replaced_disk_points_at_create_targets() -> None:
    result = _run("disk_replaced")
    assert result.exit_code == 1 and result.chains_lost_redundancy == 3
    offline = next(f for f in result.findings if f.kind == "offline")
    assert offline.subject == "node 10004 disk 1"
    assert "create-targets --node-id 10004 --disk-index 1" in offline.action
    assert not any(f.kind == "node_down" for f in result.findings)


def test_syncing_is_recovering() -> None:
    result = _run("syncing")
    assert result.exit_code == 1 and result.chains_syncing == 3
    assert ("recovering", "6 target(s)") in _kinds(result)


def test_rows_quoted_from_upstream_issues() -> None:
    up = DATA / "upstream_issues"
    ok = doctor((up / "issue351-list-chains.txt").read_text(), "x", None, None)
    assert ok.exit_code == 0 and ok.replication == 2
    never_created = doctor((up / "m3fs123-list-chains.txt").read_text(), "x", None, None)
    assert never_created.chains_unavailable == 1 and never_created.exit_code == 1
    assert any("create_target_cmd.txt" in f.action for f in never_created.findings if f.kind == "lastsrv")
    lost = doctor((up / "issue316-list-chains.txt").read_text(), "x", (up / "issue316-list-targets.txt").read_text(),
                  "y")
    assert lost.chains_unavailable == 1 and lost.state_counts == {"LASTSRV": 1, "OFFLINE": 2}
    assert any(f.kind == "lastsrv" and "node 1000 disk 1" in f.detail for f in lost.findings)


def test_table_variant_header_and_error_lines() -> None:
    text = ("ChainId    ChainTable  ChainTableVersion  ChainVersion  Status        PreferredOrder  Target  Target\n"
            "900100001  1           2                  4             SERVING(1/2)  []              "
            "101000100101(SERVING-UPTODATE)  101000200101(OFFLINE-OFFLINE)\n"
            "Encounter error: 2007(RPC::SendFailed)\n")
    chains, errors = parse_list_chains(text, "x")
    assert chains[0].version == 4 and chains[0].status == "SERVING(1/2)" and len(errors) == 1
    result = doctor(text, "x", None, None)
    assert result.chains_single_point == 1 and any(f.kind == "admin_cli_error" for f in result.findings)


@pytest.mark.parametrize("text", ["", "hello world\n", "900100001  1  1  SERVING  []  1(BAD-STATE)\n",
                                  "900100001  1  x  SERVING  []  1(SERVING-UPTODATE)\n"])
def test_garbage_is_an_input_error_naming_the_line(text: str) -> None:
    with pytest.raises(InputError, match="x"):
        doctor(text, "x", None, None)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=60))
def test_any_text_is_parsed_or_refused_cleanly(text: str) -> None:
    with contextlib.suppress(InputError):
        doctor(text, "x", text, "y")
