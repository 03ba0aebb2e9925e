"""dsctl examples [DIR]: the shipped example inputs, written through the one writer rule."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from dsctl.commands.examples import USES, example_data_dir
from dsctl.output.folder_manifest import MANIFEST_NAME

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_examples_are_what_the_generator_writes(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_examples", ROOT / "tests" / "data" / "examples" /
                                                  "make_examples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path / "fresh")
    fresh = sorted(str(p.relative_to(tmp_path / "fresh")) for p in (tmp_path / "fresh").rglob("*") if p.is_file())
    assert fresh == sorted(USES)
    for name in fresh:
        assert (tmp_path / "fresh" / name).read_bytes() == (example_data_dir() / name).read_bytes(), name


def test_examples_writes_every_file_and_never_a_foreign_folder(cli: Any, tmp_path: Path) -> None:
    out = tmp_path / "try"
    result = cli("examples", out, "-f", "json")
    assert result.exit_code == 0, result.stderr
    assert sorted(f["path"] for f in result.json()["files"]) == sorted(USES)
    assert json.loads((out / MANIFEST_NAME).read_text())["files"] == sorted(USES)
    assert (out / "today.npy").read_bytes() == (example_data_dir() / "today.npy").read_bytes()
    assert cli("examples", out).exit_code == 0  # dsctl's folder: replaced, the old one kept as try.prev
    assert (tmp_path / "try.prev" / "node.yaml").is_file()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    result = cli("examples", mine)
    assert result.exit_code == 2 and "was not written by dsctl" in result.stderr
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


def test_the_example_statistics_drift_slowly_so_a_plan_on_past_days_balances_today(cli: Any, tmp_path: Path) -> None:
    """Issue 30: uncorrelated example days (r ~ 0.01) made EPLB look useless (0.139 -> 0.144 on today). Real routing
    statistics drift: consecutive days correlate, and a plan made on the past days keeps most of its gain today."""
    import itertools

    import numpy as np

    data = example_data_dir()
    days = [np.load(data / "stats" / f"day{d}.npy") for d in range(1, 7)] + [np.load(data / "today.npy")]
    assert all(day.shape == (58, 256) for day in days)
    correlations = [np.corrcoef(a.ravel(), b.ravel())[0, 1] for a, b in itertools.pairwise(days)]
    assert min(correlations) > 0.95, correlations
    plan = tmp_path / "plan.json"
    stats = [str(data / "stats" / f"day{d}.npy") for d in range(1, 7)]
    made = cli("eplb", "rebalance", *stats, "-m", "deepseek-v3", "--replicas", "288", "--gpus", "32", "--nodes", "4",
               "--out", str(plan), "-f", "json")
    assert made.exit_code == 0, made.stderr
    today = cli("eplb", "simulate", str(data / "today.npy"), str(plan), "-f", "json")
    assert today.exit_code == 0, today.stderr
    summary = today.json()["metrics"]["summary"]
    before, after = summary["mean_balancedness_before"], summary["mean_balancedness_after"]
    assert after > before + 0.25, (before, after)  # measured: 0.53 -> 0.88 (bound 0.95)
