"""dsctl topology simulate through the real entry point: JSON shape, SVG file, jobs, EPLB inputs, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest


@pytest.fixture
def plan_dir(cli, tmp_path: Path) -> Path:
    out = tmp_path / "fabric"
    assert cli("topology", "plan", "--nodes", "8", "--out-dir", str(out)).exit_code == 0
    return out


def test_simulate_json_and_svg(cli, plan_dir: Path, tmp_path: Path) -> None:
    svg = tmp_path / "plane.svg"
    res = cli("topology", "simulate", str(plan_dir), "--routing", "ecmp", "--size", "256 MiB", "--svg", str(svg),
              "--svg-plane", "3", "-f", "json")
    assert res.exit_code == 0, res.stderr
    data = res.json()
    assert data["dsctl"]["command"] == "topology simulate"
    assert data["num_gpus"] == 64 and data["routing"] == "ecmp" and len(data["planes"]) == 8
    assert data["gpu_bytes_per_s"]["min"] == pytest.approx(50e9) and "svg" not in data
    assert {"name", "kind", "plane", "utilisation", "bytes_per_s"} == set(data["hottest_links"][0])
    assert svg.read_text().startswith("<svg") and "p3-leaf01" in svg.read_text()


def test_simulate_table_ep_and_jobs(cli, plan_dir: Path, tmp_path: Path) -> None:
    res = cli("topology", "simulate", str(plan_dir), "--workload", "ep-dispatch", "--tokens-per-gpu", "1024")
    assert res.exit_code == 0, res.stderr
    assert "per-GPU GB/s" in res.stdout and "7,472 B/token" in res.stdout and "hottest links" in res.stdout
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  - {name: train, workload: alltoall, node_range: [1, 4]}\n"
                    "  - {name: infer, workload: allgather, node_range: [5, 8], group_size: 4, size: 64 MiB}\n")
    res = cli("topology", "simulate", str(plan_dir), "--jobs-file", str(jobs), "-f", "json")
    assert res.exit_code == 0, res.stderr
    assert [j["name"] for j in res.json()["jobs"]] == ["train", "infer"]


def test_simulate_with_eplb_placement(cli, plan_dir: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    stats = tmp_path / "stats.json"
    stats.write_text(json.dumps(np.round(rng.lognormal(0, 1, (2, 256)) * 100).astype(int).tolist()))
    placement = tmp_path / "placement.json"
    res = cli("eplb", "rebalance", str(stats), "--replicas", "320", "--gpus", "64", "--nodes", "8", "--model",
              "deepseek-v3", "--out", str(placement))
    assert res.exit_code == 0, res.stderr
    res = cli("topology", "simulate", str(plan_dir), "--workload", "ep-dispatch", "--eplb-plan", str(placement),
              "--stats", str(stats), "--layer", "1", "-f", "json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["completion_s"] > 0


@pytest.mark.parametrize(("args", "needle"), [
    (["--routing", "ospf"], "--routing"),
    (["--workload", "gossip"], "--workload"),
    (["--size", "lots"], "--size"),
    (["--fail", "p9-spine01"], "--fail"),
    (["--fail-random", "100000"], "--fail-random"),
    (["--eplb-plan", "x.json"], "--eplb-plan"),
    (["--svg", "/nonexistent-dir/x.svg"], "x.svg"),
    (["--nodes", "99"], "--nodes"),
    (["--seed", "-1"], "--seed"),
    (["--svg", "x.svg", "--svg-plane", "9"], "--svg-plane"),
    (["--workload", "allgather", "--group-size", "7"], "--group-size"),
    (["--workload", "ep-dispatch", "--model", "llama3.1-405b"], "--model"),
])
def test_simulate_bad_input_exits_2(cli, plan_dir: Path, args: list[str], needle: str) -> None:
    res = cli("topology", "simulate", str(plan_dir), *args)
    assert res.exit_code == 2, res.stdout
    assert needle in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize(("args", "line"), [
    (["--routing", "ospf"], "--routing 'ospf' is not valid; use static, ecmp or adaptive"),
    (["--fail", "p9-spine01"], "--fail 'p9-spine01' is not a device or DEVICE:PORT of the plan"),
    (["--nodes", "99"], "--nodes: the plan has "),
    (["--workload", "allgather", "--group-size", "7"], "--group-size 7 x --group-stride 8 must divide the "),
    (["--workload", "ep-dispatch", "--ep", "12"], "--ep 12 must be a multiple of the 8 GPUs per node"),
])
def test_simulator_errors_read_as_the_options_typed(cli, plan_dir: Path, args: list[str], line: str) -> None:
    """The simulator names request fields; 'topology simulate' spells them as its options (issue 31)."""
    res = cli("topology", "simulate", str(plan_dir), *args)
    assert res.exit_code == 2 and res.stderr.startswith(f"error: {line}"), res.stderr


def test_simulate_missing_plan_and_bad_jobs(cli, tmp_path: Path, plan_dir: Path) -> None:
    res = cli("topology", "simulate", str(tmp_path))
    assert res.exit_code == 2 and "plan.json" in res.stderr
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs: [{nodes: [node9999]}]\n")
    res = cli("topology", "simulate", str(plan_dir), "--jobs-file", str(jobs))
    assert res.exit_code == 2 and "node9999" in res.stderr


def test_jobs_may_mix_ep_and_collectives(cli, plan_dir: Path, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps([{"name": "serve", "workload": "ep-dispatch", "node_range": [1, 4],
                                 "tokens_per_gpu": 128},
                                {"name": "train", "workload": "reducescatter", "node_range": [5, 8]}]))
    res = cli("topology", "simulate", str(plan_dir), "--jobs-file", str(jobs))
    assert res.exit_code == 2, res.stderr
    assert "job 'train': group_size 8 x group_stride 8 must divide the 32 GPUs" in res.stderr  # the job's keys
    jobs.write_text(jobs.read_text().replace('"node_range": [5, 8]}', '"node_range": [5, 8], "group_size": 4}'))
    res = cli("topology", "simulate", str(plan_dir), "--jobs-file", str(jobs), "-f", "json")
    assert res.exit_code == 0, res.stderr
    assert [j["workload"] for j in res.json()["jobs"]] == ["ep-dispatch", "reducescatter"]


def test_ep_reports_deepep_logical_beside_physical_at_the_calibrated_rates(cli, plan_dir: Path) -> None:
    """EP32 (4 nodes) on the H800 plan: RDMA payload at 88% of 50 GB/s is the physical figure; DeepEP's logical
    one counts the sender's own node too (x 4/3) at 7,392 B per (token, node) pair: 58.0 GB/s, Fig. 7's 58.02."""
    res = cli("topology", "simulate", str(plan_dir), "--workload", "ep-dispatch", "--nodes", "4", "-f", "json")
    assert res.exit_code == 0, res.stderr
    data = res.json()
    assert data["nic_efficiency"] == 0.88 and data["nvlink_bytes_per_s"] == 160e9
    job = data["jobs"][0]
    assert job["gpu_bytes_per_s"]["median"] == pytest.approx(44e9)
    assert job["logical_bytes_per_s"]["median"] == pytest.approx(44e9 * 4 / 3 * 7392 / 7472)
    assert job["logical_bytes_per_s"]["median"] / 1e9 == pytest.approx(58.02, rel=0.01)
    assert "DeepEP logical bytes = (token, node) pairs, the sender's node included, x 7,392 B" in job["note"]
    res = cli("topology", "simulate", str(plan_dir), "--workload", "ep-combine", "--nodes", "2")
    assert res.exit_code == 0, res.stderr
    assert "DeepEP logical GB/s" in res.stdout and "EP payload at 88%: 44.0" in res.stdout
    assert "160 GB/s per direction" in res.stdout
    res = cli("topology", "simulate", str(plan_dir), "--size", "64 MiB", "-f", "json")  # no EP: line rate
    assert res.json()["nic_efficiency"] == 1.0 and res.json()["jobs"][0]["logical_bytes_per_s"]["max"] == 0.0


def test_a_node_profile_with_a_bad_efficiency_exits_2(cli, plan_dir: Path, tmp_path: Path) -> None:
    from dsctl.profiles.loader import builtin_profiles_dir

    nodes = tmp_path / "profiles" / "nodes"
    nodes.mkdir(parents=True)
    source = (builtin_profiles_dir() / "nodes" / "h800-hgx.yaml").read_text()
    bad = source.replace("efficiency: 0.88", "efficiency: 1.2").replace("name: h800-hgx", "name: bad-node")
    (nodes / "bad-node.yaml").write_text(bad)  # its own name: the built-in h800-hgx stays as every test knows it
    res = cli("--profiles-dir", str(tmp_path / "profiles"), "topology", "simulate", str(plan_dir), "--workload",
              "ep-dispatch", "--node-profile", "bad-node")
    assert res.exit_code == 2
    assert "compute_nics.efficiency: expected a fraction of the line rate, 0 < efficiency <= 1, got 1.2" in res.stderr
