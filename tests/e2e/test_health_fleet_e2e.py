"""dsctl health fleet on the real single-host Slurm cluster (tests/ci/slurm_up.sh, 256 emulated nodes in CI).

Every emulated node replays its own record (``--from-record records/{node}.yaml``): 8 nodes carry different
faults from tests/data/health, one node's dsctl hangs, the rest are healthy. One run with ``--drain`` must name
exactly those 9 nodes (right check codes, or unreachable), drain exactly the critical ones (checked with sinfo) and
write a Prometheus textfile that prometheus_client parses.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

Cli = Callable[..., Any]
pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "health"
HEALTHY = "hgx_h800_healthy"
HANG = "hang"
#: (record, expected CRIT/WARN finding) in the order nodes are given them; "hang" = dsctl never answers
SPECIALS: list[tuple[str, tuple[str, str, str] | None]] = [
    ("nvlink_link_down", ("G6", "CRIT", "gpu3")),
    (HANG, None),
    ("row_remap_pending", ("G16", "WARN", "gpu2")),
    ("xid79_gpu_lost", ("G3", "CRIT", "gpu4")),
    ("ib_port_down", ("R2", "CRIT", "mlx5_3/1")),
    ("nic_wrong_numa", ("R9", "WARN", "gpu2")),
    ("row_remap_failure", ("G16", "CRIT", "gpu6")),
    ("pcie_gen4_host_limited", ("G12", "WARN", "gpu0")),
    ("volatile_dbe", ("G15", "CRIT", "gpu6")),
]
#: where the specials sit on a 256-node cluster (spread over the hostlist); smaller clusters use n2, n3, ...
POSITIONS_256 = [7, 77, 31, 64, 100, 128, 170, 201, 256]
#: one host emulates every node: at most this many dsctl processes run at once (memory: ~60 MB each)
SLOTS = 24


def layout(num_nodes: int) -> dict[str, tuple[str, tuple[str, str, str] | None]]:
    """node -> (record, expected finding) for the special nodes of a ``num_nodes`` cluster."""
    positions = POSITIONS_256 if num_nodes >= 256 else list(range(2, num_nodes + 1))
    return {f"n{p}": special for p, special in zip(positions, SPECIALS, strict=False)}


def node_timeout_s(num_nodes: int) -> float:
    """Per-node limit: every emulated node shares this host's cores, so the last one starts late."""
    return float(os.environ.get("DSCTL_E2E_FLEET_TIMEOUT", str(30 + int(0.7 * num_nodes))))


def fake_dsctl(folder: Path, hang_node: str) -> Path:
    """dsctl as the nodes run it: this checkout's, except that ``hang_node``'s never answers."""
    slots = folder / "slots"
    slots.mkdir(parents=True, exist_ok=True)
    script = folder / "dsctl-on-node"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$SLURMD_NODENAME" = "{hang_node}" ]; then exec sleep 100000; fi\n'
        f"export PYTHONPATH={ROOT}\n"
        "[ -d /dev/shm ] && export TMPDIR=/dev/shm\n"  # a replay renders a sysfs tree: keep it off the disk
        f'slot={slots}/$(( ${{SLURMD_NODENAME#n}} % {SLOTS} ))\n'
        f'exec flock "$slot" {sys.executable} -m dsctl "$@"\n')
    script.chmod(0o755)
    return script


@pytest.fixture(scope="module")
def fleet_setup(slurm_cluster: int, tmp_path_factory: pytest.TempPathFactory,
                resume: Callable[[list[str]], None]) -> Iterator[dict[str, Any]]:
    num = slurm_cluster
    specials = layout(num)
    folder = tmp_path_factory.mktemp("fleet")
    records = folder / "records"
    records.mkdir()
    for i in range(1, num + 1):
        record, _ = specials.get(f"n{i}", (HEALTHY, None))
        if record != HANG:
            shutil.copyfile(DATA / f"{record}.yaml", records / f"n{i}.yaml")
    hang = next(n for n, (r, _) in specials.items() if r == HANG)
    yield {"num": num, "specials": specials, "records": records, "dsctl": fake_dsctl(folder, hang),
           "folder": folder}
    # the launch tests of this session need every node
    resume([n for n, (_, exp) in specials.items() if exp and exp[1] == "CRIT"])


def sinfo_drained() -> dict[str, str]:
    out = subprocess.run(["sinfo", "-h", "-N", "-t", "drain,drained,draining", "-o", "%N|%E"], check=True,
                         capture_output=True, text=True).stdout
    return dict(line.split("|", 1) for line in out.splitlines() if line)


def test_fleet_names_exactly_the_faulty_nodes_and_drains_the_critical_ones(cli: Cli, fleet_setup: dict[str, Any]
                                                                          ) -> None:
    num, specials = fleet_setup["num"], fleet_setup["specials"]
    textfiles = fleet_setup["folder"] / "textfiles"
    textfiles.mkdir()
    res = cli("health", "fleet", "-w", f"n[1-{num}]", "--from-record", fleet_setup["records"] / "{node}.yaml",
              "--dsctl", fleet_setup["dsctl"], "--timeout-s", f"{node_timeout_s(num):g}", "--drain",
              "--textfile-dir", textfiles, "-f", "json")
    assert res.exit_code == 1, res.stdout[-3000:] + res.stderr
    data = res.json()
    num_crit = sum(1 for _, exp in specials.values() if exp and exp[1] == "CRIT")
    num_warn = sum(1 for _, exp in specials.values() if exp and exp[1] == "WARN")
    assert data["summary"] == {"nodes": num, "healthy": num - len(specials), "warn": num_warn, "crit": num_crit,
                               "unreachable": 1}, data["findings"]
    expected = {(node, *exp) if exp else (node, "-", "UNREACHABLE", "node") for node, (_, exp) in specials.items()}
    got = {(f["node"], f["check"], f["severity"], f["subject"]) for f in data["findings"]}
    assert got == expected
    hang = next(n for n, (r, _) in specials.items() if r == HANG)
    unreachable = [v for v in data["nodes"] if v["status"] == "unreachable"]
    assert [v["node"] for v in unreachable] == [hang]
    assert unreachable[0]["reason"].startswith("no answer within"), unreachable
    crit_nodes = {n for n, (_, exp) in specials.items() if exp and exp[1] == "CRIT"}
    assert {d["node"] for d in data["drain"]} == crit_nodes and all(d["done"] for d in data["drain"])
    drained = sinfo_drained()
    assert set(drained) == crit_nodes, drained
    for node in crit_nodes:
        check, _, subject = specials[node][1]  # type: ignore[misc]
        assert drained[node].startswith(f"dsctl:{check} crit {subject} "), drained[node]
    print(f"\nfleet over {num} emulated nodes: {data['wall_s']:.1f} s (per-node timeout {data['timeout_s']:g} s)")

    families = {f.name: f for f in text_string_to_metric_families((textfiles / "dsctl_health.prom").read_text())}
    nodes_by_status = {s.labels["status"]: s.value for s in families["dsctl_health_fleet_nodes"].samples}
    assert nodes_by_status == {"healthy": num - len(specials), "warn": num_warn, "crit": num_crit,
                               "unreachable": 1}
    series = {(s.labels["node"], s.labels["check"], s.labels["severity"], s.labels["subject"])
              for s in families["dsctl_health_finding"].samples}
    assert series == {(n, c, sev.lower(), subj) for n, c, sev, subj in expected if c != "-"}
    assert list((textfiles).iterdir()) == [textfiles / "dsctl_health.prom"]  # no temporary file left


def test_fleet_reports_nodes_slurm_cannot_use(cli: Cli, fleet_setup: dict[str, Any]) -> None:
    res = cli("health", "fleet", "-w", "n1,nosuchnode", "--from-record",
              fleet_setup["records"] / "{node}.yaml", "--dsctl", fleet_setup["dsctl"], "--timeout-s", "60",
              "--srun-arg=--comment=dsctl-e2e", "-f", "json")
    data = res.json()
    assert res.exit_code == 1
    assert [(v["node"], v["status"], v["reason"]) for v in data["nodes"]] == [
        ("n1", "healthy", ""), ("nosuchnode", "unreachable", "not a Slurm node")]


def test_fleet_unknown_partition_is_bad_input(cli: Cli, fleet_setup: dict[str, Any]) -> None:
    res = cli("health", "fleet", "-w", "n1", "--partition", "nosuch", "--dsctl", fleet_setup["dsctl"])
    assert res.exit_code == 2 and "--partition nosuch: no such partition" in res.stderr, res.stderr
    assert "partitions: debug" in res.stderr


def test_names_from_a_file_reach_the_real_srun(slurm_cluster: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Names that do not compress into one argument go to srun as --nodelist=FILE: the real srun reads the file
    (a value with "/") and runs one task on each listed node. The argument limit is lowered to force the file."""
    import dsctl.runners.fleet as fleet

    real = fleet.hostlist_chunks
    monkeypatch.setattr(fleet, "hostlist_chunks", lambda nodes, max_chars=0: real(nodes, max_chars=4))
    nodes = ["n3", "n1", "n2"]
    run = fleet.run_on_nodes(nodes, ["sh", "-c", 'echo "{\\"on\\": \\"$SLURMD_NODENAME\\"}"'],
                             check_states=False, timeout_s=60, launch_timeout_s=120)
    assert [a.node for a in run.answers] == nodes
    assert [a.document for a in run.answers] == [{"on": n} for n in nodes], [a.reason for a in run.answers]
    assert any(arg.startswith("--nodelist=/") for arg in run.srun_argv)
