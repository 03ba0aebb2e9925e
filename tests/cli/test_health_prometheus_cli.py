"""dsctl health check --format prometheus / --textfile-dir, parsed with prometheus_client's own text parser;
{node} record templates and --slurm option checks (the Slurm side runs in tests/e2e)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dsctl.health.fleet import FleetFinding, FleetReport, NodeVerdict
from dsctl.output.prometheus import render_fleet

DATA = Path(__file__).resolve().parents[1] / "data" / "health"
Cli = Callable[..., Any]


def rec(name: str) -> str:
    return str(DATA / f"{name}.yaml")


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(fams: dict[str, Any], name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(s.labels.items())): s.value for s in fams[name].samples}


def test_check_prometheus_parses_with_findings_and_raw_metrics(cli: Cli) -> None:
    before = time.time()
    r = cli("health", "check", "--from-record", rec("nvlink_link_down"), "-f", "prometheus")
    assert r.exit_code == 1, r.stderr
    fams = families(r.stdout)
    assert all(re.fullmatch(r"dsctl_health_[a-z0-9_]+", name) for name in fams)
    assert {f.type for f in fams.values()} == {"gauge", "counter"}
    assert all(f.type == "counter" for name, f in fams.items() if name.endswith("_errors"))  # *_total series
    node = ("node", "fake-nvlink-link-down")
    assert before - 1 <= samples(fams, "dsctl_health_last_run_timestamp_seconds")[(node,)] <= time.time() + 1
    assert samples(fams, "dsctl_health_finding") == {
        (("check", "G6"), node, ("severity", "crit"), ("subject", "gpu3")): 1.0}
    status = samples(fams, "dsctl_health_node_status")
    assert {dict(k)["status"]: v for k, v in status.items()} == {"healthy": 0, "warn": 0, "crit": 1,
                                                                 "unreachable": 0}
    active = samples(fams, "dsctl_health_nvlink_active_links")
    assert active[(("gpu", "3"), node)] == 17 and active[(("gpu", "0"), node)] == 18
    rates = samples(fams, "dsctl_health_rdma_port_rate_bytes_per_second")
    assert set(rates.values()) == {400e9 / 8}  # NDR 400 Gb/s on every port
    assert samples(fams, "dsctl_health_findings")[(node, ("severity", "ok"))] == 31  # checks passed


def test_error_counter_rates(cli: Cli) -> None:
    r = cli("health", "check", "--from-record", rec("ib_symbol_error_burst"), "-f", "prometheus")
    errs = samples(families(r.stdout), "dsctl_health_rdma_port_errors_per_second")
    burst = {dict(k)["device"]: v for k, v in errs.items() if dict(k)["counter"] == "symbol_error" and v}
    assert burst == {"mlx5_1": 50.0}  # +500 in 10 s
    fams = families(r.stdout)
    totals = {dict(k)["device"]: v for k, v in samples(fams, "dsctl_health_rdma_port_errors").items()
              if dict(k)["counter"] == "symbol_error" and v}
    assert totals == {"mlx5_1": 500.0} and fams["dsctl_health_rdma_port_errors"].type == "counter"
    r = cli("health", "check", "--from-record", rec("nvlink_replay_growth"), "-f", "prometheus")
    nvl = samples(families(r.stdout), "dsctl_health_nvlink_errors_per_second")
    assert {(dict(k)["gpu"], dict(k)["counter"]): v for k, v in nvl.items() if v} == {("5", "replay"): 0.3}


def test_textfile_dir_writes_the_prom_file_atomically(cli: Cli, tmp_path: Path) -> None:
    r = cli("health", "check", "--from-record", rec("hgx_h800_healthy"), "--textfile-dir", tmp_path, "-f", "json")
    assert r.exit_code == 0 and r.json()["summary"]["crit"] == 0  # stdout keeps the chosen format
    assert [p.name for p in tmp_path.iterdir()] == ["dsctl_health.prom"]
    fams = families((tmp_path / "dsctl_health.prom").read_text())
    assert "dsctl_health_finding" not in fams  # healthy: no finding series


def test_textfile_failure_keeps_the_previous_file(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = tmp_path / "dsctl_health.prom"
    old.write_text("# previous run\n")

    def refuse(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    r = cli("health", "check", "--from-record", rec("hgx_h800_healthy"), "--textfile-dir", tmp_path)
    assert r.exit_code == 2 and "--textfile-dir" in r.stderr and "No space left" in r.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["dsctl_health.prom"] and old.read_text() == "# previous run\n"


def test_textfile_dir_must_exist(cli: Cli, tmp_path: Path) -> None:
    r = cli("health", "check", "--from-record", rec("hgx_h800_healthy"), "--textfile-dir", tmp_path / "nope")
    assert r.exit_code == 2 and r.stderr.startswith("error: --textfile-dir") and "Traceback" not in r.stderr


def test_record_template_uses_the_slurm_node_name(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "n7.yaml").write_text((DATA / "row_remap_failure.yaml").read_text())
    monkeypatch.setenv("SLURMD_NODENAME", "n7")
    r = cli("health", "check", "--from-record", str(tmp_path / "{node}.yaml"), "-f", "json")
    assert r.exit_code == 1 and r.json()["findings"][0]["check"] == "G16"
    monkeypatch.setenv("SLURMD_NODENAME", "../etc")
    r = cli("health", "check", "--from-record", str(tmp_path / "{node}.yaml"))
    assert r.exit_code == 2 and "cannot fill {node}" in r.stderr
    monkeypatch.setenv("SLURMD_NODENAME", "n7")
    r = cli("health", "check", "--from-record", str(tmp_path / "{node}-{x}.yaml"))
    assert r.exit_code == 2 and "only {node}" in r.stderr


def test_slurm_mode_limits_the_interval(cli: Cli) -> None:
    r = cli("health", "check", "--slurm-healthcheck", "--interval-s", "45")
    assert r.exit_code == 2 and "at most 30 s" in r.stderr


def test_slurm_mode_leaves_a_healthy_node_alone(cli: Cli) -> None:
    r = cli("health", "check", "--slurm-healthcheck", "--from-record", rec("hgx_h800_healthy"), "-f", "json")
    assert r.exit_code == 0 and r.stderr == ""


def test_fleet_exposition_escapes_label_values() -> None:
    subject = 'gpu"3\\x\nnext'
    report = FleetReport({"nodes": 2, "healthy": 0, "warn": 0, "crit": 1, "unreachable": 1},
                         (NodeVerdict("n1", "crit", 1), NodeVerdict("n2", "unreachable", reason="x")),
                         (FleetFinding("n1", "G6", "CRIT", subject, "m"), FleetFinding("n2", "-", "UNREACHABLE",
                                                                                       "node", "x")),
                         (), wall_s=3.5)
    text = render_fleet(report, 1.0e9)
    fams = families(text)
    assert [s.labels["subject"] for s in fams["dsctl_health_finding"].samples] == [subject]
    assert samples(fams, "dsctl_health_fleet_nodes")[(("status", "unreachable"),)] == 1
    assert samples(fams, "dsctl_health_fleet_run_duration_seconds") == {(): 3.5}


@pytest.mark.parametrize(("args", "message"), [
    (["--interval-s", "5", "--from-record", "r/{node}.yaml"], "--interval-s does not apply to --from-record"),
    (["--interval-s", "200"], "--interval-s 200 must be positive and below --timeout-s 120"),
    (["--timeout-s", "0"], "--timeout-s and --launch-timeout-s must be seconds"),
    (["--only", "disk"], "--only: unknown area"),
])
def test_fleet_rejects_bad_options_before_touching_slurm(cli: Cli, args: list[str], message: str) -> None:
    r = cli("health", "fleet", "-w", "n[1-4]", *args)
    assert r.exit_code == 2 and message in r.stderr, r.stderr


@pytest.mark.parametrize("arg", ["-w", "--nodelist=n9", "--label", "reservation=x"])
def test_fleet_srun_arg_cannot_override_the_runner(cli: Cli, arg: str) -> None:
    r = cli("health", "fleet", "-w", "n1", f"--srun-arg={arg}")
    assert r.exit_code == 2 and "--srun-arg" in r.stderr, r.stderr
