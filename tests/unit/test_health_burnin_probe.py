"""The burn-in probe's contract without Slurm: its spec, exit 3 without torch, and the runner's mapping of ranks to
NIC endpoints and back (a real gloo exchange of four local ranks runs in test_probe_exchanges_over_gloo)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dsctl.health.burnin.design import design
from dsctl.probe.__main__ import main, parse_spec
from dsctl.runners.burnin import ProbeOptions, measured_from, round_spec
from tests.unit.burnin_plans import graph_and_hops

ROOT = Path(__file__).resolve().parents[2]


def spec(**over: object) -> dict[str, object]:
    base: dict[str, object] = {"nodes": ["a", "b"], "ranks": [[0, "mlx5_0", 0], [1, "mlx5_0", 0]],
                               "pairs": [[0, 1]], "bytes": 1 << 20, "repeats": 2, "backend": "gloo", "port": 29500}
    base.update(over)
    return base


@pytest.mark.parametrize(("over", "message"), [({"backend": "mpi"}, "backend"), ({"pairs": [[0, 5]]}, "pair"),
                                              ({"bytes": 0}, "bytes"), ({"nodes": "a"}, "nodes")])
def test_bad_spec_is_one_line(over: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_spec(json.dumps(spec(**over)))


def test_exit_3_with_a_clear_message_without_torch(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    assert main(["--round", json.dumps(spec())]) == 3
    assert "dsctl.probe needs torch" in capsys.readouterr().err


def test_rank_table_pins_each_rank_to_its_nic_and_gpu_and_results_map_back() -> None:
    graph, hops = graph_and_hops("mpft", 16)
    rnd = design(graph, hops).rounds[0]
    got, names, ends = round_spec(graph, rnd, ProbeOptions(backend="nccl"), 29600)
    assert names == [f"node{i:04d}" for i in range(1, 17)]
    assert len(got["ranks"]) == 128 and got["ranks"][3] == [0, "mlx5_3", 3]  # type: ignore[index]
    assert len(got["pairs"]) == 64  # type: ignore[arg-type]
    rank_of = {int(e): r for r, e in enumerate(ends.tolist())}
    flows = [{"src": rank_of[int(s)], "dst": rank_of[int(d)], "median_gbps": 390.0, "min_gbps": 380.0}
             for s, d in zip(rnd.src.tolist(), rnd.dst.tolist(), strict=True)][1:]
    node_of = [r[0] for r in got["ranks"]]  # type: ignore[union-attr]
    answers = [(name, {"flows": [f for f in flows if node_of[f["dst"]] == i]}) for i, name in enumerate(names)]
    measured = measured_from(rnd, ends, got, [*answers, ("node0099", None)])
    assert not measured.answered[0] and measured.answered[1:].all()
    assert np.all(measured.median_gbps[1:] == 390.0)


def free_port() -> int:
    """A TCP port nothing listens on now: a port derived from the pid collided with the emulated Slurm's daemons."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_probe_exchanges_over_gloo(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    four = spec(nodes=["localhost", "b", "c", "d"], ranks=[[i, "mlx5_0", 0] for i in range(4)], pairs=[[0, 2], [1, 3]],
                port=free_port(), timeout_s=60.0)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # rank 0 runs on "localhost": the rendezvous
    procs = [subprocess.Popen([sys.executable, "-m", "dsctl.probe", "--round", json.dumps(four), "--node", n],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for n in four["nodes"]]
    try:
        outs = [p.communicate(timeout=150) for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [err[-400:] for _, err in outs]
    docs = [json.loads(out) for out, _ in outs]
    flows = {(f["src"], f["dst"]): f for d in docs for f in d["flows"]}
    assert set(flows) == {(2, 0), (0, 2), (3, 1), (1, 3)}
    assert all(f["median_gbps"] >= f["min_gbps"] > 0 and f["repeats"] == 2 for f in flows.values())
