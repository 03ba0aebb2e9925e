"""dsctl health burn-in for real: the project's Slurm (tests/ci/slurm_up.sh, >= 8 emulated nodes), the real probe
(``python -m dsctl.probe``) over gloo, one node slowed by the kernel.

Every emulated node's probe runs in its own network namespace (``dsbn-<node>``) joined to a host bridge by a
veth pair, on 198.18.42.0/24 (the RFC 2544 benchmarking range; nothing else uses it here); each namespace's
/etc/hosts (``/etc/netns/<ns>/hosts``, bind-mounted by ``ip netns exec``) maps n1..n8 to those addresses, so the
rendezvous (rank 0's node name) and gloo (``GLOO_SOCKET_IFNAME``) both use the veths, never a loopback.

Every veth is shaped with ``tc ... tbf`` on both ends, so the kernel, not the CPU, sets every pair's rate in
both directions: HEALTHY_MBIT for all nodes (above the profile's NIC rate by the TCP/IP header overhead), and
SLOW_MBIT = HEALTHY_MBIT / 5 for SLOW. Unshaped veths on a loaded 2-core host measured anywhere between a few
hundred Mbit/s and several Gbit/s per flow, noise that hid even a 20x slower node from the outlier test. The
transfer (SIZE) is 128x the tbf burst, so no exchange finishes inside the burst. The probe does not know (a
wrapper given as ``--python`` enters the namespace, as plan-to-place-facts.md describes). Burn-in must name
exactly that node and ``--drain`` drain exactly it (checked with sinfo).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import cpu_node_profile, need

Cli = Callable[..., Any]
pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NODES = 8
SLOW = "n5"
BRIDGE = "dsbnbr0"
NET = "198.18.42"
#: kernel line rate of every node, the profile's NIC rate (+ header overhead), the slowed node's rate
HEALTHY_MBIT, PROFILE_RATE, SLOW_MBIT = 120, "0.1 Gb/s", 24
BURST = "64kb"
#: a short tbf queue (20 ms): the ACKs of a direction may share it with data, and a long one (100 ms
#: tried) delays them enough to halve some healthy flows at random
LATENCY = "20ms"
SIZE = "8MiB"


def sh(*argv: str) -> None:
    subprocess.run(list(argv), check=True, capture_output=True, timeout=60)


def teardown(nodes: list[str]) -> None:
    for node in nodes:
        subprocess.run(["ip", "netns", "del", f"dsbn-{node}"], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", f"dsbh-{node}"], capture_output=True, check=False)
        shutil.rmtree(f"/etc/netns/dsbn-{node}", ignore_errors=True)
    subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True, check=False)


@pytest.fixture
def namespaces() -> Iterator[dict[str, str]]:
    """node -> address: one namespace per emulated node, veths to one bridge, its own /etc/hosts; every veth
    shaped to HEALTHY_MBIT, SLOW's to SLOW_MBIT."""
    need(os.geteuid() == 0 and shutil.which("ip") is not None and shutil.which("tc") is not None,
         "network namespaces and tc need root and iproute2")
    nodes = [f"n{i}" for i in range(1, NODES + 1)]
    teardown(nodes)
    addresses = {}
    try:
        sh("ip", "link", "add", BRIDGE, "type", "bridge")
        sh("ip", "link", "set", BRIDGE, "up")
        for i, node in enumerate(nodes, start=1):
            ns, inner, outer = f"dsbn-{node}", f"dsbv-{node}", f"dsbh-{node}"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
            sh("ip", "link", "set", inner, "netns", ns)
            sh("ip", "link", "set", outer, "master", BRIDGE, "up")
            sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{NET}.{i}/24", "dev", inner)
            sh("ip", "netns", "exec", ns, "ip", "link", "set", inner, "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
            addresses[node] = f"{NET}.{i}"
        hosts = "127.0.0.1 localhost\n" + "".join(f"{a} {n}\n" for n, a in addresses.items())
        for node in nodes:
            folder = Path(f"/etc/netns/dsbn-{node}")
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "hosts").write_text(hosts)
            mbit = SLOW_MBIT if node == SLOW else HEALTHY_MBIT
            shape = ["root", "tbf", "rate", f"{mbit}mbit", "burst", BURST, "latency", LATENCY]
            sh("ip", "netns", "exec", f"dsbn-{node}", "tc", "qdisc", "add", "dev", f"dsbv-{node}", *shape)
            sh("tc", "qdisc", "add", "dev", f"dsbh-{node}", *shape)
        yield addresses
    finally:
        teardown(nodes)


def wrapper(folder: Path) -> Path:
    """What ``--python`` runs on every node: this checkout's Python inside the node's namespace."""
    path = folder / "python-in-netns"
    path.write_text("#!/bin/sh\n"
                    'node="${SLURMD_NODENAME:?}"\n'
                    f'exec ip netns exec "dsbn-$node" env GLOO_SOCKET_IFNAME="dsbv-$node" PYTHONPATH={ROOT} '
                    f'{sys.executable} "$@"\n')
    path.chmod(0o755)
    return path


def sinfo_drained() -> dict[str, str]:
    out = subprocess.run(["sinfo", "-h", "-N", "-t", "drain,drained,draining", "-o", "%N|%E"], check=True,
                         capture_output=True, text=True, timeout=60).stdout
    return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)


def test_burn_in_names_and_drains_the_node_the_kernel_slows(cli: Cli, slurm_cluster: int, namespaces: dict[str, str],
                                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            resume: Callable[[list[str]], None]) -> None:
    assert slurm_cluster >= NODES
    profiles = cpu_node_profile(tmp_path / "profiles", 1, nic_rate=PROFILE_RATE)
    plan = tmp_path / "plan"
    r = cli("--profiles-dir", str(profiles), "topology", "plan", "-n", str(NODES), "--node-profile", "cpu1",
            "--node-name", "n{n}", "--out-dir", str(plan))
    assert r.exit_code == 0, r.stderr
    monkeypatch.delenv("MASTER_ADDR", raising=False)  # the rendezvous is rank 0's node, by name
    out = tmp_path / "out"
    try:
        r = cli("--profiles-dir", str(profiles), "health", "burn-in", str(plan), "-w", f"n[1-{NODES}]",
                "--transport", "gloo", "--size", SIZE, "--repeats", "3", "--timeout-s", "240",
                "--python", str(wrapper(tmp_path)), "--drain", "--max-drain", "2", "--out-dir", str(out), "-f", "json")
        data = r.json() if r.stdout.startswith("{") else {"rounds": [], "findings": []}
        shown = json.dumps({"rounds": data["rounds"], "findings": data["findings"]}, indent=1)
        assert r.exit_code == 1, (shown, r.stderr[-3000:])
        assert [(f["kind"], f["node"]) for f in data["findings"]] == [("nic", SLOW)], shown
        assert data["findings"][0]["subject"] == f"{SLOW}:mlx5_0"
        assert data["source"] == "measured" and data["design"]["coverage"] == 1.0
        assert [s["node"] for s in data["drain"]["nodes"] if s["done"]] == [SLOW]
        drained = sinfo_drained()
        assert set(drained) == {SLOW}, drained
        assert drained[SLOW].startswith(f"dsctl:burnin nic {SLOW}:mlx5_0 at "), drained[SLOW]
        assert (out / "burnin.json").exists()
    finally:
        resume([SLOW])
