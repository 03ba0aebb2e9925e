"""Site configuration (dsctl.toml): lookup order, first file wins per key, command-line options win over all,
`dsctl config show` names each value's source, bad keys and types exit 2 naming the file and the key."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import dsctl.siteconfig
from dsctl.profiles.loader import builtin_profiles_dir

Cli = Callable[..., Any]


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """The three places a dsctl.toml may live, all under tmp_path (none exists yet)."""
    user, system = tmp_path / "xdg", tmp_path / "etc"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(user))
    monkeypatch.setattr(dsctl.siteconfig, "SYSTEM_DIR", system / "dsctl")
    return {"env": tmp_path / "env" / "site.toml", "user": user / "dsctl" / "dsctl.toml",
            "system": system / "dsctl" / "dsctl.toml"}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def settings(cli: Cli) -> dict[str, tuple[Any, str]]:
    result = cli("config", "show", "-f", "json")
    assert result.exit_code == 0, result.stderr
    return {s["key"]: (s["value"], s["source"]) for s in result.json()["settings"]}


def test_without_files_every_key_is_built_in_or_unset(cli: Cli, places: dict[str, Path]) -> None:
    values = settings(cli)
    assert values["defaults.model"] == ("deepseek-v3", "built-in")
    assert values["launch.partition"] == (None, "unset")
    files = cli("config", "show", "-f", "json").json()["files"]
    assert [(f["why"], f["found"]) for f in files] == [("user", False), ("system", False)]
    table = cli("config", "show").stdout
    assert "defaults.node_profile" in table and "built-in" in table


def test_first_file_wins_per_key_and_env_comes_first(cli: Cli, places: dict[str, Path],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    write(places["system"], '[defaults]\nmodel = "qwen2.5-72b"\nnode_profile = "h100-hgx"\n'
                            '[launch]\npartition = "sys"\naccount = "sys-acct"\n')
    write(places["user"], '[defaults]\nmodel = "deepseek-v2"\n[launch]\npartition = "mine"\n')
    values = settings(cli)
    assert values["defaults.model"] == ("deepseek-v2", str(places["user"]))
    assert values["defaults.node_profile"] == ("h100-hgx", str(places["system"]))
    assert values["launch.partition"] == ("mine", str(places["user"]))
    assert values["launch.account"] == ("sys-acct", str(places["system"]))
    write(places["env"], '[launch]\npartition = "env"\n')
    monkeypatch.setenv("DSCTL_CONFIG", str(places["env"]))
    values = settings(cli)
    assert values["launch.partition"] == ("env", str(places["env"]))
    assert values["defaults.model"] == ("deepseek-v2", str(places["user"]))


def test_config_values_become_option_defaults_and_flags_win(cli: Cli, places: dict[str, Path],
                                                           tmp_path: Path) -> None:
    write(places["user"], '[defaults]\nmodel = "deepseek-v2-lite"\nnode_profile = "h100-hgx"\n'
                          '[launch]\npartition = "gpu"\naccount = "ml"\njob_name_prefix = "alice-"\n'
                          '[topology]\nnode_name = "gpu{n:03d}"\n')
    layout = cli("launch", "layout", "--nodes", "1", "-f", "json").json()
    assert (layout["model"], layout["node_profile"]) == ("deepseek-v2-lite", "h100-hgx")
    flagged = cli("launch", "layout", "--nodes", "1", "--model", "deepseek-v2", "-f", "json").json()
    assert flagged["model"] == "deepseek-v2"
    assert cli("model", "memory", "-f", "json").json()["model"] == "deepseek-v2-lite"
    # Slurm defaults apply to --backend slurm jobs and stay out of the way of a plan without a backend
    assert cli("launch", "--nodes", "1", "--dry-run", "-f", "json").exit_code == 0
    out = tmp_path / "job"
    res = cli("launch", "--nodes", "1", "--backend", "slurm", "--out-dir", out, "--", "train.py")
    assert res.exit_code == 0, res.stderr
    script = (out / "job.sbatch").read_text()
    assert "#SBATCH --partition=gpu" in script and "#SBATCH --account=ml" in script
    assert "#SBATCH --job-name=alice-dsctl-train" in script
    res = cli("launch", "--nodes", "1", "--backend", "slurm", "--partition", "debug", "--job-name", "mine",
              "--out-dir", tmp_path / "job2", "--", "train.py")
    script = (tmp_path / "job2" / "job.sbatch").read_text()
    assert "#SBATCH --partition=debug" in script and "#SBATCH --job-name=mine" in script
    res = cli("launch", "--nodes", "1", "--backend", "torchrun", "--out-dir", tmp_path / "job3", "--", "train.py")
    assert res.exit_code == 0, res.stderr  # site Slurm defaults are not torchrun options
    plan = cli("topology", "plan", "--nodes", "2", "--node-profile", "h800-hgx", "--out-dir", tmp_path / "fab",
               "-f", "json")
    assert plan.exit_code == 0, plan.stderr
    assert "gpu001," in (tmp_path / "fab" / "cabling.csv").read_text()


def test_profiles_dirs_are_relative_to_the_file(cli: Cli, places: dict[str, Path]) -> None:
    site = places["user"].parent / "site-profiles" / "nodes"
    site.mkdir(parents=True)
    text = (builtin_profiles_dir() / "nodes" / "h800-hgx.yaml").read_text()
    (site / "rack7.yaml").write_text(text.replace("name: h800-hgx", "name: rack7"))
    write(places["user"], '[defaults]\nprofiles_dirs = ["site-profiles"]\n')
    result = cli("profiles", "show", "rack7", "-f", "json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["path"] == str(site / "rack7.yaml")


@pytest.mark.parametrize(("text", "needle"), [
    ('[launch]\nparttion = "gpu"\n', "unknown key launch.parttion"),
    ('[lunch]\npartition = "gpu"\n', "unknown section [lunch]"),
    ('[launch]\npartition = 7\n', "launch.partition must be a string"),
    ('[defaults]\nprofiles_dirs = "x"\n', "defaults.profiles_dirs must be a list"),
    ('[launch]\npartition = ""\n', "launch.partition is empty"),
    ('launch = 3\n', "launch must be a table"),
    ('[launch\n', "not valid TOML"),
])
def test_bad_files_exit_2_naming_file_and_key(cli: Cli, places: dict[str, Path], text: str, needle: str) -> None:
    path = write(places["system"], text)
    for args in (("config", "show"), ("launch", "layout", "--nodes", "1")):
        result = cli(*args)
        assert result.exit_code == 2, result.stdout
        assert result.stderr.startswith(f"error: {path}: ") and needle in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


def test_dsctl_config_naming_a_missing_file_is_an_error(cli: Cli, places: dict[str, Path],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSCTL_CONFIG", str(places["env"]))
    result = cli("config", "show")
    assert result.exit_code == 2 and f"DSCTL_CONFIG={places['env']}: file not found" in result.stderr


def test_version_and_help_ignore_a_broken_file(cli: Cli, places: dict[str, Path]) -> None:
    write(places["user"], "[nonsense\n")
    assert cli("--version").exit_code == 0
    assert cli("--help").exit_code == 0
    assert os.path.exists(places["user"])
