"""Localisation: from slow flows to the one NIC, cable, node or GPU that explains them.

Every flow's path is the list of directed links the simulator routed it over. A *good* flow proves each link of
its path; a link on a slow (or flaky) flow's path that no good flow proved is a *suspect*. Plan objects own links:

- NIC ``node0147:mlx5_3``: its up and down link (the NIC and its cable to the leaf are in series on every path,
  so traffic cannot tell them apart: the finding says so);
- cable ``p3-leaf04:33 <-> p3-spine02:5``: both directions of a switch-to-switch cable;
- node ``node0147``: every NIC link of the node (eligible only when more than half of its NICs are suspects);
- GPU ``node0147:gpu3``: its NVLink out and in links.

Findings are a greedy minimum hitting set: repeatedly take the object whose suspect links lie on the most
still-unexplained slow flows (ties broken towards the smaller object: NIC/cable/GPU before node); objects still
tied form one ambiguous finding, which a follow-up round tests one by one against proven-good partners.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dsctl.health.burnin.design import Round
from dsctl.health.burnin.judge import Judgement
from dsctl.topology.sim.graph import NIC_DOWN, NIC_UP, NVL_IN, NVL_OUT, SW_DOWN, SW_UP, SimGraph

_RANK = {"nic": 0, "cable": 0, "gpu": 0, "node": 1}


@dataclass(frozen=True)
class Evidence:
    """One slow or flaky flow: round name, ``src -> dst`` names, measured median/min and expected Gb/s."""

    round: str
    flow: str
    measured_gbps: float
    min_gbps: float
    expected_gbps: float
    flaky: bool


@dataclass(frozen=True)
class FaultFinding:
    """A localised fault: ``kind`` nic|cable|node|gpu|ambiguous|unplaced (a slow report that names no plan node),
    ``subject`` the plan object's name (for an
    ambiguous finding the candidates joined by `` | ``), ``node`` the node to drain (empty for a cable)."""

    kind: str
    subject: str
    node: str
    ratio: float
    flapping: bool
    note: str
    evidence: tuple[Evidence, ...] = field(default_factory=tuple)
    candidates: tuple[str, ...] = ()


@dataclass(frozen=True)
class Obj:
    kind: str
    key: int

    def links(self, graph: SimGraph) -> list[int]:
        if self.kind == "nic":
            return [int(graph.ep_up[self.key]), int(graph.ep_down[self.key])]
        if self.kind == "cable":
            return [self.key, self.key + num_cables(graph)]
        if self.kind == "gpu":
            return [int(graph.gpu_out[self.key]), int(graph.gpu_in[self.key])]
        eps = self.key * graph.nics_per_node + np.arange(graph.nics_per_node)
        eps = eps[graph.ep_leaf[eps] >= 0]
        return [int(x) for x in np.r_[graph.ep_up[eps], graph.ep_down[eps]]]


def num_cables(graph: SimGraph) -> int:
    return int(np.count_nonzero(graph.link_kind <= SW_DOWN)) // 2


def nic_name(graph: SimGraph, ep: int) -> str:
    node, nic = divmod(int(ep), graph.nics_per_node)
    return f"{graph.device_names[node]}:{graph.nic_names[nic]}"


def object_name(graph: SimGraph, obj: Obj) -> str:
    if obj.kind == "nic":
        return nic_name(graph, obj.key)
    if obj.kind == "cable":
        return graph.link_name(obj.key).replace(" -> ", " <-> ")
    if obj.kind == "gpu":
        node, local = divmod(obj.key, graph.gpus_per_node)
        return f"{graph.device_names[node]}:gpu{local}"
    return graph.device_names[obj.key]


def object_node(graph: SimGraph, obj: Obj) -> str:
    if obj.kind == "nic":
        return graph.device_names[obj.key // graph.nics_per_node]
    if obj.kind == "gpu":
        return graph.device_names[obj.key // graph.gpus_per_node]
    return graph.device_names[obj.key] if obj.kind == "node" else ""


def owner(graph: SimGraph, link: int) -> Obj:
    """The smallest object owning a directed link."""
    kind = int(graph.link_kind[link])
    if kind in (NIC_UP, NIC_DOWN):
        c = link % num_cables(graph)
        node = int(graph.link_src[c])
        return Obj("nic", node * graph.nics_per_node + graph.nic_names.index(graph.link_src_port[c]))
    if kind in (SW_UP, SW_DOWN):
        return Obj("cable", link % num_cables(graph))
    if kind in (NVL_OUT, NVL_IN):
        return Obj("gpu", int(graph.link_gpu[link]))
    raise ValueError(f"link {link} has no owner")


def flow_name(graph: SimGraph, rnd: Round, f: int) -> str:
    if rnd.kind == "nvlink":
        return f"{object_name(graph, Obj('gpu', int(rnd.src[f])))} -> gpu{int(rnd.dst[f]) % graph.gpus_per_node}"
    return f"{nic_name(graph, int(rnd.src[f]))} -> {nic_name(graph, int(rnd.dst[f]))}"


def proven_links(graph: SimGraph, rounds: list[Round], verdicts: list[Judgement]) -> np.ndarray:
    """bool [L]: links on the path of at least one good flow."""
    proven = np.zeros(graph.num_links, dtype=bool)
    for rnd, ver in zip(rounds, verdicts, strict=True):
        paths = rnd.routes[ver.good]
        proven[paths[paths >= 0]] = True
    return proven


def _candidates(graph: SimGraph, suspects: list[set[int]]) -> dict[Obj, set[int]]:
    """object -> indices of the slow flows its suspect links explain."""
    explains: dict[Obj, set[int]] = {}
    node_nics: dict[int, set[int]] = {}
    for i, links in enumerate(suspects):
        for link in links:
            obj = owner(graph, link)
            explains.setdefault(obj, set()).add(i)
            if obj.kind == "nic":
                node = obj.key // graph.nics_per_node
                node_nics.setdefault(node, set()).add(obj.key)
                explains.setdefault(Obj("node", node), set()).add(i)
    for node, nics in node_nics.items():
        if len(nics) * 2 <= graph.nics_per_node or len(nics) < 2:
            explains.pop(Obj("node", node), None)
    return explains


def locate(graph: SimGraph, rounds: list[Round], verdicts: list[Judgement]
           ) -> tuple[list[FaultFinding], list[list[Obj]]]:
    """Findings that explain every slow or flaky flow of the rounds (module docstring), and the groups of
    objects still tied (ambiguous findings) for a follow-up round to separate."""
    proven = proven_links(graph, rounds, verdicts)
    flows: list[tuple[Round, Judgement, int]] = []
    suspects: list[set[int]] = []
    for rnd, ver in zip(rounds, verdicts, strict=True):
        for f in np.flatnonzero(ver.slow | ver.flaky).tolist():
            path = rnd.routes[f]
            flows.append((rnd, ver, f))
            suspects.append({int(x) for x in path[path >= 0] if not proven[x]})
    explains = _candidates(graph, suspects)
    todo = set(range(len(flows)))
    findings: list[FaultFinding] = []
    groups: list[list[Obj]] = []
    unexplained = {i for i in todo if not suspects[i]}
    todo -= unexplained
    while todo:
        score = {obj: len(s & todo) for obj, s in explains.items()}
        best = max(score.values(), default=0)
        if best == 0:
            break
        top = [o for o, v in score.items() if v == best]
        rank = min(_RANK[o.kind] for o in top)
        top = sorted((o for o in top if _RANK[o.kind] == rank), key=lambda o: (o.kind, o.key))
        mine = explains[top[0]] & todo
        top = [o for o in top if explains[o] & todo == mine]  # tied only if they explain the same flows
        covered = mine
        evidence = tuple(_evidence(graph, flows[i]) for i in sorted(covered))
        findings.append(_finding(graph, top, evidence))
        if len(top) > 1:
            groups.append(top)
        todo -= covered
    if unexplained:
        evidence = tuple(_evidence(graph, flows[i]) for i in sorted(unexplained))
        findings.append(FaultFinding("ambiguous", "unexplained slow flows", "", _ratio(evidence), False,
                                "every link of these flows was proven good in another flow: a flapping link "
                                "or measurement noise; rerun with more repeats", evidence))
    return findings, groups


def _ratio(evidence: tuple[Evidence, ...]) -> float:
    return float(np.median([e.measured_gbps / e.expected_gbps if e.expected_gbps else 0.0 for e in evidence]))


def _evidence(graph: SimGraph, item: tuple[Round, Judgement, int]) -> Evidence:
    rnd, ver, f = item
    return Evidence(rnd.name, flow_name(graph, rnd, f), float(ver.ratio[f] * rnd.expected_gbps[f]),
                    float(ver.ratio_min[f] * rnd.expected_gbps[f]), float(rnd.expected_gbps[f]),
                    bool(ver.flaky[f]))


def _finding(graph: SimGraph, top: list[Obj], evidence: tuple[Evidence, ...]) -> FaultFinding:
    flapping = all(e.flaky for e in evidence)
    names = tuple(object_name(graph, o) for o in top)
    if len(top) > 1:
        return FaultFinding("ambiguous", " | ".join(names), "", _ratio(evidence), flapping,
                       f"{len(top)} objects explain the same slow flows", evidence, names)
    obj = top[0]
    note = {"nic": "the NIC or its cable to the leaf (in series on every path)",
            "cable": "both directions of this switch-to-switch cable are suspect",
            "node": "more than half of the node's NICs are slow: host side (PCIe, CPU, memory)",
            "gpu": "the GPU's NVLink"}[obj.kind]
    if obj.kind == "nic":
        up = int(graph.ep_up[obj.key])
        note += f" {graph.link_name(up).split(' -> ')[1]}"
    return FaultFinding(obj.kind, names[0], object_node(graph, obj), _ratio(evidence), flapping, note, evidence, names)
