"""The exchange itself (imports torch): one process per rank of this node, pairwise send/receive, timed."""

from __future__ import annotations

import multiprocessing
import os
import statistics
import time
from datetime import timedelta
from typing import Any


def rank_env(spec: dict[str, Any], rank: int) -> dict[str, str]:
    """Environment of one rank: NCCL pinned to the rank's NIC and GPU (``NCCL_IB_HCA``, ``CUDA_VISIBLE_DEVICES``)."""
    _, nic, gpu = spec["ranks"][rank]
    env = {}
    if spec["backend"] == "nccl":
        if nic:
            env["NCCL_IB_HCA"] = f"={nic}"  # exact match: mlx5_1 must not also select mlx5_10
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    return env


def exchange(spec: dict[str, Any], rank: int, master: str) -> dict[str, Any]:
    """Join the round's process group as ``rank``, exchange with the partner, return the received flow's times."""
    import torch
    import torch.distributed as dist

    backend = spec["backend"]
    world = len(spec["ranks"])
    partner = {}
    for a, b in spec["pairs"]:
        partner[a], partner[b] = b, a
    dist.init_process_group(backend, init_method=f"tcp://{master}:{spec['port']}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=float(spec.get("timeout_s", 300))))
    device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
    count = max(1, spec["bytes"] // 4)
    send = torch.ones(count, dtype=torch.float32, device=device)
    recv = torch.empty(count, dtype=torch.float32, device=device)
    peer = partner.get(rank)
    ping = torch.ones(1, dtype=torch.float32, device=device)
    pong = torch.empty(1, dtype=torch.float32, device=device)
    times = []
    try:
        for rep in range(spec["repeats"] + 1):  # the first exchange is a warm-up (connections, buffers)
            dist.barrier()
            if peer is not None:
                # the pair starts together: a partner that left the barrier early (its release reached us late,
                # queued behind its data on a slow link) may not start its transfer before we are ready to time it
                _handshake(dist, ping, pong, peer)
            start = time.perf_counter()
            if peer is not None:
                if backend == "nccl":
                    ops = [dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.irecv, recv, peer)]
                    for req in dist.batch_isend_irecv(ops):
                        req.wait()
                    torch.cuda.synchronize()
                    took = time.perf_counter() - start
                else:
                    took = _one_way(dist, send, recv, rank, peer, ping, pong)
                if rep:
                    times.append(took)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return {"rank": rank, "peer": peer, "times_s": times}


def _one_way(dist: Any, send: Any, recv: Any, rank: int, peer: int, ping: Any, pong: Any) -> float:
    """gloo: one direction at a time (the lower rank sends first, then the higher), each after a handshake; the
    seconds until this rank's own receive completed. gloo moves a pair's two directions over one socket and
    sometimes serialises them, so a simultaneous exchange measured one direction at half its rate at random."""
    took = 0.0
    for sender in sorted((rank, peer)):
        if sender != sorted((rank, peer))[0]:
            _handshake(dist, ping, pong, peer)
        start = time.perf_counter()
        if sender == rank:
            dist.send(send, peer)
        else:
            dist.recv(recv, peer)
            took = time.perf_counter() - start
    return took


def _handshake(dist: Any, ping: Any, pong: Any, peer: int) -> None:
    """Exchange one float with the partner and wait for both: the pair's clocks start within one latency."""
    if dist.get_backend() == "nccl":
        for req in dist.batch_isend_irecv([dist.P2POp(dist.isend, ping, peer), dist.P2POp(dist.irecv, pong, peer)]):
            req.wait()
        return
    sent = dist.isend(ping, peer)
    got = dist.irecv(pong, peer)
    for req in (got, sent):
        if req is not None:
            req.wait()


def _child(spec: dict[str, Any], rank: int, master: str, queue: Any) -> None:
    os.environ.update(rank_env(spec, rank))
    try:
        queue.put(exchange(spec, rank, master))
    except Exception as exc:
        queue.put({"rank": rank, "error": f"{type(exc).__name__}: {exc}"[:300]})


def run_node(spec: dict[str, Any], node: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Run this node's ranks; (flows received here, errors)."""
    names = spec["nodes"]
    mine = [r for r, (n, _, _) in enumerate(spec["ranks"]) if 0 <= n < len(names) and names[n] == node]
    if not mine:
        return [], [f"no rank of this round runs on {node}"]
    # the rendezvous is rank 0's node, by name: a fixed $MASTER_ADDR would name a host that a follow-up round
    # (a few suspects and proven-good nodes) may not contain
    master = names[spec["ranks"][0][0]]
    results = []
    if len(mine) == 1:
        os.environ.update(rank_env(spec, mine[0]))
        try:
            results.append(exchange(spec, mine[0], master))
        except Exception as exc:
            results.append({"rank": mine[0], "error": f"{type(exc).__name__}: {exc}"[:300]})
    else:
        ctx = multiprocessing.get_context("spawn")
        queue = ctx.Queue()
        procs = [ctx.Process(target=_child, args=(spec, r, master, queue)) for r in mine]
        for p in procs:
            p.start()
        results = [queue.get() for _ in procs]
        for p in procs:
            p.join()
    flows, errors = [], []
    for res in sorted(results, key=lambda r: r["rank"]):
        if "error" in res:
            errors.append(f"rank {res['rank']}: {res['error']}")
            continue
        if res["peer"] is None or not res["times_s"]:
            continue
        gbps = [spec["bytes"] * 8 / t / 1e9 for t in res["times_s"]]
        flows.append({"src": res["peer"], "dst": res["rank"], "median_gbps": statistics.median(gbps),
                      "min_gbps": min(gbps), "repeats": len(gbps)})
    return flows, errors
