"""dsctl launch --backend torchrun --submit: real torchrun (gloo, 4 workers) on this host."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Cli = Callable[..., Any]
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("job_path")]


def test_local_torchrun_four_workers(cli: Cli, tmp_path: Path, torch_ready: Path, cpu_profiles: Path,
                                     layout_check: Path) -> None:
    out = tmp_path / "local"
    reports = tmp_path / "reports"
    reports.mkdir()
    res = cli("--profiles-dir", cpu_profiles, "launch", "--nodes", "1", "--node-profile", "cpu4",
              "--model", "deepseek-v2-lite", "--pp", "2", "--backend", "torchrun", "--submit", "--out-dir", out,
              "-f", "json", "--", str(layout_check), "--ranks-csv", str(out / "ranks.csv"),
              "--report-dir", str(reports))
    assert res.exit_code == 0, res.stderr[-3000:]
    data = res.json()
    assert (data["state"], data["job_exit_code"], data["world_size"]) == ("EXITED", 0, 4)
    assert re.match(r"layout_check OK world=4 pp=2 ep=\d+ tp=1 dp=2", (reports / "ok.txt").read_text())
    # one file per rank: the workers' stderr lines may interleave on a busy machine
    lines = [(reports / f"rank-{r}.txt").read_text() for r in range(4)]
    assert all(re.match(rf"layout_check rank={r} node=0 local={r} .* ok$", line) for r, line in enumerate(lines)), lines
