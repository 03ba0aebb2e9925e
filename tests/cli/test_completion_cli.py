"""Shell completion: Typer's --show-completion/--install-completion scripts and the completion protocol they use
(``_DSCTL_COMPLETE``), including profile names for --model, --node, --storage and friends."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

MODELS = ["deepseek-v2", "deepseek-v2-lite", "deepseek-v3", "llama3.1-405b", "qwen2.5-72b"]


@pytest.fixture
def complete(cli: Callable, monkeypatch: pytest.MonkeyPatch) -> Callable[..., list[str]]:
    """``complete("bash", "dsctl launch --model ")`` -> the candidates dsctl prints for that command line."""

    def run(shell: str, line: str) -> list[str]:
        monkeypatch.setenv("_DSCTL_COMPLETE", f"complete_{shell}")
        words = line.split(" ")
        if shell == "bash":
            monkeypatch.setenv("COMP_WORDS", line)
            monkeypatch.setenv("COMP_CWORD", str(len(words) - 1))
        else:
            monkeypatch.setenv("_TYPER_COMPLETE_ARGS", line)
            monkeypatch.setenv("_TYPER_COMPLETE_FISH_ACTION", "get-args")
        result = cli(*words[1:])
        monkeypatch.delenv("_DSCTL_COMPLETE")
        assert result.exit_code == 0, result.stderr
        return [line for line in result.stdout.splitlines() if line]

    return run


def test_groups_and_subcommands_complete(complete: Callable) -> None:
    from dsctl.cli import GROUPS

    assert complete("bash", "dsctl ") == list(GROUPS)
    assert complete("bash", "dsctl st") == ["storage"]
    assert set(complete("bash", "dsctl launch ")) >= {"layout", "schedule"}
    assert "--model" in complete("bash", "dsctl model flops --")


@pytest.mark.parametrize(("line", "expected"), [
    ("dsctl launch --model ", MODELS),
    ("dsctl launch layout --model deepseek-v", ["deepseek-v2", "deepseek-v2-lite", "deepseek-v3"]),
    ("dsctl model memory --model q", ["qwen2.5-72b"]),
    ("dsctl eplb rebalance --model deepseek-v3", ["deepseek-v3"]),
    ("dsctl launch --node-profile h", ["h100-hgx", "h200-hgx", "h800-hgx"]),
    ("dsctl health check --node-profile h8", ["h800-hgx"]),
    ("dsctl storage size --storage ", ["3fs-reference"]),
    ("dsctl storage size --client-node h2", ["h200-hgx"]),
    ("dsctl topology plan --switch ", ["ib-ndr-128-split", "ib-ndr-64"]),
    ("dsctl topology plan --switch ib-ndr-6", ["ib-ndr-64"]),
    ("dsctl topology plan --node-profile x", []),
])
def test_profile_options_complete_profile_names(complete: Callable, line: str, expected: list[str]) -> None:
    assert complete("bash", line) == expected


def test_user_profiles_complete_too(complete: Callable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dsctl.profiles.loader import builtin_profiles_dir

    (tmp_path / "nodes").mkdir()
    shutil.copy(builtin_profiles_dir() / "nodes" / "h800-hgx.yaml", tmp_path / "nodes" / "site-h800.yaml")
    monkeypatch.setenv("DSCTL_PROFILES", str(tmp_path))
    assert complete("bash", "dsctl launch --node-profile s") == ["site-h800"]


def test_zsh_and_fish_speak_their_protocols(complete: Callable) -> None:
    zsh = complete("zsh", "dsctl storage size --storage ")
    assert len(zsh) == 1 and '"3fs-reference"' in zsh[0]
    assert complete("fish", "dsctl health check --node-profile h1") == ["h100-hgx"]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_show_completion_prints_the_script_for_each_shell(cli: Callable, monkeypatch: pytest.MonkeyPatch,
                                                          shell: str) -> None:
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    result = cli("--show-completion", shell)
    assert result.exit_code == 0
    assert f"_DSCTL_COMPLETE=complete_{shell}" in result.stdout and "dsctl" in result.stdout


def test_install_completion_for_bash_writes_the_script_and_sources_it(
    cli: Callable, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    monkeypatch.setenv("HOME", str(tmp_path))
    result = cli("--install-completion", "bash")
    assert result.exit_code == 0, result.stderr
    script = tmp_path / ".bash_completions" / "dsctl.sh"
    assert "complete_bash" in script.read_text()
    assert f"source '{script}'" in (tmp_path / ".bashrc").read_text()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_real_bash_completes_a_model_name(tmp_path: Path) -> None:
    """The script from --show-completion, sourced in bash, asks dsctl and fills COMPREPLY."""
    root = Path(__file__).resolve().parents[2]
    shim = tmp_path / "dsctl"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m dsctl \"$@\"\n")
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(root), "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    env.pop("DSCTL_PROFILES", None)
    script = ('source <(dsctl --show-completion bash); COMP_WORDS=(dsctl launch --model deepseek-v3); '
              'COMP_CWORD=3; _dsctl_completion dsctl; printf "%s\\n" "${COMPREPLY[@]}"')
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["deepseek-v3"]


def test_site_profile_folders_complete_too(complete: Callable, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "site" / "models").mkdir(parents=True)
    (tmp_path / "site" / "models" / "site-moe.yaml").write_text("name: site-moe\n")
    (tmp_path / "dsctl.toml").write_text('[defaults]\nprofiles_dirs = ["site"]\n')
    monkeypatch.setenv("DSCTL_CONFIG", str(tmp_path / "dsctl.toml"))
    assert complete("bash", "dsctl model flops --model site") == ["site-moe"]


@pytest.mark.parametrize(("line", "expected"), [
    ("dsctl topology plan --kind ", ["mpft", "mrft", "ft2", "ft3"]),
    ("dsctl topology plan --kind m", ["mpft", "mrft"]),
    ("dsctl topology simulate plan --routing ", ["static", "ecmp", "adaptive"]),
    ("dsctl topology simulate plan --workload ep-", ["ep-dispatch", "ep-combine"]),
    ("dsctl launch schedule --schedule dual", ["dualpipe", "dualpipev"]),
    ("dsctl eplb rebalance --policy h", ["hierarchical"]),
    ("dsctl model kv-cache --dtype fp", ["fp32", "fp16", "fp8"]),
])
def test_plain_choice_options_complete_their_values(complete: Callable, line: str, expected: list[str]) -> None:
    assert complete("bash", line) == expected


def _options() -> list[tuple[str, object]]:
    """(command path, option) of every command, groups loaded as dsctl loads them."""
    import typer

    from dsctl.cli import GROUPS, app

    root = typer.main.get_command(app)
    found = []

    def walk(command: object, path: str) -> None:
        for param in getattr(command, "params", []):
            found.append((path, param))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}")

    for group in GROUPS:
        walk(root.load(group), group)  # type: ignore[attr-defined]
    return found


def test_every_option_whose_help_lists_its_values_completes_them() -> None:
    """An option whose help starts with a list of words ("mpft, mrft, ft2 or ft3.") has a completer, and every
    entry of the registry names a real option whose help mentions each value."""
    import re

    from dsctl.commands._complete import CHOICE_OPTIONS, choice_values

    options = _options()
    word = r"[a-z0-9][a-z0-9-]*( \([^)]*\))?"  # a value, optionally explained: "gloo (CPU, TCP)"
    missing = []
    listed = set()
    for path, param in options:
        help_text = (getattr(param, "help", "") or "").split(":")[-1].strip()
        listing = re.match(rf"^{word}(, {word})*,? or {word}(?=[ .,;]|$)", help_text)
        if listing:
            listed.add((path, param.opts[0]))
        # typer's own options carry no click type (no .type): only a click Choice completes by itself
        if (listing and getattr(param, "_custom_shell_complete", None) is None
                and not hasattr(getattr(param, "type", None), "choices")):
            missing.append((path, param.opts[0]))
    assert missing == []
    # two-value lists count too ("prefill or decode", "gloo (CPU, TCP) or nccl (GPUs)")
    assert {("eplb replay", "--deployment"), ("health burn-in", "--transport"), ("health check", "--fail-on"),
            ("eplb budget", "--policy"), ("topology plan", "--kind")} <= listed
    by_key = {(path, opt): param for path, param in options for opt in getattr(param, "opts", [])}
    for key, source in CHOICE_OPTIONS.items():
        assert key in by_key, key
        for value in choice_values(source):
            assert value in (by_key[key].help or ""), (key, value)


def test_profiles_dir_on_the_command_line_completes_its_profiles(complete: Callable, tmp_path: Path) -> None:
    from dsctl.profiles.loader import builtin_profiles_dir

    (tmp_path / "nodes").mkdir()
    shutil.copy(builtin_profiles_dir() / "nodes" / "h800-hgx.yaml", tmp_path / "nodes" / "rack7.yaml")
    assert complete("bash", f"dsctl --profiles-dir {tmp_path} launch --node-profile r") == ["rack7"]
    assert complete("bash", "dsctl launch --node-profile r") == []


@pytest.mark.parametrize(("line", "expected"), [
    ("dsctl health burn-in --transport ", ["gloo", "nccl"]),
    ("dsctl eplb replay --deployment d", ["decode"]),
    ("dsctl eplb budget --policy g", ["global"]),
    ("dsctl health check --fail-on w", ["warn"]),
])
def test_new_choice_options_complete_their_values(complete: Callable, line: str, expected: list[str]) -> None:
    assert complete("bash", line) == expected
