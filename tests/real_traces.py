"""Record real multi-rank torch.profiler traces of small gloo jobs (CPU only), for the trace tests.

One ``torch.multiprocessing.spawn`` of :data:`MAX_WORLD` processes runs every job of :data:`JOBS` in turn (torch
is imported once per process): each job is a fresh gloo process group of ``world_size`` ranks on 127.0.0.1 that
profiles ``ACTIVE`` steps (``schedule(wait=1, warmup=1, active=ACTIVE)``) of matmuls followed by all_reduce,
all_gather, broadcast, all_to_all and a barrier; the job's slow rank sleeps :data:`SLEEP_S` before each step's
collectives (``slow="sleep"``) or does three times the matmuls (``slow="compute"``). Ranks outside a smaller job
wait for the next one. Exporters: ``export_chrome_trace`` to ``rank{r}.json`` / ``rank{r}.json.gz`` (torch gzips
when the name ends in .gz) or ``tensorboard_trace_handler`` (``<worker>.<time>.pt.trace.json[.gz]``, no rank in
the name). Run directly to write the jobs under a folder: ``python tests/real_traces.py OUT``.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

MAX_WORLD = 8
ACTIVE = 3
SLEEP_S = 0.1


@dataclass(frozen=True)
class Job:
    name: str
    world_size: int
    slow_rank: int
    slow: str  # "sleep" or "compute"
    exporter: str  # "chrome" (export_chrome_trace to rank{r}.json) or "tensorboard" (tensorboard_trace_handler)
    gzip: bool
    #: side of the square matrices multiplied 4 times per step (x3 on a compute straggler)
    matrix: int


JOBS = (
    Job("w8-sleep", 8, 5, "sleep", "chrome", False, 160),
    Job("w4-compute", 4, 2, "compute", "tensorboard", True, 400),
)


def _run_job(rank: int, job: Job, port: int, out: Path) -> None:
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=job.world_size)
    world = job.world_size
    a = torch.randn(job.matrix, job.matrix) / job.matrix**0.5
    grad = torch.randn(128 * 1024)
    part = torch.randn(16 * 1024)
    gathered = [torch.empty_like(part) for _ in range(world)]
    a2a_in, a2a_out = torch.randn(world * 4096), torch.empty(world * 4096)
    rounds = 3 if (job.slow == "compute" and rank == job.slow_rank) else 1
    folder = out / job.name
    folder.mkdir(parents=True, exist_ok=True)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=ACTIVE)) as prof:
        for _ in range(2 + ACTIVE):
            for _ in range(4 * rounds):
                a = torch.tanh(a @ a)
            if job.slow == "sleep" and rank == job.slow_rank:
                time.sleep(SLEEP_S)
            dist.all_reduce(grad)
            dist.all_gather(gathered, part)
            dist.broadcast(part, src=0)
            dist.all_to_all_single(a2a_out, a2a_in)
            dist.barrier()
            prof.step()
    if job.exporter == "chrome":
        prof.export_chrome_trace(str(folder / (f"rank{rank}.json" + (".gz" if job.gzip else ""))))
    else:
        tensorboard_trace_handler(str(folder), worker_name=f"worker{rank}", use_gzip=job.gzip)(prof)
    if rank == 0:
        print(f"{job.name}: {time.perf_counter() - T0:.1f} s", file=sys.stderr)
    dist.destroy_process_group()


T0 = time.perf_counter()


def _worker(rank: int, out: str, ports: list[int]) -> None:
    import torch
    torch.set_num_threads(1)
    for i, job in enumerate(JOBS):
        if rank < job.world_size:
            _run_job(rank, job, ports[i], Path(out))


def _free_ports(count: int) -> list[int]:
    """Ports the kernel says are free now (bound to port 0 together, then released): a fixed or pid-derived port
    can collide with an ephemeral port already in use (EADDRINUSE)."""
    import socket

    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def generate(out: Path, base_port: int | None = None) -> dict[str, Path]:
    """Run every job of :data:`JOBS`; returns ``{job name: folder of its traces}``."""
    import torch
    import torch._inductor.config
    import torch.distributed
    import torch.multiprocessing as mp
    import torch.profiler  # noqa: F401

    ports = [base_port + i for i in range(len(JOBS))] if base_port else _free_ports(len(JOBS))
    # fork: the children share the parent's imported torch (importing it 8 times costs tens of CPU seconds)
    mp.start_processes(_worker, args=(str(out), ports), nprocs=MAX_WORLD, join=True, start_method="fork")
    return {job.name: out / job.name for job in JOBS}


if __name__ == "__main__":
    started = time.perf_counter()
    for name, path in generate(Path(sys.argv[1])).items():
        files = sorted(f for f in path.rglob("*") if f.is_file())
        print(f"{name}: {len(files)} files, {sum(f.stat().st_size for f in files):,} bytes")
    print(f"{time.perf_counter() - started:.1f} s")
