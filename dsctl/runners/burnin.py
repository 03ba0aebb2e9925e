"""Real burn-in rounds through Slurm: one ``srun`` step per round over the round's nodes (the fleet runner:
hostlists, timeouts, unreachable nodes, no shared file system), each node running ``python -m dsctl.probe``.

The round travels in the probe's argv as JSON (``dsctl.probe.__main__`` documents it): the node of every rank,
its NIC (``NCCL_IB_HCA``) and GPU, the pairs. A node that does not answer leaves its flows unmeasured (judged
as nothing went through). The rendezvous is rank 0's node name (the first node of the round), which every
node of the round must resolve to an address the others reach.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from dsctl.errors import InputError
from dsctl.health.burnin.api import Measure
from dsctl.health.burnin.design import Round
from dsctl.health.burnin.judge import Measured
from dsctl.topology.sim.graph import SimGraph

#: ports for the rendezvous: a random base per run, one port per round
PORT_LOW, PORT_SPAN = 20000, 20000


@dataclass(frozen=True)
class ProbeOptions:
    """How rounds run for real: transport, bytes per exchange, repeats, per-round limit, Slurm partition, the
    Python on the nodes (or a wrapper that execs it), extra srun arguments."""

    backend: str = "nccl"
    size_bytes: int = 256 << 20
    repeats: int = 5
    timeout_s: float = 300.0
    partition: str | None = None
    python: str = "python3"
    launch_timeout_s: float = 60.0
    extra_srun_args: tuple[str, ...] = ()


def round_spec(graph: SimGraph, rnd: Round, options: ProbeOptions, port: int
               ) -> tuple[dict[str, object], list[str], np.ndarray]:
    """(probe spec, the round's node names in rank order, endpoint of each rank) for one round."""
    ends = np.unique(np.r_[rnd.src, rnd.dst])
    per_node = graph.gpus_per_node if rnd.kind == "nvlink" else graph.nics_per_node
    node_of = ends // per_node
    order = np.lexsort((ends, node_of))
    ends, node_of = ends[order], node_of[order]
    node_ids, node_index = np.unique(node_of, return_inverse=True)
    names = [graph.device_names[int(n)] for n in node_ids]
    ranks = []
    for e, n in zip(ends.tolist(), node_index.tolist(), strict=True):
        local = e % per_node
        if rnd.kind == "nvlink":
            ranks.append([n, "", local])
        else:
            ranks.append([n, graph.nic_names[local], local * graph.gpus_per_node // graph.nics_per_node])
    rank_of = {int(e): r for r, e in enumerate(ends.tolist())}
    pairs = sorted({tuple(sorted((rank_of[int(a)], rank_of[int(b)])))
                    for a, b in zip(rnd.src.tolist(), rnd.dst.tolist(), strict=True)})
    spec = {"nodes": names, "ranks": ranks, "pairs": [list(p) for p in pairs], "bytes": options.size_bytes,
            "repeats": options.repeats, "backend": options.backend, "port": port, "timeout_s": options.timeout_s}
    return spec, names, ends


def measured_from(rnd: Round, ends: np.ndarray, documents: Sequence[dict[str, object] | None]) -> Measured:
    """Per-flow median/min from the nodes' probe documents (flows the probes did not report: not answered)."""
    index = {(int(s), int(d)): f for f, (s, d) in enumerate(zip(rnd.src.tolist(), rnd.dst.tolist(), strict=True))}
    median = np.zeros(rnd.num_flows)
    low = np.zeros(rnd.num_flows)
    answered = np.zeros(rnd.num_flows, dtype=bool)
    for doc in documents:
        flows = doc.get("flows") if isinstance(doc, dict) else None
        if not isinstance(flows, list):
            continue
        for flow in flows:
            try:
                src, dst = int(ends[int(flow["src"])]), int(ends[int(flow["dst"])])
                med, mn = float(flow["median_gbps"]), float(flow["min_gbps"])
            except (KeyError, TypeError, ValueError, IndexError):
                continue
            f = index.get((src, dst))
            if f is not None and np.isfinite(med) and np.isfinite(mn):
                median[f], low[f], answered[f] = med, mn, True
    return Measured(median, low, answered)


def slurm_measure(options: ProbeOptions) -> Callable[[SimGraph], Measure]:
    """The measuring function of real runs (one srun step per round), built once the plan's graph is known."""
    from dsctl.runners.fleet import run_on_nodes

    if options.backend not in ("gloo", "nccl"):
        raise InputError(f"--backend {options.backend!r}: use gloo or nccl")
    base = PORT_LOW + secrets.randbelow(PORT_SPAN)

    def factory(graph: SimGraph) -> Measure:
        def measure(rnd: Round, index: int) -> Measured:
            spec, names, ends = round_spec(graph, rnd, options, PORT_LOW + (base + index) % PORT_SPAN)
            command = [options.python, "-m", "dsctl.probe", "--round", json.dumps(spec, separators=(",", ":"))]
            run = run_on_nodes(names, command, timeout_s=options.timeout_s,
                               launch_timeout_s=options.launch_timeout_s, partition=options.partition,
                               ok_exit_codes=(0,), job_name="dsctl-burnin", extra_srun_args=options.extra_srun_args)
            return measured_from(rnd, ends, [a.document for a in run.answers])
        return measure
    return factory
