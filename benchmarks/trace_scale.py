"""Scale targets of ``dsctl trace`` on synthetic traces written to a scratch folder (never into the repository).

    python -m benchmarks.trace_scale                      # the issue's sizes: 1 GB, 100 MB, 512 x 20 MB
    python -m benchmarks.trace_scale --big-mb 256 --ranks 64   # smaller, for a loaded machine

Each case runs ``dsctl trace overlap`` as a child process (the console entry point, as a user would) and reports
wall time, MB/s and the peak RSS of the largest process (``ru_maxrss`` of the children: the pool's workers are
waited for by dsctl, so they count). Targets (issue 11): 1 GB trace under 400 MB peak RSS; 100 MB in under 5 s;
512 rank files of 20 MB each at 60 MB/s or more in aggregate on 2 cores. The rank files are ``--distinct``
generated files hard-linked under 512 names (the parse, not the disk, is the cost being measured).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_NAMES = ["sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "void flash::compute_attn_ws<128>(int)",
          "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int)",
          "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgs4K)",
          "void deep_ep::internode::dispatch<false, 8, true, 8>(int4*, float*)",
          "void deep_ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*, float*)"]


def write_trace(path: Path, target_bytes: int, rank: int = 0, seed: int = 1) -> int:
    """A Kineto-like trace of about ``target_bytes``: kernels on 3 streams, each with its launch, 10 steps."""
    import random
    rng = random.Random(seed)
    per_pair = 560  # bytes of one kernel + its launch event, about
    num = max(10, target_bytes // per_pair)
    span = num * 12.0
    with path.open("w") as out:
        out.write(f'{{"schemaVersion": 1, "distributedInfo": {{"backend": "nccl", "rank": {rank}, "world_size": '
                  f'512}},\n"traceEvents": [\n')
        for n in range(10):
            out.write(f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{n}", "pid": 1, "tid": 1, '
                      f'"ts": {n * span / 10 - 10:.3f}, "dur": {span / 10:.3f}, "args": {{}}}},\n')
        for i in range(num):
            k = rng.randrange(6)
            stream = 20 if k >= 3 else 7 + (i & 1)
            t = i * 12.0 + rng.random() * 5
            d = 2.0 + rng.random() * 38
            out.write(f'{{"ph": "X", "cat": "kernel", "name": "{_NAMES[k]}", "pid": 0, "tid": {stream}, '
                      f'"ts": {t:.3f}, "dur": {d:.3f}, "args": {{"External id": {i}, "queued": 0, "device": 0, '
                      f'"context": 1, "stream": {stream}, "correlation": {i}, "registers per thread": 32, '
                      f'"grid": [132, 1, 1], "block": [128, 1, 1]}}}},\n')
            out.write(f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, '
                      f'"ts": {t - 3.0:.3f}, "dur": 2.0, "args": {{"External id": {i}, "cbid": 211, '
                      f'"correlation": {i}}}}}{"," if i < num - 1 else ""}\n')
        out.write("]}\n")
    return path.stat().st_size


def run_dsctl(args: list[str]) -> tuple[float, float, float, int, str]:
    """Wall seconds, CPU seconds (user + system of dsctl and its workers), peak RSS in MB of the largest child so
    far, exit status and the stderr tail. On a shared machine wall time follows the load; CPU time does not."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "dsctl", "trace", "overlap", *args, "--format", "json"],
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu, after.ru_maxrss / 1024, done.returncode, done.stderr[-300:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.trace_scale", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--big-mb", type=int, default=1024, help="size of the big trace (RSS target)")
    parser.add_argument("--mid-mb", type=int, default=100, help="size of the timed trace (5 s target)")
    parser.add_argument("--ranks", type=int, default=512, help="number of rank files")
    parser.add_argument("--rank-mb", type=int, default=20, help="size of each rank file")
    parser.add_argument("--distinct", type=int, default=8, help="distinct rank files (the rest are hard links)")
    parser.add_argument("--jobs", type=int, default=2, help="--jobs for the many-ranks case")
    parser.add_argument("--dir", default=None, help="scratch folder (default: a new one in /tmp, removed after)")
    args = parser.parse_args(argv)
    scratch = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="dsctl-trace-bench-"))
    scratch.mkdir(parents=True, exist_ok=True)
    print(f"{'case':<40} {'MB':>6} {'wall_s':>7} {'cpu_s':>7} {'MB/s':>6} {'MB/cpu_s':>8} {'rss_MB':>7} "
          f"{'target':>12} ok", flush=True)
    failures = 0
    try:
        for label, mb, target_rss, target_s in (("one big trace", args.big_mb, 400.0, None),
                                                ("one mid trace", args.mid_mb, None, 5.0)):
            path = scratch / f"{label.split()[1]}.json"
            size = write_trace(path, mb * 1024 * 1024)
            wall, cpu, rss, code, err = run_dsctl([str(path)])
            ok = code == 0 and (target_rss is None or rss < target_rss) and (target_s is None or wall < target_s)
            target = f"rss<{target_rss:g}MB" if target_rss else f"<{target_s:g}s"
            print(f"{label:<40} {size / 1e6:>6.0f} {wall:>7.2f} {cpu:>7.2f} {size / 1e6 / wall:>6.1f} "
                  f"{size / 1e6 / cpu:>8.1f} {rss:>7.0f} {target:>12} {'yes' if ok else 'NO ' + err}", flush=True)
            failures += not ok
            path.unlink()
        ranks = scratch / "ranks"
        ranks.mkdir(exist_ok=True)
        sources = [ranks / f"src{i}.json" for i in range(min(args.distinct, args.ranks))]
        for i, src in enumerate(sources):
            write_trace(src, args.rank_mb * 1024 * 1024, rank=i, seed=i + 2)
        total = 0
        for r in range(args.ranks):
            dst = ranks / f"rank{r}.pt.trace.json"
            os.link(sources[r % len(sources)], dst)
            total += dst.stat().st_size
        for src in sources:
            src.unlink()
        wall, cpu, rss, code, err = run_dsctl([str(ranks / "rank*.pt.trace.json"), "--jobs", str(args.jobs)])
        rate = total / 1e6 / wall
        ok = code == 0 and rate >= 60.0
        print(f"{f'{args.ranks} ranks x {args.rank_mb} MB, --jobs {args.jobs}':<40} {total / 1e6:>6.0f} "
              f"{wall:>7.2f} {cpu:>7.2f} {rate:>6.1f} {total / 1e6 / cpu:>8.1f} {rss:>7.0f} {'>=60MB/s':>12} "
              f"{'yes' if ok else 'NO ' + err}", flush=True)
        failures += not ok
    finally:
        if not args.dir:
            shutil.rmtree(scratch, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
