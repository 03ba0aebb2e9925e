"""The one reader of node reports (health fleet, trace overlap --slurm) checks the envelope before the data."""

from __future__ import annotations

import json

from dsctl.output.data import SCHEMA_VERSION
from dsctl.output.emit import envelope, error_envelope
from dsctl.output.envelope import Header, read_node_report


def _doc(command: str = "health check", version: object = SCHEMA_VERSION, **data: object) -> dict:
    return {"dsctl": {"schema_version": version, "command": command, "dsctl_version": "0.1.0", "exit_code": 1},
            **data}


def test_a_report_of_this_schema_is_read_without_its_header() -> None:
    r = read_node_report("n1", _doc(findings=[]), "health check")
    assert r.header == Header(SCHEMA_VERSION, "health check", "0.1.0", 1)
    assert r.data == {"findings": []} and r.reason == ""


def test_what_dsctl_itself_prints_round_trips() -> None:
    class Result:
        def to_data(self) -> dict:
            return {"ranks": [1, 2]}

    printed = json.loads(json.dumps(envelope(Result(), "trace overlap", 0)))
    assert read_node_report("n1", printed, "trace overlap").data == {"ranks": [1, 2]}



def test_the_header_carries_the_results_own_exit_code() -> None:
    """The --out file of 'eplb rebalance' once wrote exit_code 0 by hand; the envelope now asks the result."""
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Failed:
        exit_code: int = 1

    @dataclass(frozen=True)
    class Plain:
        value: int = 3

    assert envelope(Failed(), "storage doctor")["dsctl"]["exit_code"] == 1
    assert envelope(Plain(), "eplb rebalance")["dsctl"]["exit_code"] == 0
    assert envelope(Failed(), "storage doctor", 0)["dsctl"]["exit_code"] == 0  # given: the caller's

def test_other_schemas_commands_errors_and_silence_are_reasons() -> None:
    cases = [
        (_doc(version=1, findings=[]), "schema_version 1 and this dsctl reads 2"),  # before issue 22's renames
        ({"findings": []}, "no dsctl header"),
        (_doc(command="trace overlap", ranks=[]), "a dsctl trace overlap report, not health check"),
        (error_envelope("health check", "--node-profile x: no such profile", None, 2), "failed on the node: --node"),
        (None, "exit 2: boom"),
    ]
    for doc, needle in cases:
        r = read_node_report("n1", doc, "health check", "exit 2: boom" if doc is None else "")
        assert r.data is None and needle in r.reason, (doc, r.reason)
