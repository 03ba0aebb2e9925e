"""dsctl health burn-in on simulated fabrics: formats, --out files (JSON, Prometheus parsed by prometheus_client,
one SVG per plane), -w subsets, bad input, and --drain's order and safety with a fake scontrol."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dsctl.output import files

Cli = Callable[..., Any]


@pytest.fixture(scope="module")
def plan16(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.conftest import run_cli

    out = tmp_path_factory.mktemp("plan") / "p16"
    assert run_cli("topology", "plan", "-N", "16", "--out-dir", str(out)).exit_code == 0
    return out


def model(tmp_path: Path, *faults: dict[str, Any], noise: float = 0.03) -> Path:
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"seed": 1, "noise": noise, "faults": list(faults)}))
    return path


def test_rehearsal_names_the_nic_and_writes_every_file(cli: Cli, plan16: Path, tmp_path: Path) -> None:
    fab = model(tmp_path, {"nic": "node0007:mlx5_2", "rate": 0.5})
    out = tmp_path / "out"
    r = cli("health", "burn-in", str(plan16), "--fabric-model", str(fab), "--out-dir", str(out), "-f", "json")
    assert r.exit_code == 1, r.stderr
    data = r.json()
    assert [(f["kind"], f["subject"], f["node"]) for f in data["findings"]] == [("nic", "node0007:mlx5_2",
                                                                                 "node0007")]
    assert data["design"]["coverage"] == 1.0 and data["design"]["lower_bound_rounds"] == 1
    assert [x["name"] for x in data["rounds"]] == ["intra-a", "intra-b", "nvlink"]
    assert data["drain"]["nodes"][0]["reason"].startswith("dsctl:burnin nic node0007:mlx5_2 at 50%")
    assert data["drain"]["nodes"][0]["done"] is None  # no --drain: only planned
    names = sorted(p.name for p in out.iterdir())
    written = ["burnin.json", "dsctl_burnin.prom", *[f"plane{p}.svg" for p in range(8)]]
    assert names == sorted([files.MANIFEST_NAME, *written])  # the manifest marks the folder as dsctl's
    manifest = json.loads((out / files.MANIFEST_NAME).read_text())
    assert manifest["written_by"] == "dsctl" and sorted(manifest["files"]) == written
    assert json.loads((out / "burnin.json").read_text())["findings"] == data["findings"]
    fams = {f.name: f for f in text_string_to_metric_families((out / "dsctl_burnin.prom").read_text())}
    series = fams["dsctl_health_burnin_nic_send_bytes_per_second"].samples
    sends = {(s.labels["node"], s.labels["nic"]): s.value for s in series}
    assert len(sends) == 128
    assert 0.45 * 50e9 < sends[("node0007", "mlx5_2")] < 0.55 * 50e9
    assert 0.95 * 50e9 < sends[("node0008", "mlx5_2")] < 1.05 * 50e9
    (finding,) = fams["dsctl_health_burnin_finding_ratio"].samples
    assert finding.labels == {"kind": "nic", "subject": "node0007:mlx5_2", "node": "node0007"}
    svg = (out / "plane2.svg").read_text()
    assert svg.startswith("<svg") and "measured / expected" in svg


def test_healthy_fabric_passes_in_the_table(cli: Cli, plan16: Path, tmp_path: Path) -> None:
    r = cli("health", "burn-in", str(plan16), "--fabric-model", str(model(tmp_path)))
    assert r.exit_code == 0, r.stderr
    assert "PASS: no slow flow" in r.stdout and "coverage 100.0%" in r.stdout and "lower bound 1" in r.stdout


def test_nodelist_tests_a_subset(cli: Cli, plan16: Path, tmp_path: Path) -> None:
    r = cli("health", "burn-in", str(plan16), "--fabric-model", str(model(tmp_path)), "-w", "node[0001-0004]",
            "-f", "json", "--no-nvlink")
    assert r.exit_code == 0, r.stderr
    data = r.json()
    assert data["nodes_tested"] == 4
    assert {x["num_flows"] for x in data["rounds"]} == {32}  # 4 nodes x 8 NICs, one flow each way


@pytest.mark.parametrize(("args", "message"), [
    (["--max-drain", "lots"], "--max-drain 'lots'"),
    (["--fraction", "1.5"], "--fraction 1.5"),
    (["-w", "node[0001-0002],nodeX"], "'nodeX' is not a node of the plan"),
    (["--transport", "mpi"], "--transport 'mpi'"),
    (["--mad-k", "0"], "--mad-k 0 must be a positive number"),
    (["-w", "node0001"], "--nodelist: a burn-in needs at least 2 nodes"),
])
def test_bad_options_are_one_line_errors(cli: Cli, plan16: Path, tmp_path: Path, args: list[str],
                                         message: str) -> None:
    r = cli("health", "burn-in", str(plan16), "--fabric-model", str(model(tmp_path)), *args)
    assert r.exit_code == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_bad_fabric_model_names_the_field(cli: Cli, plan16: Path, tmp_path: Path) -> None:
    bad = tmp_path / "m.yaml"
    bad.write_text("faults:\n  - cable: p0-leaf01:99\n    rate: 0.5\n")
    r = cli("health", "burn-in", str(plan16), "--fabric-model", str(bad))
    assert r.exit_code == 2 and "faults[0].cable 'p0-leaf01:99': no cable at port '99'" in r.stderr


class FakeSlurm:
    """scontrol stand-ins: node states to report, drains recorded with whether the report existed then."""

    def __init__(self, out: Path, reasons: dict[str, str]) -> None:
        self.out, self.reasons, self.drained = out, reasons, []

    def state(self, node: str) -> tuple[bool, str]:
        return bool(self.reasons.get(node)), self.reasons.get(node, "")

    def drain(self, node: str, reason: str) -> str | None:
        self.drained.append((node, reason, (self.out / "burnin.json").exists()))
        return None


def test_drain_after_the_report_and_never_over_a_foreign_reason(cli: Cli, plan16: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import dsctl.runners.drain as drain

    out = tmp_path / "out"
    fake = FakeSlurm(out, {"node0003": "bad DIMM, ticket 4411"})
    monkeypatch.setattr(drain, "node_drain_state", fake.state)
    monkeypatch.setattr(drain, "drain_node", fake.drain)
    fab = model(tmp_path, {"nic": "node0003:mlx5_1", "rate": 0.5}, {"node": "node0011", "rate": 0.5})
    r = cli("health", "burn-in", str(plan16), "--fabric-model", str(fab), "--out-dir", str(out), "--drain",
            "--max-drain", "25%", "-f", "json")
    assert r.exit_code == 1, r.stderr
    assert [(n, ok) for n, _, ok in fake.drained] == [("node0011", True)]
    assert fake.drained[0][1].startswith("dsctl:burnin node node0011 at 50%")
    steps = {s["node"]: s for s in r.json()["drain"]["nodes"]}
    assert steps["node0003"]["action"] == "foreign" and steps["node0003"]["current_reason"] == "bad DIMM, ticket 4411"
    assert steps["node0011"]["done"] is True


def test_circuit_breaker_drains_nothing(cli: Cli, plan16: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import dsctl.runners.drain as drain

    fake = FakeSlurm(tmp_path, {})
    monkeypatch.setattr(drain, "node_drain_state", fake.state)
    monkeypatch.setattr(drain, "drain_node", fake.drain)
    fab = model(tmp_path, *({"nic": f"node000{i}:mlx5_0", "rate": 0.5} for i in (1, 4, 7)))
    r = cli("health", "burn-in", str(plan16), "--fabric-model", str(fab), "--drain", "--max-drain", "2")
    assert r.exit_code == 1
    assert fake.drained == []
    assert "circuit breaker: 3 nodes to drain exceeds --max-drain 2 (2 nodes); nothing drained" in r.stdout


def test_from_perf_judges_the_reports_and_drains_only_what_they_prove(cli: Cli, plan16: Path, tmp_path: Path) -> None:
    from tests.unit.test_health_burnin_reports import GOOD, PERFTEST, SLOW, report

    files = {"ab.log": report(["node0001", "node0002"], SLOW), "ac.log": report(["node0001", "node0003"], SLOW),
             "bc.log": report(["node0002", "node0003"], GOOD), "ib.log": PERFTEST}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    args = [arg for name in files for arg in ("--from-perf", str(tmp_path / name))]
    r = cli("health", "burn-in", str(plan16), *args, "-f", "json")
    assert r.exit_code == 1, r.stderr
    data = r.json()
    assert [(f["kind"], f["node"]) for f in data["findings"]] == [("node", "node0001"), ("unplaced", "")]
    assert [n["node"] for n in data["drain"]["nodes"]] == ["node0001"] and data["nodes_tested"] == 3
    assert [x["name"] for x in data["rounds"]] == [str(tmp_path / name) for name in files]
    table = cli("health", "burn-in", str(plan16), *args)
    assert "covered by 4 judged report(s)" in table.stdout and "a perftest report names no host" in table.stdout
    refused = cli("health", "burn-in", str(plan16), "--from-perf", str(tmp_path / "ab.log"), "--fabric-model",
                  str(model(tmp_path)))
    assert refused.exit_code == 2 and "--from-perf and --fabric-model are two ways to measure" in refused.stderr
    subset = cli("health", "burn-in", str(plan16), "--from-perf", str(tmp_path / "ab.log"), "-w", "node[0001-0002]")
    assert subset.exit_code == 2 and "--nodelist does not apply" in subset.stderr
