"""The topology.conf that `dsctl topology plan` writes, loaded by a real slurmctld (topology/tree).

Runs on the session's CI cluster (emulated nodes n1..nN): the plan names its nodes n{n}, topology.conf goes
next to slurm.conf, slurmctld restarts with TopologyPlugin=topology/tree, and `scontrol show topology` must list
the plan's switches with the plan's nodes and children. slurm.conf, topology.conf and the controller are put back
afterwards so the other end-to-end tests see the cluster they expect.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

# starts the session's 256-node Slurm (slurm_cluster): the slow step of .ci/run only
pytestmark = [pytest.mark.slow]

SLURM_DIR = os.environ.get("SLURM_CI_DIR", "/tmp/dsctl-slurm")  # as tests/e2e/conftest.py
_FIELD = re.compile(r"(\w+)=(\S+)")


def _hostnames(hostlist: str) -> list[str]:
    out = subprocess.run(["scontrol", "show", "hostnames", hostlist], capture_output=True, text=True, check=True)
    return out.stdout.split()


def _restart_controller(conf: Path, nodes: int) -> None:
    pid_file = Path(SLURM_DIR) / "slurmctld.pid"
    if pid_file.exists():
        pid = int(pid_file.read_text().strip())
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
    subprocess.run(["slurmctld", "-c", "-i", "-f", str(conf)], check=True, capture_output=True, timeout=60)
    for _ in range(240):
        out = subprocess.run(["sinfo", "-h", "-o", "%T %D"], capture_output=True, text=True, check=False)
        idle = sum(int(n) for state, n in (line.split() for line in out.stdout.splitlines() if line.strip())
                   if state == "idle")
        if idle >= nodes:
            return
        time.sleep(0.5)
    raise AssertionError(f"only {idle}/{nodes} nodes idle after restarting slurmctld")


def _planned(topology_conf: str) -> dict[str, tuple[str, list[str]]]:
    """SwitchName -> ("Nodes"|"Switches", expanded names) from our topology.conf."""
    planned = {}
    for line in topology_conf.splitlines():
        if line.startswith("SwitchName="):
            fields = dict(part.split("=", 1) for part in line.split())
            key = "Nodes" if "Nodes" in fields else "Switches"
            planned[fields["SwitchName"]] = (key, _hostnames(fields[key]))
    return planned


def test_slurm_loads_the_plans_topology(slurm_cluster: int, cli, tmp_path: Path) -> None:
    nodes = slurm_cluster
    radix = "8" if nodes <= 32 else "64"  # several leaves (and spines) per plane either way
    out = tmp_path / "fabric"
    res = cli("topology", "plan", "--nodes", str(nodes), "--node-name", "n{n}", "--radix", radix,
                  "--out-dir", str(out))
    assert res.exit_code == 0, res.stderr
    conf = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf"))
    topo = conf.parent / "topology.conf"
    original = conf.read_text()
    had_topo = topo.read_text() if topo.exists() else None
    try:
        topo.write_text((out / "topology.conf").read_text())
        conf.write_text(original.rstrip("\n") + "\nTopologyPlugin=topology/tree\n")
        _restart_controller(conf, nodes)
        shown = subprocess.run(["scontrol", "show", "topology"], capture_output=True, text=True, check=True,
                               env={**os.environ, "SLURM_TOPO_LEN": "65536"}).stdout
        # 22.05 prints "SwitchName=s Level=n LinkSpeed=1 Nodes=... [Switches=...]": an upper switch lists its
        # children and every node below them
        seen = {}
        for line in shown.splitlines():
            fields = dict(_FIELD.findall(line))
            if "SwitchName" in fields:
                seen[fields["SwitchName"]] = (int(fields["Level"]), _hostnames(fields.get("Nodes", "")),
                                              _hostnames(fields["Switches"]) if "Switches" in fields else [])
        planned = _planned(topo.read_text())
        assert set(seen) == set(planned), shown

        def below(name: str) -> list[str]:
            key, members = planned[name]
            return members if key == "Nodes" else [n for m in members for n in below(m)]

        for name, (key, members) in planned.items():
            level, seen_nodes, seen_switches = seen[name]
            assert sorted(seen_nodes) == sorted(below(name)), name
            if key == "Switches":
                assert sorted(seen_switches) == sorted(members), name
            assert level == (0 if key == "Nodes" else 1 + max(seen[m][0] for m in members)), name
        listed = sorted(n for key, members in planned.values() if key == "Nodes" for n in members)
        assert listed == sorted(f"n{i}" for i in range(1, nodes + 1))
        assert any(level > 0 for level, _, _ in seen.values()) or nodes <= 4
    finally:
        conf.write_text(original)
        if had_topo is None:
            topo.unlink(missing_ok=True)
        else:
            topo.write_text(had_topo)
        _restart_controller(conf, nodes)
