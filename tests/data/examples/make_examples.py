"""Write the example inputs that ship in the wheel (dsctl/_example_data/, copied out by ``dsctl examples DIR``):
``python tests/data/examples/make_examples.py``. Deterministic: tests/cli/test_examples_cli.py checks that the
shipped files are exactly what this writes.

* ``stats/day1.npy`` ... ``stats/day6.npy``, ``today.npy``: EPLB routing statistics of seven consecutive days, 58 MoE
  layers x 256 experts (DeepSeek-V3), tokens per expert. Each layer has its own log-normal expert popularity that
  drifts slowly (a log-normal random walk per expert), so consecutive days correlate as real routing statistics do
  and a plan made on past days still balances ``today.npy``.
* ``fabric.txt``: ``ibnetdiscover`` output of the fabric ``dsctl topology plan --nodes 10 --radix 8`` plans
  (tests/data/topology/perfect.ibnet, written by tests/data/topology/make_fixtures.py).
* ``list-chains.txt``, ``list-targets.txt``: 3FS ``admin_cli list-chains`` / ``list-targets`` output of a cluster
  with one node down (tests/data/storage/doctor/node_down).
* ``node.yaml``: a recorded healthy HGX H800 node (tests/data/health/hgx_h800_healthy.yaml).
* ``traces/rank0.json.gz`` ... ``rank7.json.gz``: PyTorch profiler (Kineto) traces of an 8-rank data-parallel job,
  six ProfilerStep#N of five all-reduces each, rank 5 computing 30 % slower.
* ``job/ranks.csv``: that job's rank map (one node of 8 GPUs, data parallel), as ``dsctl launch --out`` writes it.
* ``faults.yaml``: a fault model for ``dsctl health burn-in --fabric-model`` on the 10-node plan: one NIC at half rate.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "dsctl" / "_example_data"
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import trace_builder as tb  # noqa: E402

COLLECTIVES_PER_STEP = 5


NUM_LAYERS, NUM_EXPERTS = 58, 256
#: days of statistics: stats/day1..day6.npy, then today.npy
NUM_DAYS = 7
#: tokens routed per layer per day (each token picks 8 experts)
TOKENS_PER_DAY = 2_000_000 * 8
#: spread of each layer's expert popularity (std of its log: the hottest expert gets ~6x the mean), and the
#: day-to-day drift (std of the change of log popularity per day)
POPULARITY_SIGMA, DRIFT_PER_DAY = 0.8, 0.08


def stats_days() -> list[np.ndarray]:
    """``NUM_DAYS`` arrays (layers x experts, int32 token counts): a per-layer log-normal popularity, a log-normal
    random walk of each expert's popularity from day to day, and Poisson counting noise."""
    rng = np.random.default_rng(2026)
    log_pop = rng.normal(0.0, POPULARITY_SIGMA, (NUM_LAYERS, NUM_EXPERTS))
    days = []
    for _ in range(NUM_DAYS):
        share = np.exp(log_pop)
        share /= share.sum(axis=1, keepdims=True)
        days.append(rng.poisson(share * TOKENS_PER_DAY).astype(np.int32))
        log_pop = log_pop + rng.normal(0.0, DRIFT_PER_DAY, log_pop.shape)
    return days


def traces() -> list[dict]:
    docs = tb.job(8, {5: 1.3}, num_collectives=6 * COLLECTIVES_PER_STEP, seed=7)
    for doc in docs:
        kernels = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
        steps = []
        for number in range(len(kernels) // (2 * COLLECTIVES_PER_STEP)):
            part = kernels[number * 2 * COLLECTIVES_PER_STEP:(number + 1) * 2 * COLLECTIVES_PER_STEP]
            start, end = part[0]["ts"], max(e["ts"] + e["dur"] for e in part)
            steps.append(tb.step(number + 1, start, round(end - start, 3)))
        doc["traceEvents"] += steps
    return docs


FAULTS_YAML = """# dsctl health burn-in --fabric-model: rehearse the burn-in of the 10-node plan with one injected fault
seed: 1
noise: 0.03
repeats: 5
faults:
  - nic: node0004:mlx5_2
    rate: 0.5
"""


def rank_map() -> str:
    from dsctl.launch.layout import ParallelLayout
    from dsctl.launch.rankmap import build_rank_map

    return build_rank_map(ParallelLayout(num_nodes=1, gpus_per_node=8, pp=1, ep=8, tp=1, dp=8,
                                         schedule="1f1b")).to_csv()


def main(out: Path = OUT) -> None:
    if out.exists():
        shutil.rmtree(out)
    (out / "stats").mkdir(parents=True)
    *past, today = stats_days()
    for day, counts in enumerate(past, start=1):
        np.save(out / "stats" / f"day{day}.npy", counts)
    np.save(out / "today.npy", today)
    shutil.copyfile(ROOT / "tests" / "data" / "topology" / "perfect.ibnet", out / "fabric.txt")
    for name in ("list-chains.txt", "list-targets.txt"):
        shutil.copyfile(ROOT / "tests" / "data" / "storage" / "doctor" / "node_down" / name, out / name)
    shutil.copyfile(ROOT / "tests" / "data" / "health" / "hgx_h800_healthy.yaml", out / "node.yaml")
    (out / "traces").mkdir()
    for rank, doc in enumerate(traces()):
        (out / "traces" / f"rank{rank}.json.gz").write_bytes(tb.encode(doc, gz=True))
    (out / "job").mkdir()
    (out / "job" / "ranks.csv").write_text(rank_map(), encoding="utf-8")
    (out / "faults.yaml").write_text(FAULTS_YAML, encoding="utf-8")


if __name__ == "__main__":
    main()
