"""dsctl trace overlap --slurm on the real single-host Slurm cluster: every node analyses its own traces
(``{node}`` in the pattern), the answers are merged into one spread, a node without traces is unreachable."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trace_builder as tb  # tests/trace_builder.py (tests/ is on sys.path via its conftest)

Cli = Callable[..., Any]
pytestmark = [pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
RANKS_PER_NODE = 2


def test_overlap_fans_out_to_every_node_and_merges(cli: Cli, slurm_cluster: int, tmp_path: Path) -> None:
    num = min(slurm_cluster, 8)
    docs = tb.job(num * RANKS_PER_NODE, {3: 1.5}, num_collectives=6)
    for node in range(1, num):  # the last node has no traces: unreachable
        folder = tmp_path / f"n{node}"
        folder.mkdir()
        for j in range(RANKS_PER_NODE):
            rank = (node - 1) * RANKS_PER_NODE + j
            (folder / f"rank{rank}.json.gz").write_bytes(tb.encode(docs[rank], gz=True))
    script = tmp_path / "dsctl-on-node"
    script.write_text(f"#!/bin/sh\nexport PYTHONPATH={ROOT}\nexec {sys.executable} -m dsctl \"$@\"\n")
    script.chmod(0o755)
    res = cli("trace", "overlap", str(tmp_path / "{node}" / "rank*.json.gz"), "--slurm", "-w", f"n[1-{num}]",
              "--dsctl", script, "--node-timeout-s", "120", "--jobs", "1", "-f", "json")
    assert res.exit_code == 1, res.stderr  # one node unreachable
    data = res.json()
    assert len(data["ranks"]) == (num - 1) * RANKS_PER_NODE
    assert {r["source"].split(":")[0] for r in data["ranks"]} == {f"n{i}" for i in range(1, num)}
    assert data["spread"]["exposed_comm_us"]["num_ranks"] == (num - 1) * RANKS_PER_NODE
    assert [u["node"] for u in data["unreachable_nodes"]] == [f"n{num}"]
    assert "no file matches" in data["unreachable_nodes"][0]["reason"], data["unreachable_nodes"]
