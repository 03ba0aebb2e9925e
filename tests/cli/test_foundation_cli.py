"""The CLI contract every command shares: help, version, formats, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from dsctl import __version__
from dsctl.profiles.loader import builtin_profiles_dir


def test_help_lists_every_command_group(cli) -> None:
    result = cli("--help")
    assert result.exit_code == 0
    for group in ("topology", "eplb", "health", "storage", "launch", "model", "trace", "profiles"):
        assert group in result.stdout


def test_version(cli) -> None:
    result = cli("--version")
    assert (result.exit_code, result.stdout.strip()) == (0, f"dsctl {__version__}")


def test_profiles_list_shows_every_builtin(cli) -> None:
    result = cli("profiles", "list", "--format", "json")
    assert result.exit_code == 0
    names = {row["name"] for row in result.json()["profiles"]}
    assert {"deepseek-v3", "deepseek-v2", "deepseek-v2-lite", "qwen2.5-72b", "llama3.1-405b", "h800-hgx",
            "h100-hgx", "h200-hgx", "ib-ndr-64", "3fs-reference"} <= names
    table = cli("profiles", "list")
    assert table.exit_code == 0 and "deepseek-v3" in table.stdout and "3fs-reference" in table.stdout


def test_profiles_show_json_has_the_envelope_header_and_fields(cli) -> None:
    result = cli("profiles", "show", "deepseek-v3", "--format", "json")
    assert result.exit_code == 0 and result.stderr == ""
    data = result.json()
    assert data["dsctl"] == {"schema_version": 2, "command": "profiles show", "dsctl_version": __version__,
                             "exit_code": 0}
    assert data["num_layers"] == 61 and data["moe"]["num_routed_experts"] == 256


def test_profiles_show_yaml_and_table(cli) -> None:
    data = yaml.safe_load(cli("profiles", "show", "h800-hgx", "--format", "yaml").stdout)
    assert data["hbm_bytes"] == 80 * 1024**3
    table = cli("profiles", "show", "h800-hgx")
    assert table.exit_code == 0 and "num_compute_nics" in table.stdout


def test_unknown_profile_exits_2_listing_names(cli) -> None:
    result = cli("profiles", "show", "nope")
    assert result.exit_code == 2 and result.stdout == ""
    first = result.stderr.splitlines()[0]
    assert first.startswith("error: unknown profile 'nope'; available:") and "deepseek-v3" in first
    assert "Traceback" not in result.stderr


def test_validate_reports_syntax_line_and_key_path(cli, tmp_path: Path) -> None:
    bad = tmp_path / "nodes" / "broken.yaml"
    bad.parent.mkdir()
    bad.write_text("name: broken\ngpu:\n  count: 8\n hbm: 80 GiB\n")
    result = cli("profiles", "validate", str(bad))
    assert result.exit_code == 2 and "line 4" in result.stderr and "YAML syntax error" in result.stderr
    typed = tmp_path / "models" / "m.yaml"
    typed.parent.mkdir()
    text = (builtin_profiles_dir() / "models" / "qwen2.5-72b.yaml").read_text()
    typed.write_text(text.replace("name: qwen2.5-72b", "name: m").replace("num_kv_heads: 8", "num_kv_heads: eight"))
    result = cli("profiles", "validate", str(typed))
    assert result.exit_code == 2 and "attention.num_kv_heads" in result.stderr


def test_validate_ok(cli) -> None:
    result = cli("profiles", "validate", str(builtin_profiles_dir()), "--format", "json")
    assert result.exit_code == 0 and "deepseek-v3" in result.json()["valid"]


def test_profiles_dir_option_and_env(cli, tmp_path: Path, monkeypatch) -> None:
    text = (builtin_profiles_dir() / "nodes" / "h800-hgx.yaml").read_text().replace("name: h800-hgx", "name: b200")
    (tmp_path / "nodes").mkdir()
    (tmp_path / "nodes" / "b200.yaml").write_text(text)
    assert cli("--profiles-dir", str(tmp_path), "profiles", "show", "b200").exit_code == 0
    assert cli("profiles", "show", "b200").exit_code == 2
    monkeypatch.setenv("DSCTL_PROFILES", str(tmp_path))
    assert cli("profiles", "show", "b200", "--format", "json").json()["name"] == "b200"


def test_bad_option_and_bad_format_are_one_line_usage_errors(cli) -> None:
    result = cli("profiles", "list", "--format", "xml")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and "xml" in result.stderr and "Traceback" not in result.stderr
    result = cli("profiles", "list", "--bogus")
    assert result.exit_code == 2 and "No such option" in result.stderr


def test_debug_shows_the_traceback(cli) -> None:
    result = cli("--debug", "profiles", "show", "nope")
    assert result.exit_code == 2 and "Traceback" in result.stderr


def test_python_dash_m_entry_point() -> None:
    proc = subprocess.run([sys.executable, "-m", "dsctl", "profiles", "show", "ib-ndr-64", "--format", "json"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["num_ports"] == 64


def test_a_group_without_subcommand_prints_its_help(cli) -> None:
    result = cli("profiles")
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout.count("Usage: dsctl profiles") == 1 and "validate" in result.stdout


def test_wrong_profile_kind_is_named(cli) -> None:
    result = cli("profiles", "show", "x" * 500)
    assert result.exit_code == 2 and len(result.stderr.splitlines()[0]) < 400 and "(500 characters)" in result.stderr


def test_json_errors_are_an_envelope_on_stdout_and_a_line_on_stderr(cli) -> None:
    """--format json: a failing command still prints JSON (scripts parse stdout), the error line stays on stderr."""
    bad = cli("launch", "-N", "0", "--format", "json")
    assert bad.exit_code == 2
    assert bad.stderr.startswith("error: --nodes 0 is not valid")
    doc = bad.json()
    assert doc["dsctl"]["command"] == "launch" and doc["dsctl"]["exit_code"] == 2
    assert doc["error"]["exit_code"] == 2 and doc["error"]["message"] == bad.stderr.splitlines()[0][len("error: "):]
    usage = cli("health", "check", "--no-such-option", "-f", "json")
    assert usage.exit_code == 2 and usage.json()["dsctl"]["command"] == "health check"
    assert "--no-such-option" in usage.json()["error"]["message"]
    assert cli("launch", "-N", "0").stdout == ""  # table (the default): nothing on stdout
