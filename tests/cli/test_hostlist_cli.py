"""-w/--nodelist where Slurm's client is installed but not configured (a login node, a CI image with slurm-wlm):
``scontrol`` dies ("Could not establish a configuration source"), and a hostlist is still read, by dsctl's own
grammar (issue 30). And the hostlist bounds of issue 33 through the CLI: one short line, exit 2."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Cli = Callable[..., Any]

UNCONFIGURED_SCONTROL = """#!/bin/sh
echo "scontrol: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host" >&2
echo "scontrol: fatal: Could not establish a configuration source" >&2
exit 1
"""


@pytest.fixture
def unconfigured_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH holds only an scontrol that fails as an unconfigured Slurm client's does (no srun, no sinfo)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(UNCONFIGURED_SCONTROL)
    (bin_dir / "scontrol").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    return bin_dir


@pytest.fixture(scope="module")
def plan16(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.conftest import run_cli

    out = tmp_path_factory.mktemp("plan") / "p16"
    assert run_cli("topology", "plan", "-N", "16", "--out-dir", str(out)).exit_code == 0
    return out


def _fabric(tmp_path: Path) -> Path:
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"seed": 1, "noise": 0.03, "faults": []}))
    return path


@pytest.mark.parametrize(("nodelist", "nodes"), [
    ("node[0001-0004]", 4),
    ("node00[0-1][1-2]", 4),  # two bracket groups: node0001 node0002 node0011 node0012
    ("node000[1-2],node00[0-1][1-2]", 4),  # repeats counted once
])
def test_burn_in_rehearsal_reads_the_hostlist_without_slurm(cli: Cli, plan16: Path, tmp_path: Path,
                                                            unconfigured_slurm: Path, nodelist: str,
                                                            nodes: int) -> None:
    """Before: exit 2 "--nodelist 'node[0001-0004]': not a Slurm hostlist (scontrol: fatal: Could not establish
    a configuration source)", for a rehearsal that needs no Slurm."""
    r = cli("health", "burn-in", str(plan16), "--fabric-model", str(_fabric(tmp_path)), "-w", nodelist,
            "-f", "json", "--no-nvlink")
    assert r.exit_code == 0, r.stderr
    assert r.json()["nodes_tested"] == nodes


def test_burn_in_rehearsal_without_any_slurm_reads_several_groups(cli: Cli, plan16: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, without scontrol the built-in parser refused a second bracket group ("expected ','")."""
    monkeypatch.setenv("PATH", str(tmp_path))
    r = cli("health", "burn-in", str(plan16), "--fabric-model", str(_fabric(tmp_path)), "-w", "node00[0-1][1-2]",
            "-f", "json", "--no-nvlink")
    assert r.exit_code == 0, r.stderr
    assert r.json()["nodes_tested"] == 4


@pytest.mark.parametrize("command", [
    ["health", "fleet", "-w", "node[0001-0004]"],
    ["trace", "overlap", "x.json", "--slurm", "-w", "node[0001-0004]"],
])
def test_fleet_commands_read_the_hostlist_then_need_srun(cli: Cli, unconfigured_slurm: Path,
                                                         command: list[str]) -> None:
    """The hostlist is read; what is missing is srun, an environment problem (exit 3), not the user's -w."""
    r = cli(*command)
    assert r.exit_code == 3, r.stderr
    assert "srun" in r.stderr and "hostlist" not in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(("nodelist", "message"), [
    ("node[1-" + "9" * 5000 + "]", "a number of 5,000 digits in brackets; at most 30"),
    ("a" * 100000 + "[0-99998]", "more than 65,536 names"),
    ("n[1-65536],m[1-65536]", "more than 65,536 names"),
    ("rack[1-2]-n[1-2]x", "goes on after its last ']'"),
])
@pytest.mark.parametrize("command", [["health", "fleet"], ["trace", "overlap", "x.json", "--slurm"]])
def test_hostile_hostlists_are_one_short_line(cli: Cli, unconfigured_slurm: Path, command: list[str],
                                              nodelist: str, message: str) -> None:
    """Issue 33: a 5,000-digit range was exit 4, ``a*100000[0-99998]`` took ~10 GB and then a traceback (exit 1)."""
    r = cli(*command, "-w", nodelist)
    assert r.exit_code == 2, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr) < 600  # the expression is shown cut, never whole


def test_burn_in_refuses_a_huge_hostlist_before_reading_the_plan_nodes(cli: Cli, plan16: Path,
                                                                       tmp_path: Path) -> None:
    r = cli("health", "burn-in", str(plan16), "--fabric-model", str(_fabric(tmp_path)), "-w",
            "a" * 100000 + "[0-99998]")
    assert r.exit_code == 2 and "more than 65,536 names" in r.stderr and len(r.stderr) < 600


def test_drain_with_an_unconfigured_scontrol_is_exit_3_naming_scontrol(cli: Cli, plan16: Path, tmp_path: Path,
                                                                       unconfigured_slurm: Path) -> None:
    """scontrol stays where a Slurm feature is needed (a node's drain state, the drain); its failure there is
    an environment problem naming scontrol and what it said, after the report, with nothing drained. Before,
    the failed state read counted as "not drained, no reason" and the drain was tried anyway."""
    log = tmp_path / "calls"
    (unconfigured_slurm / "scontrol").write_text(f'#!/bin/sh\necho "$@" >> {log}\n' +
                                                 UNCONFIGURED_SCONTROL.split("\n", 1)[1])
    fab = tmp_path / "faults.json"
    fab.write_text(json.dumps({"seed": 1, "noise": 0.03, "faults": [{"node": "node0011", "rate": 0.5}]}))
    out = tmp_path / "out"
    r = cli("health", "burn-in", str(plan16), "--fabric-model", str(fab), "--out-dir", str(out), "--drain")
    assert r.exit_code == 3, r.stderr
    assert ("scontrol show node -o node0011: Slurm does not confirm node0011"
            in r.stderr)
    assert "node0011" in r.stdout and (out / "burnin.json").exists()  # the report stands
    assert log.read_text().splitlines() == ["show node -o node0011"]  # never "update ... State=DRAIN"


@pytest.mark.parametrize("said", ["slurm_load_node error: Invalid node name specified", "Node node0011 not found"])
def test_a_node_slurm_does_not_confirm_is_never_drained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        said: str) -> None:
    """A name Slurm does not know as exactly one node (unknown, a NodeSet, an alias) is exit 3 before any drain
    (issue 33: 'ALL' drained the cluster), whatever scontrol's words."""
    from dsctl.errors import EnvironmentMissing
    from dsctl.runners.slurm_nodes import node_drain_state

    (tmp_path / "scontrol").write_text(f'#!/bin/sh\necho "{said}" >&2\nexit 1\n')
    (tmp_path / "scontrol").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvironmentMissing, match=f"does not confirm node0011 .*{said[:20]}"):
        node_drain_state("node0011")


def test_fleet_drain_with_an_unconfigured_scontrol_is_exit_3_after_the_report(
        cli: Cli, unconfigured_slurm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """health fleet --drain on a crit node: srun and sinfo work (stand-ins), scontrol is not configured. The
    report is printed, nothing is drained, exit 3 names scontrol (before: the failed state read counted as 'not
    drained' and the drain was tried)."""
    from tests.cli.test_first_hour_cli import FAKE_SRUN

    root = Path(__file__).resolve().parents[2]
    scripts = {"srun": FAKE_SRUN, "sinfo": "#!/bin/sh\necho 'n1 idle none'\n",
               "node-dsctl": f'#!/bin/sh\nPYTHONPATH={root} exec {sys.executable} -m dsctl "$@"\n'}
    for name, text in scripts.items():
        (unconfigured_slurm / name).write_text(text)
        (unconfigured_slurm / name).chmod(0o755)
    system = [p for p in ("/usr/bin", "/bin") if Path(p).is_dir()]
    monkeypatch.setenv("PATH", os.pathsep.join([str(unconfigured_slurm), *system]))
    record = root / "tests" / "data" / "health" / "nvlink_link_down.yaml"
    r = cli("health", "fleet", "-w", "n1", "--dsctl", str(unconfigured_slurm / "node-dsctl"), "--from-record",
            str(record), "--drain", "-f", "json")
    assert r.exit_code == 3, r.stderr
    assert "scontrol show node -o n1: Slurm does not confirm n1" in r.stderr
    report, end = json.JSONDecoder().raw_decode(r.stdout)  # the report, then the error's own envelope
    message = json.loads(r.stdout[end:])["error"]["message"]
    assert message.startswith("scontrol show node -o n1: Slurm does not confirm n1")
    assert [(n["node"], n["status"]) for n in report["nodes"]] == [("n1", "crit")]
    assert report["drain"][0]["node"] == "n1"


def test_check_slurm_on_a_crit_node_with_an_unconfigured_scontrol(cli: Cli, unconfigured_slurm: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """health check --slurm (HealthCheckProgram) on a crit node: the report first, then exit 3 naming scontrol;
    never a drain over a reason it could not read."""
    log = unconfigured_slurm.parent / "calls"
    (unconfigured_slurm / "scontrol").write_text(f'#!/bin/sh\necho "$@" >> {log}\n' +
                                                 UNCONFIGURED_SCONTROL.split("\n", 1)[1])
    monkeypatch.setenv("SLURMD_NODENAME", "n7")
    record = Path(__file__).resolve().parents[2] / "tests" / "data" / "health" / "nvlink_link_down.yaml"
    r = cli("health", "check", "--slurm-healthcheck", "--from-record", str(record))
    assert r.exit_code == 3, r.stderr
    assert "scontrol show node -o n7: Slurm does not confirm n7" in r.stderr
    assert "CRIT" in r.stdout
    assert log.read_text().splitlines() == ["show node -o n7"]
