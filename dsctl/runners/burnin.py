"""Real burn-in rounds through Slurm: one ``srun`` step per round over the round's nodes (the fleet runner:
hostlists, timeouts, unreachable nodes, no shared file system), each node running ``python -m dsctl.probe``.

The round travels to the probe as JSON on srun's standard input (``--input=all``; ``dsctl.probe.__main__``
documents it), never in argv, whose 128 KiB per-string limit a round of 768 nodes passed: the node of every rank,
its NIC (``NCCL_IB_HCA``) and GPU, the pairs. Each node's answer counts only for the flows it received. A node
that does not answer leaves its flows unmeasured (judged as nothing went through). The rendezvous is rank 0's
node name (the first node of the round), which every node of the round must resolve to an address the others
reach.
"""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dsctl.errors import InputError
from dsctl.health.burnin.api import Measure
from dsctl.health.burnin.design import Round
from dsctl.health.burnin.judge import Measured
from dsctl.names import shown
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


def _flow_number(value: object) -> float | None:
    """A finite non-negative rate, else None (JSON's Infinity and NaN included; a bool is not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def _bad_answer(rnd: Round, node: str, where: str, value: object, expected: str) -> InputError:
    return InputError(f"burn-in round {rnd.name}: node {node} answered {where} = {shown(value)}; expected "
                      f"{expected}", hint=f"check dsctl.probe on {node} (its answer is not one dsctl's probe writes)")


def measured_from(rnd: Round, ends: np.ndarray, spec: dict[str, Any],
                  answers: Sequence[tuple[str, dict[str, Any] | None]]) -> Measured:
    """Per-flow median/min from the nodes' probe documents; a flow no node reported stays not answered.

    ``answers``: (node, document or None) per node of the round. A node's answer counts only for the flows that
    node *received* (the flow's ``dst`` rank runs on it, as ``spec`` places the ranks): a node cannot report, or
    overwrite, another node's flows. The first report of a flow is kept. A flow entry that is not an object, a
    ``src``/``dst`` that is not a rank of the round, or a rate that is not a finite non-negative number
    (``Infinity``, ``NaN``) is InputError naming the node and the field."""
    index = {(int(s), int(d)): f for f, (s, d) in enumerate(zip(rnd.src.tolist(), rnd.dst.tolist(), strict=True))}
    node_of_rank = [int(r[0]) for r in spec["ranks"]]
    node_index = {name: i for i, name in enumerate(spec["nodes"])}
    num_ranks = len(node_of_rank)
    median = np.zeros(rnd.num_flows)
    low = np.zeros(rnd.num_flows)
    answered = np.zeros(rnd.num_flows, dtype=bool)
    for node, doc in answers:
        flows = doc.get("flows") if isinstance(doc, dict) else None
        if flows is None:
            continue
        if not isinstance(flows, list):
            raise _bad_answer(rnd, node, "flows", flows, "a list of flows")
        here = node_index.get(node, -1)
        for i, flow in enumerate(flows):
            if not isinstance(flow, dict):
                raise _bad_answer(rnd, node, f"flows[{i}]", flow, "an object")
            rank = {}
            for key in ("src", "dst"):
                value = flow.get(key)
                if type(value) is not int or not 0 <= value < num_ranks:
                    raise _bad_answer(rnd, node, f"flows[{i}].{key}", value, f"a rank 0..{num_ranks - 1}")
                rank[key] = value
            rates = []
            for key in ("median_gbps", "min_gbps"):
                number = _flow_number(flow.get(key))
                if number is None:
                    raise _bad_answer(rnd, node, f"flows[{i}].{key}", flow.get(key), "a finite number >= 0 (Gb/s)")
                rates.append(number)
            if node_of_rank[rank["dst"]] != here:
                continue  # not received on this node: only the receiving node measures a flow
            f = index.get((int(ends[rank["src"]]), int(ends[rank["dst"]])))
            if f is not None and not answered[f]:
                median[f], low[f], answered[f] = rates[0], rates[1], True
    return Measured(median, low, answered)


def slurm_measure(options: ProbeOptions) -> Callable[[SimGraph], Measure]:
    """The measuring function of real runs (one srun step per round), built once the plan's graph is known."""
    from dsctl.runners.fleet import run_on_nodes

    if options.backend not in ("gloo", "nccl"):
        raise InputError(f"--transport {options.backend!r}: use gloo or nccl")
    base = PORT_LOW + secrets.randbelow(PORT_SPAN)

    def factory(graph: SimGraph) -> Measure:
        def measure(rnd: Round, index: int) -> Measured:
            spec, names, ends = round_spec(graph, rnd, options, PORT_LOW + (base + index) % PORT_SPAN)
            # the spec travels on standard input: at 768 nodes it passed Linux's 128 KiB limit on one argv string
            command = [options.python, "-m", "dsctl.probe", "--round", "-"]
            run = run_on_nodes(names, command, timeout_s=options.timeout_s,
                               launch_timeout_s=options.launch_timeout_s, partition=options.partition,
                               ok_exit_codes=(0,), job_name="dsctl-burnin", extra_srun_args=options.extra_srun_args,
                               stdin_text=json.dumps(spec, separators=(",", ":")))
            return measured_from(rnd, ends, spec, [(a.node, a.document) for a in run.answers])
        return measure
    return factory
