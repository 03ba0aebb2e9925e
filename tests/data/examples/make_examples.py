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

Inputs the docs pages read (each page's worked example, so that every documented line runs as written):

* ``stats.json``: the 2 x 12 statistics of DeepSeek's EPLB README (docs/eplb.md).
* ``week1.npy``, ``week2.npy``: 58 x 256 Zipf(1.0) token counts and the same with a 10 % per-expert drift
  (docs/eplb-balanced.md).
* ``faults128.yaml``: a burn-in fault model of the 128-node plan: one NIC and one spine cable slow (docs/burn-in.md).
* ``my-profiles/``: five profiles, two of them invalid, for ``dsctl profiles validate`` (docs/profiles.md).
* ``two_nodes_down/``: 3FS ``admin_cli`` output with two nodes down (docs/storage.md).
* ``gloo/rank0.json.gz``, ``gloo/rank1.json.gz``: a real two-rank torch/gloo trace (tests/data/trace, docs/trace.md).
* ``records/nic_wrong_numa.yaml``, ``records/nvlink_link_down.yaml``: recorded nodes with one fault each
  (tests/data/health, docs/health.md).
* ``miswired.txt``: ``ibnetdiscover`` output of the 10-node plan with planted miswirings (docs/topology.md).
* ``ep/ep_serial.json.gz``, ``ep/ep_overlapped.json.gz``: expert-parallel steps run serially and DualPipe-style
  (tests/trace_builder.py, docs/trace.md).
* ``perf/all_reduce_h100_2nodes.txt``: an ``all_reduce_perf -b 8 -e 8G -f 2 -g 1`` report of two 8-GPU H100 nodes
  written here in nccl-tests' layout (rank lines, 31 sizes, footer; its first line says it is not a recording):
  the real reports of tests/data/health/real are test data only, their sources grant no licence to ship them.
  ``perf/ib_write_bw_mlx5_0.txt`` and ``perf/ib_write_bw_mlx5_3.txt``: ``ib_write_bw`` reports written here in
  perftest 24.07's default layout (MiB/sec, a CPU-frequency warning among the rows), one NIC at line rate and one
  at half of it, not recordings (docs/health.md).
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


README_STATS = """[[90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
 [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27]]
"""

FAULTS128_YAML = """seed: 3
noise: 0.03
faults:
  - nic: node0017:mlx5_3
    rate: 0.5
  - cable: p2-spine01:9
    rate: 0.4
"""

#: two invalid profiles (and three valid ones) for docs/profiles.md's validation example
BAD_MODEL_YAML = """name: my
description: a small MoE model with two mistakes (num_heads, hidden_size missing)
num_layers: 27
num_dense_layers: 1
vocab_size: 102400
dense_intermediate_size: 10944
attention:
  kind: mla
  num_heads: many
  q_lora_rank: 0
  kv_lora_rank: 512
  qk_nope_head_dim: 128
  qk_rope_head_dim: 64
  v_head_dim: 128
moe:
  num_routed_experts: 64
  num_shared_experts: 2
  num_experts_per_token: 6
  moe_intermediate_size: 1408
"""
BAD_NODE_YAML = """name: x
description: a node profile with two mistakes
gpu:
  model: NVIDIA H800 SXM5
  count: eight
  hbm: 80 GiB
  bf16_dense_tflops: 989
  fp8_dense_tflops: 1979
nvlink:
  bandwidth: 400 GB/s
  links_per_gpu: 8
  lanes: 8
compute_nics:
  count: 8
  model: ConnectX-7
  rate: 400 Gb/s
  link_layer: infiniband
storage_nics:
  count: 1
  rate: 400 Gb/s
  link_layer: ethernet
"""


#: recorded fault nodes the docs replay (tests/data/health: one injected fault each)
RECORDS = ("nic_wrong_numa", "nvlink_link_down")


def weeks() -> tuple[np.ndarray, np.ndarray]:
    """Two weeks of 58 x 256 token counts: Zipf(1.0) over a random permutation of the experts per layer, then
    the same with each expert's count drifting by a normal 10 %."""
    rng = np.random.default_rng(11)
    zipf = 1.0 / np.arange(1, NUM_EXPERTS + 1)
    week1 = np.stack([rng.permutation(zipf) for _ in range(NUM_LAYERS)]) * 1_000_000
    week2 = week1 * np.clip(rng.normal(1.0, 0.1, week1.shape), 0.5, 1.5)
    return np.rint(week1).astype(np.int32), np.rint(week2).astype(np.int32)


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
    docs_inputs(out)


PERFTEST_REPORT = """\
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF\t\tDevice         : {device}
 Number of qps   : 1\t\tTransport type : IB
 Connection type : RC\t\tUsing SRQ      : OFF
 PCIe relax order: ON\t\tLock-free      : OFF
 ibv_wr* API     : ON\t\tUsing Enhanced Reorder      : OFF
 TX depth        : 128
 CQ Moderation   : 1
 CQE Poll Batch  : Dynamic
 Mtu             : 4096[B]
 Link type       : IB
 Max inline data : 0[B]
 rdma_cm QPs\t : OFF
 Data ex. method : Ethernet
---------------------------------------------------------------------------------------
 local address: LID {local} QPN 0x004a PSN 0xbe352e RKey 0x1fff00 VAddr 0x007e6f4ed11000
 remote address: LID {remote} QPN 0x0049 PSN 0x4601da RKey 0x1fff00 VAddr 0x007778e64eb000
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]
Conflicting CPU frequency values detected: 3295.212000 != 4999.302000. CPU Frequency is not max.
{row}
---------------------------------------------------------------------------------------
"""


def perftest_report(device: str, local: str, remote: str, average_mib: float) -> str:
    """An ``ib_write_bw`` client report in perftest 24.07's layout (REPORT_FMT of src/perftest_parameters.h)."""
    size, iterations = 65536, 5000
    rate_mpps = average_mib * 2 ** 20 / size / 1e6
    row = f" {size:<7d}    {iterations:<10d}       {average_mib * 1.0004:<7.2f}            {average_mib:<7.2f}" \
          f"\t\t     {rate_mpps:<7.6f}"
    return PERFTEST_REPORT.format(device=device, local=local, remote=remote, row=row)


#: the made-up all_reduce run: two HGX H100 nodes, the bus ids of an HGX H100 board, NCCL's latency at 8 bytes
#: (us) and the algbw it approaches at the largest sizes (bytes/s: busbw 181 x 15/8 = 339 GB/s, 96 % of 8 NICs x
#: 44 GB/s)
NCCL_HOSTS = ("h100-n01", "h100-n02")
NCCL_BUS_IDS = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")
NCCL_LATENCY_US, NCCL_ALGBW = 28.0, 181e9
NCCL_HEADER = """\
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)"""


def nccl_time(time_us: float) -> str:
    """nccl-tests' time column: 2 decimals below 100 us, 1 below 10 ms, none above."""
    return f"{time_us:.2f}" if time_us < 100 else f"{time_us:.1f}" if time_us < 10_000 else f"{time_us:.0f}"


def all_reduce_report() -> str:
    """An ``all_reduce_perf`` report of 2 nodes x 8 H100 in nccl-tests 2.13's layout (writeDeviceReport,
    writeResultHeader, the row format of src/common.cu), not a recording: time = latency + size / algbw, plus a
    little less speed at middle sizes where fewer channels carry the message; in-place 0.3 % slower."""
    ranks = 2 * 8
    factor = 2 * (ranks - 1) / ranks
    lines = ["# dsctl example written by tests/data/examples/make_examples.py in nccl-tests' layout: not a recording",
             "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 "
             "agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    for rank in range(ranks):
        host, device = NCCL_HOSTS[rank // 8], rank % 8
        lines.append(f"#  Rank {rank:2d} Group  0 Pid {4100 + rank:6d} on {host:>8s} device {device:2d} "
                     f"[0000:{NCCL_BUS_IDS[device]}:00] NVIDIA H100 80GB HBM3")
    lines += ["NCCL version 2.21.5+cuda12.4", "#", NCCL_HEADER]
    busbws = []
    for k in range(31):
        size = 8 << k
        cells = []
        for slower in (1.0, 1.003):
            time_us = slower * (NCCL_LATENCY_US + size / NCCL_ALGBW * 1e6 * (1 + 4e6 / (size + 4e7)))
            algbw = size / (time_us * 1e-6) / 1e9
            busbws.append(algbw * factor)
            cells.append(f"  {nccl_time(time_us):>7s}  {algbw:6.2f}  {algbw * factor:6.2f}  {0:5d}")
        lines.append(f"{size:12d}  {size // 4:12d}  {'float':>8s}  {'sum':>6s}  {-1:6d}" + "".join(cells))
    lines += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {sum(busbws) / len(busbws):g} ", "#", ""]
    return "\n".join(lines)


def perf_inputs(out: Path) -> None:
    (out / "perf").mkdir()
    (out / "perf" / "all_reduce_h100_2nodes.txt").write_text(all_reduce_report(), encoding="utf-8")
    (out / "perf" / "ib_write_bw_mlx5_0.txt").write_text(perftest_report("mlx5_0", "0x11", "0x21", 46711.87),
                                                         encoding="utf-8")
    (out / "perf" / "ib_write_bw_mlx5_3.txt").write_text(perftest_report("mlx5_3", "0x14", "0x24", 21874.52),
                                                         encoding="utf-8")


def docs_inputs(out: Path) -> None:
    """The inputs of the docs pages' worked examples (see the module docstring)."""
    (out / "stats.json").write_text(README_STATS, encoding="utf-8")
    week1, week2 = weeks()
    np.save(out / "week1.npy", week1)
    np.save(out / "week2.npy", week2)
    (out / "faults128.yaml").write_text(FAULTS128_YAML, encoding="utf-8")
    profiles = out / "my-profiles"
    (profiles / "models").mkdir(parents=True)
    (profiles / "nodes").mkdir()
    for kind, name in (("models", "deepseek-v3"), ("models", "deepseek-v2-lite"), ("nodes", "h800-hgx")):
        shutil.copyfile(ROOT / "profiles" / kind / f"{name}.yaml", profiles / kind / f"{name}.yaml")
    (profiles / "models" / "my.yaml").write_text(BAD_MODEL_YAML, encoding="utf-8")
    (profiles / "nodes" / "x.yaml").write_text(BAD_NODE_YAML, encoding="utf-8")
    (out / "two_nodes_down").mkdir()
    for name in ("list-chains.txt", "list-targets.txt"):
        shutil.copyfile(ROOT / "tests" / "data" / "storage" / "doctor" / "two_nodes_down" / name,
                        out / "two_nodes_down" / name)
    (out / "gloo").mkdir()
    for rank in (0, 1):
        shutil.copyfile(ROOT / "tests" / "data" / "trace" / f"gloo_rank{rank}.json.gz", out / "gloo" /
                        f"rank{rank}.json.gz")
    (out / "records").mkdir()
    for name in RECORDS:
        shutil.copyfile(ROOT / "tests" / "data" / "health" / f"{name}.yaml", out / "records" / f"{name}.yaml")
    shutil.copyfile(ROOT / "tests" / "data" / "topology" / "miswired.ibnet", out / "miswired.txt")
    (out / "ep").mkdir()
    (out / "ep" / "ep_serial.json.gz").write_bytes(tb.encode(tb.ep_step(False, rank=0), gz=True))
    (out / "ep" / "ep_overlapped.json.gz").write_bytes(tb.encode(tb.ep_step(True, rank=1), gz=True))
    perf_inputs(out)


if __name__ == "__main__":
    main()
