"""Record the small real profiler traces under tests/data/trace/ (tests never run this script).

Two ranks on the gloo backend (CPU only), each profiling three steps (``torch.profiler.schedule`` marks them
``ProfilerStep#N``) of: two matmuls, an asynchronous all_reduce of a 1 MiB "gradient" with three more matmuls
running under it (hidden communication), then a synchronous all_reduce with nothing under it (exposed). Each rank
exports a Chrome trace and the script gzips it into ``gloo_rank{r}.json.gz`` next to this file.

Run with the reference environment (torch is not a dsctl dependency)::

    python tests/data/trace/make_traces.py    # with a Python that has torch (e.g. torch==2.13.0 CPU)
"""

from __future__ import annotations

import gzip
import os
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, schedule

HERE = Path(__file__).resolve().parent
WORLD_SIZE = 2
STEPS = 3


def _work(rank: int, out_dir: str) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29517"
    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE)
    torch.manual_seed(rank)
    torch.set_num_threads(1)
    a = torch.randn(384, 384) / 20
    grad = torch.randn(256 * 1024)
    small = torch.randn(64 * 1024)
    sched = schedule(wait=0, warmup=1, active=STEPS, repeat=1)
    with profile(activities=[ProfilerActivity.CPU], schedule=sched, record_shapes=False) as prof:
        for _ in range(1 + STEPS):
            for _ in range(2):
                a = torch.tanh(a @ a)
            work = dist.all_reduce(grad, async_op=True)  # hidden: compute runs while gloo reduces
            for _ in range(3):
                a = torch.tanh(a @ a)
            work.wait()
            dist.all_reduce(small)  # exposed: nothing runs under it
            prof.step()
    path = Path(out_dir) / f"rank{rank}.json"
    prof.export_chrome_trace(str(path))
    data = path.read_bytes()
    (HERE / f"gloo_rank{rank}.json.gz").write_bytes(gzip.compress(data, mtime=0))
    dist.destroy_process_group()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_work, args=(tmp,), nprocs=WORLD_SIZE, join=True)
    for rank in range(WORLD_SIZE):
        path = HERE / f"gloo_rank{rank}.json.gz"
        print(f"{path.name}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
