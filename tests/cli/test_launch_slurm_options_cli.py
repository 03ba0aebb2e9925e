"""dsctl launch as a Slurm user expects: account/QOS/node-list options and raw #SBATCH lines, NCCL_IB_HCA from the
node profile's compute NICs, --nccl-env, the training-script check before submitting, and the smallest node count
that fits (launch hint and `launch layout --min-nodes`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsctl.profiles.loader import builtin_profiles_dir

Cli = Callable[..., Any]
LITE = ("launch", "--nodes", "1", "--model", "deepseek-v2-lite")


def sbatch_lines(out: Path) -> list[str]:
    return [line for line in (out / "job.sbatch").read_text().splitlines() if line.startswith("#SBATCH")]


def test_slurm_options_become_sbatch_directives(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "job"
    res = cli(*LITE, "--backend", "slurm", "--account", "ml-infra", "--qos", "high", "--reservation", "maint-1",
              "--exclude", "gpu[013,077]", "--nodelist", "gpu[001-004]", "--exclusive",
              "--sbatch-arg=--mail-type=END", "--sbatch-arg", "--comment=v3 pretrain", "--sbatch-arg=--requeue",
              "--out", out, "--", "train.py")
    assert res.exit_code == 0, res.stderr
    assert sbatch_lines(out)[-9:] == [
        "#SBATCH --account=ml-infra", "#SBATCH --qos=high", "#SBATCH --reservation=maint-1",
        "#SBATCH --exclude=gpu[013,077]", "#SBATCH --nodelist=gpu[001-004]", "#SBATCH --exclusive",
        "#SBATCH --mail-type=END", '#SBATCH --comment="v3 pretrain"', "#SBATCH --requeue"]


@pytest.mark.parametrize(("args", "needle"), [
    (("--account", "ml infra"), "--account 'ml infra' is not a valid Slurm name"),
    (("--qos", "-x"), "--qos"),
    (("--exclude", "gpu1;reboot"), "--exclude 'gpu1;reboot' is not a Slurm node list"),
    # the one hostlist grammar (dsctl/cluster/hostlist.py): sbatch would refuse these only at submission
    (("--nodelist", "gpu[1-2]x"), "--nodelist 'gpu[1-2]x': 'gpu[1-2]x' goes on after its last ']'"),
    (("--exclude", "gpu[4-1]"), "--exclude 'gpu[4-1]': range '4-1' runs backwards"),
    (("--exclude", "n[0-255]n[0-255]n[0-255]"), "more than 131,072 names"),
    (("--sbatch-arg", "--nodes=9"), "dsctl writes --nodes itself; use --nodes"),
    (("--sbatch-arg", "--partition=x"), "use --partition"),
    (("--sbatch-arg", "mail-type=END"), "is not one sbatch option"),
    (("--sbatch-arg", "--comment=a\nb"), "is not one sbatch option"),
    (("--nccl-env", "FOO=1"), "is not NCCL_NAME=VALUE"),
])
def test_bad_slurm_options_exit_2_naming_the_option(cli: Cli, tmp_path: Path, args: tuple[str, ...],
                                                    needle: str) -> None:
    res = cli(*LITE, "--backend", "slurm", *args, "--out", tmp_path / "job", "--", "train.py")
    assert res.exit_code == 2 and needle in res.stderr, res.stderr
    assert not (tmp_path / "job").exists()


@pytest.mark.parametrize("flag", [("--account", "a"), ("--exclusive",), ("--sbatch-arg", "--requeue"),
                                  ("--nodelist", "n1")])
def test_slurm_options_need_backend_slurm(cli: Cli, tmp_path: Path, flag: tuple[str, ...]) -> None:
    res = cli(*LITE, "--backend", "torchrun", *flag, "--out", tmp_path / "job", "--", "train.py")
    assert res.exit_code == 2 and f"{flag[0]} applies to --backend slurm" in res.stderr


def site_node_profile(folder: Path) -> Path:
    nodes = folder / "nodes"
    nodes.mkdir(parents=True)
    text = (builtin_profiles_dir() / "nodes" / "h800-hgx.yaml").read_text().replace("name: h800-hgx", "name: rack7")
    text = text.replace("  model: ConnectX-7\n", "  model: ConnectX-7\n  devices: [mlx5_0, mlx5_1, mlx5_2, mlx5_3, "
                        "mlx5_4, mlx5_5, mlx5_6, mlx5_7]\n")
    (nodes / "rack7.yaml").write_text(text)
    return folder


def test_nccl_ib_hca_lists_the_compute_nics_of_the_node_profile(cli: Cli, tmp_path: Path) -> None:
    profiles = site_node_profile(tmp_path / "profiles")
    out = tmp_path / "job"
    res = cli("--profiles-dir", profiles, *LITE, "--node-profile", "rack7", "--backend", "slurm",
              "--nccl-env", "NCCL_IB_TIMEOUT=22", "--out", out, "--", "train.py")
    assert res.exit_code == 0, res.stderr
    script = (out / "job.sbatch").read_text()
    assert "export NCCL_IB_HCA==mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7\n" in script
    assert "export NCCL_IB_TIMEOUT=22\n" in script
    # --nccl-env overrides the profile's list; a profile without device names sets no NCCL_IB_HCA
    res = cli("--profiles-dir", profiles, *LITE, "--node-profile", "rack7", "--backend", "torchrun",
              "--nccl-env", "NCCL_IB_HCA=mlx5_0", "--out", tmp_path / "t", "--", "train.py")
    assert res.exit_code == 0, res.stderr
    text = (tmp_path / "t" / "torchrun.sh").read_text()
    assert "NCCL_IB_HCA=mlx5_0" in text and "mlx5_1" not in text
    res = cli(*LITE, "--backend", "slurm", "--out", tmp_path / "plain", "--", "train.py")
    assert "NCCL_IB_HCA" not in (tmp_path / "plain" / "job.sbatch").read_text()


def test_a_profile_with_the_wrong_number_of_devices_is_refused(cli: Cli, tmp_path: Path) -> None:
    profiles = site_node_profile(tmp_path / "profiles")
    path = profiles / "nodes" / "rack7.yaml"
    path.write_text(path.read_text().replace("mlx5_6, mlx5_7", "mlx5_6"))
    res = cli("profiles", "validate", path)
    assert res.exit_code == 2 and "compute_nics.devices" in res.stderr and "names 7 devices for count 8" in res.stderr


def test_submit_checks_that_the_training_script_exists(cli: Cli, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text("#!/bin/sh\necho 12345\n")
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    res = cli(*LITE, "--backend", "slurm", "--submit", "--out", tmp_path / "job", "--", "trian.py", "--lr", "1")
    assert res.exit_code == 2
    assert f"training script trian.py does not exist (looked in {tmp_path})" in res.stderr
    assert not (tmp_path / "job").exists()


@pytest.mark.slow
def test_launch_that_does_not_fit_names_the_smallest_node_count(cli: Cli) -> None:
    res = cli("launch", "--nodes", "2", "-f", "json")
    assert res.exit_code == 1  # the plan does not fit
    notes = res.json()["notes"]
    # the search's space (tp, ZeRO-3, every schedule and recipe), not the memory rule's 128 nodes
    assert any("the smallest node count that fits is 16 (--nodes 16" in note for note in notes), notes
    fits = cli("launch", "--nodes", "16", "-f", "json").json()
    assert not any("smallest node count" in note for note in fits["notes"])


@pytest.mark.slow
def test_layout_min_nodes_shows_the_smallest_layout_that_fits(cli: Cli) -> None:
    res = cli("launch", "layout", "--min-nodes", "-f", "json")
    assert res.exit_code == 0, res.stderr
    data = res.json()
    assert (data["num_nodes"], data["memory_fits"]) == (16, True)
    assert any("--min-nodes: 16 is the smallest node count that fits (every smaller count was checked; "
               "PP16 EP8 TP8 dualpipev 15360x1 full-recompute fits there)" in c for c in data["choices"])
    lite = cli("launch", "layout", "--min-nodes", "--model", "deepseek-v2-lite", "-f", "json").json()
    assert lite["num_nodes"] == 1
    both = cli("launch", "layout", "--min-nodes", "--nodes", "4")
    assert both.exit_code == 2 and "--min-nodes chooses the node count; drop --nodes" in both.stderr


@pytest.mark.slow
def test_min_nodes_keeps_what_the_request_fixes(cli: Cli) -> None:
    # a fixed schedule and recipe narrow the search's space; 20 nodes hold no layout without any recompute
    res = cli("launch", "layout", "--min-nodes", "--recipe", "none", "-f", "json")
    assert res.exit_code == 0, res.stderr
    assert (res.json()["num_nodes"], res.json()["memory_fits"]) == (21, True)
    assert any("--min-nodes: 21 is the smallest node count that fits (every smaller count was checked; "
               "PP21 EP8 TP8 1f1b 15360x1 none fits there)" in c for c in res.json()["choices"])
    gap = cli("launch", "--nodes", "20", "--recipe", "none", "-f", "json")
    assert gap.exit_code == 1 and any("the smallest node count that fits is 21" in n for n in gap.json()["notes"])
    wrong = cli("launch", "layout", "--min-nodes", "--ep", "3")
    assert wrong.exit_code == 2 and "ep 3 does not divide the 256 routed experts" in wrong.stderr
