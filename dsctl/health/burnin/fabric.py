"""A simulated fabric for rehearsals (``--fabric-model FILE``): the plan's links with injected faults.

Document (JSON or YAML, parsed by the command layer)::

    seed: 1            # measurement noise and flapping draws
    noise: 0.03        # each measurement x uniform(1 - noise, 1 + noise)
    repeats: 5         # exchanges per pair per round
    faults:
      - nic: node0147:mlx5_3          # a NIC (or its cable) at a fraction of its rate
        rate: 0.5
        direction: both               # send | recv | both (default)
      - cable: p3-leaf04:33           # a cable by either end DEVICE:PORT
        rate: 0.4
        direction: up                 # up (towards the spine) | down | both (default)
        flap: 0.5                     # slow in this fraction of the repeats only (a flapping link)
      - node: node0012                # every NIC of a node
        rate: 0.6
      - gpu: node0003:gpu2            # a GPU's NVLink
        rate: 0.5

Measured rate of a flow in one repeat = its max-min rate on the faulted capacities x the noise factor; a round
reports per flow the median and the minimum over the repeats (as the probe does).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dsctl.errors import InputError
from dsctl.health.burnin.design import Round, solve_rates
from dsctl.health.burnin.judge import Measured
from dsctl.health.burnin.locate import num_cables
from dsctl.names import ascii_digits
from dsctl.topology.sim.graph import SimGraph

FAULT_KINDS = ("nic", "cable", "node", "gpu")
MAX_REPEATS = 100


@dataclass(frozen=True)
class FabricModel:
    """``factor`` float64 [L] steady capacity factor per link; ``flaps``: (links, factor, fraction of repeats);
    ``noise`` relative half-width; ``repeats`` per pair; ``faults`` what was injected (for the report)."""

    factor: np.ndarray
    flaps: tuple[tuple[np.ndarray, float, float], ...]
    noise: float
    repeats: int
    seed: int
    faults: tuple[str, ...]


def _number(item: dict[str, object], key: str, where: str, low: float, high: float, default: float) -> float:
    value = item.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= float(value) <= high:
        raise InputError(f"{where}.{key} must be a number from {low:g} to {high:g}, got {value!r}")
    return float(value)


def _fault_links(graph: SimGraph, kind: str, name: str, direction: str, where: str) -> np.ndarray:
    num_c = num_cables(graph)
    nodes = {n: i for i, n in enumerate(graph.device_names[:graph.num_nodes])}
    if kind == "node":
        if name not in nodes:
            raise InputError(f"{where}.node {name!r} is not a node of the plan")
        eps = nodes[name] * graph.nics_per_node + np.arange(graph.nics_per_node)
        eps = eps[graph.ep_leaf[eps] >= 0]
        return np.r_[graph.ep_up[eps], graph.ep_down[eps]]
    if kind == "gpu":
        node, _, gpu = name.rpartition(":gpu")
        if node not in nodes or not ascii_digits(gpu) or int(gpu) >= graph.gpus_per_node:
            raise InputError(f"{where}.gpu {name!r} must be NODE:gpuN with N < {graph.gpus_per_node}")
        g = nodes[node] * graph.gpus_per_node + int(gpu)
        return np.array([graph.gpu_out[g], graph.gpu_in[g]])
    device, _, port = name.rpartition(":")
    src_port = np.array(graph.link_src_port[:num_c])
    dst_port = np.array(graph.link_dst_port[:num_c])
    index = {n: i for i, n in enumerate(graph.device_names)}
    if device not in index:
        raise InputError(f"{where}.{kind} {name!r}: {device!r} is not a device of the plan",
                         hint="name one end of a cable as DEVICE:PORT, e.g. p0-leaf01:33 or node0001:mlx5_0")
    dev = index[device]
    hit = np.flatnonzero(((graph.link_src[:num_c] == dev) & (src_port == port))
                         | ((graph.link_dst[:num_c] == dev) & (dst_port == port)))
    if not len(hit):
        raise InputError(f"{where}.{kind} {name!r}: no cable at port {port!r} of {device}")
    c = int(hit[0])
    up, down = [c], [c + num_c]
    if direction in ("up", "send"):
        return np.array(up)
    if direction in ("down", "recv"):
        return np.array(down)
    return np.array(up + down)


def parse_fabric_model(doc: object, graph: SimGraph, source: str) -> FabricModel:
    """A :class:`FabricModel` from a parsed document (module docstring); InputError names the field."""
    if not isinstance(doc, dict):
        raise InputError(f"{source}: expected an object with 'faults' (and optionally seed, noise, repeats)")
    unknown = sorted(set(map(str, doc)) - {"seed", "noise", "repeats", "faults"})
    if unknown:
        raise InputError(f"{source}: unknown key(s) {', '.join(unknown)}; use seed, noise, repeats, faults")
    noise = _number(doc, "noise", source, 0.0, 0.5, 0.0)
    repeats = int(_number(doc, "repeats", source, 1, MAX_REPEATS, 5))
    seed = int(_number(doc, "seed", source, 0, 2 ** 31, 0))
    faults = doc.get("faults", [])
    if not isinstance(faults, list):
        raise InputError(f"{source}: faults must be a list")
    factor = np.ones(graph.num_links)
    flaps = []
    described = []
    for i, item in enumerate(faults):
        where = f"{source}: faults[{i}]"
        if not isinstance(item, dict):
            raise InputError(f"{where} must be an object such as {{nic: node0001:mlx5_0, rate: 0.5}}")
        kinds = [k for k in FAULT_KINDS if k in item]
        if len(kinds) != 1 or not isinstance(item[kinds[0]], str):
            raise InputError(f"{where} needs exactly one of nic, cable, node, gpu (a name)")
        kind = kinds[0]
        direction = str(item.get("direction", "both"))
        if direction not in ("both", "up", "down", "send", "recv"):
            raise InputError(f"{where}.direction {direction!r}: use both, up, down, send or recv")
        rate = _number(item, "rate", where, 0.01, 1.0, 0.5)
        flap = _number(item, "flap", where, 0.0, 1.0, 0.0)
        links = _fault_links(graph, kind, str(item[kind]), direction, where)
        if flap > 0:
            flaps.append((links, rate, flap))
        else:
            factor[links] *= rate
        described.append(f"{kind} {item[kind]} at {rate:.0%}" + (f", flapping {flap:.0%}" if flap else ""))
    return FabricModel(factor, tuple(flaps), noise, repeats, seed, tuple(described))


def healthy(graph: SimGraph, noise: float = 0.0, seed: int = 0, repeats: int = 5) -> FabricModel:
    """A fabric without faults (noise only)."""
    return FabricModel(np.ones(graph.num_links), (), noise, repeats, seed, ())


def measure(graph: SimGraph, model: FabricModel, rnd: Round, index: int) -> Measured:
    """Simulated measurement of one round (``index`` seeds its draws): median and min over the repeats."""
    rng = np.random.default_rng([model.seed, index])
    base = graph.link_cap * model.factor
    steady = solve_rates(graph, rnd.routes, base)
    samples = np.empty((model.repeats, rnd.num_flows))
    touched = np.zeros(graph.num_links, dtype=bool)
    touched[rnd.routes[rnd.routes >= 0]] = True
    live_flaps = [(links, f, p) for links, f, p in model.flaps if touched[links].any()]
    slow_rep = {k: rng.random(model.repeats) < p for k, (_, _, p) in enumerate(live_flaps)}
    for k in slow_rep:  # a flapping link shows in at least one repeat of a round that uses it
        if not slow_rep[k].any():
            slow_rep[k][int(rng.integers(model.repeats))] = True
    for rep in range(model.repeats):
        active = [(links, f) for k, (links, f, _) in enumerate(live_flaps) if slow_rep[k][rep]]
        if active:
            cap = base.copy()
            for links, f in active:
                cap[links] *= f
            rates = solve_rates(graph, rnd.routes, cap)
        else:
            rates = steady
        samples[rep] = rates * rng.uniform(1 - model.noise, 1 + model.noise, rnd.num_flows)
    return Measured(np.median(samples, axis=0), samples.min(axis=0), np.ones(rnd.num_flows, dtype=bool))
