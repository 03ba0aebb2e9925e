"""Small things users noticed: `| head` exits with the result's code (not 1), `profiles validate` reports every
invalid key of every file, one unit per quantity in tables, EPLB zero rows and model layer numbers."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dsctl.cli import main
from dsctl.profiles.loader import builtin_profiles_dir

Cli = Callable[..., Any]
ROOT = Path(__file__).resolve().parents[2]


class ClosedAfter(io.StringIO):
    """A stdout whose reader goes away after ``limit`` characters (like ``| head -c``)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def write(self, text: str) -> int:
        if self.tell() + len(text) > self.limit:
            raise BrokenPipeError(32, "Broken pipe")
        return super().write(text)


@pytest.mark.parametrize(("args", "code"), [
    (("launch", "--nodes", "256"), 0),
    (("launch", "--nodes", "256", "-f", "json"), 0),
    (("launch", "--nodes", "2"), 1),  # the plan does not fit: still 1 when the reader stops early
    (("profiles", "list"), 0),
])
def test_a_closed_pipe_keeps_the_results_exit_code(args: tuple[str, ...], code: int) -> None:
    err = io.StringIO()
    with redirect_stdout(ClosedAfter(200)), redirect_stderr(err):
        assert main(list(args)) == code
    assert err.getvalue() == ""


@pytest.mark.parametrize("indent", ["1", "0"])  # indented (as on a terminal) or one line (a pipe's default)
def test_dsctl_into_head_exits_0(tmp_path: Path, indent: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DSCTL_JSON_INDENT": indent}
    proc = subprocess.Popen([sys.executable, "-m", "dsctl", "launch", "layout", "--nodes", "256", "--explain",
                             "-f", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    head = proc.stdout.readline().strip() if indent == "1" else proc.stdout.read(2)
    assert head == (b"{" if indent == "1" else b'{"')
    proc.stdout.close()  # 230 kB of JSON do not fit in the pipe: dsctl meets a closed pipe
    stderr = proc.stderr.read()
    assert proc.wait(timeout=60) == 0 and stderr == b""


def test_validate_reports_every_invalid_file(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "nodes").mkdir()
    (tmp_path / "models").mkdir()
    good = (builtin_profiles_dir() / "nodes" / "h800-hgx.yaml").read_text()
    (tmp_path / "nodes" / "ok.yaml").write_text(good.replace("name: h800-hgx", "name: ok"))
    (tmp_path / "nodes" / "bad1.yaml").write_text(good.replace("name: h800-hgx", "name: bad1").replace(
        "count: 8", "count: eight", 1))
    (tmp_path / "models" / "bad2.yaml").write_text("name: bad2\nnum_layers: -1\n")
    result = cli("profiles", "validate", tmp_path)
    assert result.exit_code == 2 and result.stdout == ""
    lines = [line.split("/")[-1] for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert lines == [
        "bad2.yaml: attention: required key is missing",
        "bad2.yaml: num_layers: expected an integer from 1 to 10,000,000, got -1",
        "bad2.yaml: hidden_size: required key is missing",
        "bad2.yaml: vocab_size: required key is missing",
        "bad2.yaml: dense_intermediate_size: required key is missing",
        "bad1.yaml: gpu.count: expected an integer >= 1, got a string ('eight')",
        f"{tmp_path.name} are invalid: 6 errors (each named above)",
    ], result.stderr
    assert f"error: 2 of 3 profiles under {tmp_path} are invalid" in result.stderr


def test_validate_reports_every_invalid_key_of_a_file(cli: Cli, tmp_path: Path) -> None:
    good = (builtin_profiles_dir() / "nodes" / "h800-hgx.yaml").read_text()
    bad = tmp_path / "nodes" / "bad.yaml"
    bad.parent.mkdir()
    bad.write_text(good.replace("name: h800-hgx", "name: bad").replace("count: 8", "count: eight", 1)
                   .replace("link_layer: infiniband", "link_layer: carrier-pigeon") + "  lanes: 3\n")
    result = cli("profiles", "validate", bad)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"error: {bad}: gpu.count: expected an integer >= 1, got a string ('eight')",
        f"error: {bad}: compute_nics.link_layer: 'carrier-pigeon' is not valid; expected infiniband or ethernet",
        f"error: {bad}: storage_nics.lanes: unknown key",
        "hint: valid keys here: count, link_layer, rate",
        f"error: {bad} is invalid: 3 errors (each named above)",
    ]
    # commands that load a profile still stop at its first error
    shown = cli("--profiles-dir", tmp_path, "profiles", "show", "bad")
    assert shown.exit_code == 2 and shown.stderr.splitlines() == [
        f"error: {bad}: gpu.count: expected an integer >= 1, got a string ('eight')"]


def test_tables_use_gib_for_bytes_and_gb_per_s_for_bandwidth(cli: Cli) -> None:
    size = cli("storage", "size", "--nodes", "180").stdout
    assert "GB/s" in size and "GiB/s" not in size and "PiB" in size
    memory = cli("model", "memory").stdout
    assert "GiB" in memory and " GB " not in memory and "TiB" in memory


def test_eplb_warns_about_all_zero_rows_and_numbers_layers_as_the_model(cli: Cli, tmp_path: Path) -> None:
    weight = np.random.default_rng(0).integers(1, 100, size=(61, 256))
    weight[:3] = 0
    every_layer, moe_only = tmp_path / "all.npy", tmp_path / "moe.npy"
    np.save(every_layer, weight)
    np.save(moe_only, weight[3:])
    args = ("-r", "288", "-g", "32", "-N", "4", "--model", "deepseek-v3")
    res = cli("eplb", "rebalance", every_layer, *args, "-f", "json")
    assert res.exit_code == 0, res.stderr
    warning = next(w for w in res.json()["warnings"] if "all zero" in w)
    assert "rows 0, 1, 2 are all zero (3 of 61)" in warning and "give only its 58 MoE layers' rows" in warning
    table = cli("eplb", "rebalance", moe_only, *args).stdout
    assert "row 0 of the statistics is model layer 3" in table and "model" in table and "all zero" not in table
    plain = cli("eplb", "rebalance", moe_only, "-r", "288", "-g", "32", "-N", "4").stdout
    assert "model layer" not in plain


def test_one_name_per_concept_with_hidden_deprecated_aliases(cli) -> None:
    """-N/--nodes is a count and -w/--nodelist a hostlist everywhere; -m/--model in launch too. Old spellings
    (-n, a hostlist --nodes, -w for --workload) work for one release with one deprecation line on stderr."""
    new = cli("launch", "-N", "256", "-m", "deepseek-v3", "-f", "json")
    assert new.exit_code == 0, new.stderr
    assert new.json()["num_nodes"] == 256 and "warning" not in new.stderr
    old = cli("launch", "-n", "256", "--model", "deepseek-v3", "-f", "json")
    assert old.stdout == new.stdout
    assert old.stderr == "warning: -n is deprecated; use --nodes\n"
    # an option's value is never mistaken for an old spelling; nothing after '--' is rewritten
    assert cli("launch", "-N", "256", "--job-name", "-n", "-f", "json", "--", "train.py", "-n", "3").stderr == ""
    # a count where a hostlist is wanted is refused, naming the new spelling
    bad = cli("health", "fleet", "--nodes", "256")
    assert bad.exit_code == 2 and "-w/--nodelist" in bad.stderr and bad.stdout == ""
    for group in ("launch", "eplb rebalance", "storage chains", "topology plan"):
        text = cli(*group.split(), "--help").stdout
        assert "-N" in text and " -n " not in text, group
