"""Fleet aggregation: node status, findings table, drain reasons, exit code, table view."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsctl.health.fleet import (
    MAX_REASON_CHARS,
    NodeInput,
    aggregate,
    drain_reason,
    one_line,
    with_drain_results,
)


def finding(check: str, severity: str, subject: str = "gpu0", message: str = "m") -> dict[str, Any]:
    return {"check": check, "severity": severity, "subject": subject, "message": message}


def report(*findings: dict[str, Any]) -> dict[str, Any]:
    return {"findings": [*findings, finding("G1", "OK", "node", "ok")], "metrics": []}


def test_statuses_summary_and_exit_code() -> None:
    items = [
        NodeInput("n1", report()),
        NodeInput("n2", report(finding("G6", "CRIT", "gpu3", "1 NVLink(s) down (inactive: 7)"),
                               finding("G16", "WARN", "gpu2"))),
        NodeInput("n3", report(finding("G12", "WARN"), finding("G2", "INFO"), finding("G9", "SKIP"))),
        NodeInput("n4", None, "no answer within 30 s (killed on the node)"),
    ]
    got = aggregate(items, timeout_s=30, wall_s=12.5)
    assert got.summary == {"nodes": 4, "healthy": 1, "warn": 1, "crit": 1, "unreachable": 1}
    assert [(v.node, v.status, v.num_crit, v.num_warn) for v in got.nodes] == [
        ("n1", "healthy", 0, 0), ("n2", "crit", 1, 1), ("n3", "warn", 0, 1), ("n4", "unreachable", 0, 0)]
    assert [(f.node, f.check, f.severity) for f in got.findings] == [
        ("n2", "G6", "CRIT"), ("n2", "G16", "WARN"), ("n3", "G12", "WARN"), ("n4", "-", "UNREACHABLE")]
    assert [(d.node, d.reason) for d in got.drain] == [("n2", "dsctl:G6 crit gpu3 1 NVLink(s) down (inactive: 7)")]
    assert got.exit_code == 1
    assert aggregate(items[:1] + items[2:3]).exit_code == 0  # WARN alone passes


def test_a_document_that_is_not_a_health_report_is_unreachable() -> None:
    got = aggregate([NodeInput("n1", {"hello": 1}), NodeInput("n2", {"findings": [{"check": "G1"}]})])
    assert [v.reason for v in got.nodes] == ["answer is not a dsctl health report (no findings list)",
                                             "answer is not a dsctl health report (a finding without severity)"]


def test_drain_reason_is_one_bounded_line() -> None:
    many = [finding("G9", "CRIT", f"gpu{i}", "fabric not started: CUDA fails with 802") for i in range(8)]
    assert drain_reason(many) == "dsctl:G9 crit gpu0 fabric not started: CUDA fails with 802 (+7 more)"
    long = drain_reason([finding("R2", "CRIT", "mlx5_0/1", 'x"\n' * 200)])
    assert len(long) <= MAX_REASON_CHARS and long.endswith("...") and "\n" not in long and '"' not in long
    assert drain_reason([finding("G1", "WARN")]) == ""


@given(st.text())
def test_one_line_has_no_control_characters_or_quotes(text: str) -> None:
    line = one_line(text)
    assert line == line.strip() and "  " not in line
    assert all(c.isprintable() and c not in "\"'`\\" for c in line)


def test_drain_results_mark_each_node() -> None:
    base = aggregate([NodeInput("n1", report(finding("G3", "CRIT"))), NodeInput("n2", report(finding("G3", "CRIT")))])
    done = with_drain_results(base, {"n1": None, "n2": "Invalid node name specified"})
    assert done.drained and [(d.node, d.done, d.error) for d in done.drain] == [
        ("n1", True, ""), ("n2", False, "Invalid node name specified")]
    assert done.drain[0].argv == ("scontrol", "update", "NodeName=n1", "State=DRAIN", "Reason=dsctl:G3 crit gpu0 m")


def test_findings_keep_node_order_within_a_severity() -> None:
    items = [NodeInput(f"n{i}", report(finding("G6", "CRIT"))) for i in (3, 1, 2)]
    assert [f.node for f in aggregate(items).findings] == ["n3", "n1", "n2"]


def test_table_view_lists_problems_and_drain_commands(capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from dsctl.output import OutputFormat, emit
    from dsctl.output import health_fleet as _view  # noqa: F401  (registers the table view)

    monkeypatch.setenv("COLUMNS", "150")
    items = [NodeInput("n1", report()), NodeInput("n2", report(finding("G6", "CRIT", "gpu3", "link 7 down"))),
             NodeInput("n3", None, "no answer within 30 s (killed on the node)")]
    assert emit(aggregate(items, timeout_s=30, wall_s=4.2), OutputFormat.table, "health fleet") == 1
    out = capsys.readouterr().out
    assert "fleet of 3 nodes: 1 healthy, 0 warn, 1 crit, 1 unreachable (per-node timeout 30 s, run 4.2 s)" in out
    assert "scontrol update NodeName=n2 State=DRAIN 'Reason=dsctl:G6 crit gpu3 link 7 down'" in out
    assert "no answer within 30 s" in out and "FAIL: 1 crit, 1 unreachable" in out
