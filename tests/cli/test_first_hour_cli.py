"""Issue 23, item 5 ("the first hour"): warnings, site-config errors, global options, completion, hints."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dsctl.errors import InputError

ROOT = Path(__file__).resolve().parents[2]


def test_a_numpy_warning_is_one_warning_line_before_the_error(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import dsctl.siteconfig

    def current() -> Any:
        np.log(np.zeros(2))  # RuntimeWarning: divide by zero encountered in log
        raise InputError("the input was bad")

    monkeypatch.setattr(dsctl.siteconfig, "current", current)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        result = cli("profiles", "list")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["warning: divide by zero encountered in log", "error: the input was bad"]


def readme_toml() -> str:
    """The dsctl.toml example of docs/usage.md, exactly as a user would copy it."""
    text = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```toml\n(.*?)^```$", text, re.S | re.M)
    assert len(blocks) == 1, "docs/usage.md has one dsctl.toml example"
    return blocks[0]


def test_the_documented_site_config_copied_literally_works(cli: Any, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "dsctl.toml"
    config.write_text(readme_toml(), encoding="utf-8")
    monkeypatch.setenv("DSCTL_CONFIG", str(config))
    result = cli("launch", "--nodes", "256", "--backend", "slurm", "--dry-run", "-f", "json", "--", "train.py")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines() == [f"warning: {config}: defaults.profiles_dirs: profile folder "
                                          "/opt/site/profiles does not exist; skipped"]
    shown = cli("config", "show", "-f", "json")
    assert shown.exit_code == 0, shown.stderr
    assert '"job_name": "alice-dsctl-train"' in result.stdout  # job_name_prefix applied
    values = {row["key"]: row["value"] for row in shown.json()["settings"]}
    assert values["launch.partition"] == "train" and values["defaults.node_profile"] == "h800-hgx"


def test_an_unknown_profile_from_the_site_config_names_file_and_key(cli: Any, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "dsctl.toml"
    config.write_text(readme_toml().replace('"h800-hgx"', '"h800-rack7"'), encoding="utf-8")
    monkeypatch.setenv("DSCTL_CONFIG", str(config))
    result = cli("launch", "--nodes", "4", "--dry-run")
    assert result.exit_code == 2
    assert f"unknown node profile 'h800-rack7' (set by {config}: defaults.node_profile)" in result.stderr
    assert cli("model", "kv-cache").exit_code == 0  # a command that does not use it is not affected


@pytest.mark.parametrize("args", [
    ("-f", "json", "model", "kv-cache"),
    ("model", "--format", "json", "kv-cache"),
    ("model", "kv-cache", "-f", "json"),
    ("--format=json", "model", "kv-cache"),
    ("-fjson", "model", "kv-cache"),
])
def test_format_is_accepted_before_the_group(cli: Any, args: tuple[str, ...]) -> None:
    result = cli(*args)
    assert result.exit_code == 0, result.stderr
    assert result.json()["dsctl"]["command"] == "model kv-cache"


def test_root_options_after_the_command_and_the_documented_health_example(cli: Any) -> None:
    """docs/health.md's replay with a profiles folder, with --profiles-dir where users put it (after the command)
    and where the docs now put it: the same answer."""
    record = ROOT / "tests" / "data" / "health" / "roce_no_v2_gid.yaml"
    profiles = ROOT / "tests" / "data" / "health" / "profiles"
    after = cli("health", "check", "--from-record", record, "--profiles-dir", profiles, "--node", "h800-roce",
                "-f", "json")
    before = cli("--profiles-dir", profiles, "health", "check", "--from-record", record, "--node", "h800-roce",
                 "-f", "json")
    assert before.exit_code == after.exit_code and before.exit_code in (0, 1), (before.stderr, after.stderr)
    assert after.json()["findings"] == before.json()["findings"]
    assert "--profiles-dir tests/data/health/profiles health check" in (ROOT / "docs" / "health.md").read_text()


def test_words_after_double_dash_are_never_moved() -> None:
    from dsctl.cli import place_global_options

    argv = ["launch", "--nodes", "4", "--debug", "--", "t.py", "--debug", "-f", "x", "--profiles-dir", "p"]
    assert place_global_options(argv) == ["--debug", "launch", "--nodes", "4", "--", "t.py", "--debug", "-f", "x",
                                          "--profiles-dir", "p"]


FAKE_SRUN = """#!/bin/sh
# runs the fleet wrapper here, as task 0 on node n1, labelled like srun --label
while [ "$1" != "sh" ]; do shift; done
out=$(mktemp); err=$(mktemp)
SLURMD_NODENAME=n1 "$@" >"$out" 2>"$err"
sed 's/^/0: /' "$out"; sed 's/^/0: /' "$err" >&2; rm -f "$out" "$err"
"""


@pytest.mark.parametrize("dsctl_path", ["dsctl", "/opt/nowhere/dsctl"])
def test_fleet_on_nodes_without_dsctl_names_the_dsctl_option(cli: Any, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch, dsctl_path: str) -> None:
    import shutil

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(FAKE_SRUN)
    (bin_dir / "sinfo").write_text("#!/bin/sh\necho 'n1 idle none'\n")
    for name in ("srun", "sinfo"):
        (bin_dir / name).chmod(0o755)
    system = [p for p in ("/usr/bin", "/bin") if Path(p).is_dir()]
    monkeypatch.setenv("PATH", ":".join([str(bin_dir), *system]))
    assert shutil.which("dsctl") is None and shutil.which("timeout") is not None
    result = cli("health", "fleet", "--nodes", "n1", "--dsctl", dsctl_path, "-f", "json")
    assert result.exit_code == 1, result.stderr
    node = result.json()["nodes"][0]
    assert "--dsctl PATH" in node["reason"] and dsctl_path in node["reason"], node
    assert node["reason"].startswith("exit 127: ")
