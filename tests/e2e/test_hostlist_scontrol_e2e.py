"""dsctl's hostlist grammar against a real ``scontrol show hostnames``: the unit test's Slurm cases and 400
generated expressions (several bracket groups, padding, repeats) give the same names in the same order, and
every case Slurm refuses dsctl refuses too.

``scontrol show hostnames`` needs a configuration but no daemon: the machine's (SLURM_CONF, /etc/slurm) when it
has one, else a two-line slurm.conf written here. Skipped (failed under CI=true) without scontrol.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from dsctl.cluster import hostlist
from dsctl.errors import InputError
from tests.e2e.conftest import need
from tests.unit.test_hostlist import SLURM_CASES, SLURM_REFUSES, random_hostlist

pytestmark = [pytest.mark.slow]
GENERATED = 400


def _scontrol(expression: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["scontrol", "show", "hostnames", expression], capture_output=True, text=True,
                          env=env, timeout=60, check=False)


@pytest.fixture(scope="module")
def scontrol_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An environment in which ``scontrol show hostnames`` works."""
    need(shutil.which("scontrol") is not None, "Slurm's client is not installed (apt-get install slurm-wlm munge)")
    env = dict(os.environ)
    if _scontrol("n[1-2]", env).stdout.split() == ["n1", "n2"]:
        return env
    conf = tmp_path_factory.mktemp("slurm") / "slurm.conf"
    conf.write_text("ClusterName=dsctl-hostlist\nSlurmctldHost=localhost\n")
    env["SLURM_CONF"] = str(conf)
    done = _scontrol("n[1-2]", env)
    need(done.stdout.split() == ["n1", "n2"], f"scontrol cannot read a configuration: {done.stderr.strip()[-200:]}")
    return env


def _slurm_names(expression: str, env: dict[str, str]) -> list[str] | None:
    """scontrol's names, or None where it says "Invalid hostlist" (and exits 0) or fails."""
    done = _scontrol(expression, env)
    names = done.stdout.split()
    if done.returncode != 0 or "Invalid hostlist" in done.stdout + done.stderr or not names:
        return None
    return names


def test_dsctl_expands_as_scontrol_does(scontrol_env: dict[str, str]) -> None:
    rng = random.Random(30)
    expressions = [e for e, _ in SLURM_CASES] + [random_hostlist(rng) for _ in range(GENERATED)]
    differ = []
    for expression in expressions:
        ours = hostlist.expand(expression)
        if _slurm_names(expression, scontrol_env) != ours:
            differ.append(expression)
    assert not differ, f"{len(differ)} of {len(expressions)} differ from scontrol, e.g. {differ[:5]}"


@pytest.mark.parametrize("expression", SLURM_REFUSES)
def test_what_scontrol_refuses_dsctl_refuses(scontrol_env: dict[str, str], expression: str) -> None:
    assert _slurm_names(expression, scontrol_env) is None
    with pytest.raises(InputError):
        hostlist.expand(expression)


def test_compressed_hostlists_read_the_same_in_slurm(scontrol_env: dict[str, str], tmp_path: Path) -> None:
    """What dsctl writes (topology.conf, srun --nodelist, suspect lists) Slurm reads back as the same names."""
    rng = random.Random(33)
    for _ in range(100):
        names = hostlist.expand(random_hostlist(rng))
        assert _slurm_names(hostlist.compress(names), scontrol_env) == names
