"""The simulator's network: directed links built from exactly the devices and cables of a plan.json.

Indices:

- nodes 0..N-1 and switches 0..S-1 in plan.json device order; GPU ``g = node * G + local``;
  NIC endpoint ``e = node * K + nic`` (K compute NICs per node, G GPUs). GPU ``local`` uses NIC
  ``local * K // G`` (GPU i paired with NIC i on DeepSeek's nodes).
- links (directed, capacity in bytes/s): every cable gives an up link (lower tier -> upper tier) and a
  down link; every GPU has an NVLink ``out`` and ``in`` link (per-direction NVLink bandwidth).

``kind`` of a link: 0 NIC up (node -> leaf), 1 NIC down, 2 switch up, 3 switch down, 4 NVLink out, 5 NVLink in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dsctl.cluster.plan_file import CABLE_KINDS, load_plan
from dsctl.errors import InputError
from dsctl.textjson import load_json

LINK_KINDS = ("nic-up", "nic-down", "switch-up", "switch-down", "nvlink-out", "nvlink-in")
NIC_UP, NIC_DOWN, SW_UP, SW_DOWN, NVL_OUT, NVL_IN = range(6)
#: next-hop table entries (switch, leaf, link) the router may build; bounds memory on huge fabrics
MAX_NEXT_HOP_ENTRIES = 40_000_000


@dataclass(frozen=True)
class SimGraph:
    """A plan as directed links plus the endpoint maps the workloads and the router need.

    Arrays: ``link_src``/``link_dst`` int64 [L] device index (nodes then switches, as in plan.json; -1 for the
    GPU end of an NVLink link), ``link_cap`` float64 [L] bytes/s, ``link_kind`` int8 [L], ``link_plane`` int64 [L]
    (-1 for NVLink), ``link_port`` [L] label of the source port ("" for NVLink), ``link_gpu`` [L] GPU of an
    NVLink link (-1 otherwise). ``ep_leaf`` [N*K] leaf switch (device index) of each NIC endpoint or -1 when not
    cabled; ``ep_up``/``ep_down`` its links; ``ep_pos`` its position among the NICs of its leaf (port order).
    ``gpu_out``/``gpu_in`` [N*G] NVLink links. ``device_names`` / ``device_tier`` ("node", "leaf", ...)
    """

    kind: str
    num_nodes: int
    gpus_per_node: int
    nics_per_node: int
    num_planes: int
    nic_bytes_per_s: float
    nvlink_bytes_per_s: float
    device_names: list[str]
    device_tier: list[str]
    device_plane: np.ndarray
    nic_names: list[str]
    nic_plane: np.ndarray
    link_src: np.ndarray
    link_dst: np.ndarray
    link_cap: np.ndarray
    link_kind: np.ndarray
    link_plane: np.ndarray
    link_src_port: list[str]
    link_dst_port: list[str]
    link_gpu: np.ndarray
    ep_leaf: np.ndarray
    ep_up: np.ndarray
    ep_down: np.ndarray
    ep_pos: np.ndarray
    gpu_out: np.ndarray
    gpu_in: np.ndarray

    @property
    def num_gpus(self) -> int:
        return self.num_nodes * self.gpus_per_node

    @property
    def num_links(self) -> int:
        return len(self.link_cap)

    def gpu_nic(self, gpu: np.ndarray) -> np.ndarray:
        """NIC endpoint of each GPU (int64, same shape)."""
        gpu = np.asarray(gpu, dtype=np.int64)
        if self.nics_per_node == self.gpus_per_node:
            return gpu
        node, local = gpu // self.gpus_per_node, gpu % self.gpus_per_node
        return node * self.nics_per_node + local * self.nics_per_node // self.gpus_per_node

    def gpu_plane(self, gpu: np.ndarray) -> np.ndarray:
        return self.nic_plane[self.gpu_nic(gpu) % self.nics_per_node].astype(np.int64)

    def link_name(self, link: int) -> str:
        """``p0-leaf01:33 -> p0-spine01:1`` for a cable direction, ``node0001 gpu3 nvlink out`` for NVLink."""
        kind = int(self.link_kind[link])
        if kind >= NVL_OUT:
            gpu = int(self.link_gpu[link])
            node = self.device_names[gpu // self.gpus_per_node]
            return f"{node} gpu{gpu % self.gpus_per_node} nvlink {'out' if kind == NVL_OUT else 'in'}"
        src, dst = int(self.link_src[link]), int(self.link_dst[link])
        return (f"{self.device_names[src]}:{self.link_src_port[link]} -> "
                f"{self.device_names[dst]}:{self.link_dst_port[link]}")


def _spec_number(spec: dict[str, object], key: str, source: str, integer: bool) -> float:
    value = spec.get(key)
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok or not 0 < float(value) < 1e7:  # type: ignore[arg-type]
        raise InputError(f"{source}: spec.{key} must be a positive {'whole ' if integer else ''}number, "
                         f"got {value!r}", hint="regenerate it with 'dsctl topology plan --out-dir DIR'")
    return float(value)  # type: ignore[arg-type]


def build_graph(plan_text: str, source: str, nvlink_bytes_per_s: float) -> SimGraph:
    """The graph of a plan.json text (validated by ``dsctl.cluster.load_plan``); NVLink at ``nvlink_bytes_per_s``
    bytes/s per direction per GPU. InputError names the file and field on malformed input."""
    fabric = load_plan(plan_text, source)
    doc = load_json(plan_text, source)
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        raise InputError(f"{source}: spec must be an object", hint="regenerate it with 'dsctl topology plan --out-dir'")
    gpus = int(_spec_number(spec, "num_gpus_per_node", source, True))
    port_gbps = _spec_number(spec, "port_gbps", source, False)
    if not (np.isfinite(nvlink_bytes_per_s) and nvlink_bytes_per_s > 0):
        raise InputError(f"NVLink bandwidth must be a positive number of bytes/s, got {nvlink_bytes_per_s}")
    names = list(fabric.tier)
    index = {n: i for i, n in enumerate(names)}
    tiers = [fabric.tier[n] for n in names]
    node_names = [n for n in names if fabric.tier[n] == "node"]
    if names[:len(node_names)] != node_names:
        raise InputError(f"{source}: devices must list every node before the switches (as plan writes them)")
    nics = list(fabric.nic_plane)
    nic_index = {n: i for i, n in enumerate(nics)}
    num_nodes, num_nics = len(node_names), len(nics)
    if num_nodes == 0 or num_nics == 0:
        raise InputError(f"{source}: the plan has no nodes or no NICs to simulate")
    nic_plane = np.array([fabric.nic_plane[n] for n in nics], dtype=np.int64)
    planes = int(nic_plane.max()) + 1
    cab = fabric.cables
    kinds = np.array([CABLE_KINDS.index(c[1]) for c in cab], dtype=np.int64)
    a_dev = np.array([index[c[2][0]] for c in cab], dtype=np.int64)
    b_dev = np.array([index[c[3][0]] for c in cab], dtype=np.int64)
    a_port = [c[2][1] for c in cab]
    b_port = [c[3][1] for c in cab]
    plane = np.array([c[0] for c in cab], dtype=np.int64)
    nic_cap = port_gbps * 1e9 / 8
    num_cables = len(cab)
    # links 0..C-1 up (a -> b), C..2C-1 down (b -> a), then NVLink out / in per GPU
    num_gpus = num_nodes * gpus
    link_src = np.concatenate([a_dev, b_dev, np.full(2 * num_gpus, -1)])
    link_dst = np.concatenate([b_dev, a_dev, np.full(2 * num_gpus, -1)])
    node_end = kinds == 0
    up_kind = np.where(node_end, NIC_UP, SW_UP)
    down_kind = np.where(node_end, NIC_DOWN, SW_DOWN)
    link_kind = np.concatenate([up_kind, down_kind, np.full(num_gpus, NVL_OUT), np.full(num_gpus, NVL_IN)])
    link_cap = np.concatenate([np.full(2 * num_cables, nic_cap), np.full(2 * num_gpus, nvlink_bytes_per_s)])
    link_plane = np.concatenate([plane, plane, np.full(2 * num_gpus, -1)])
    link_gpu = np.concatenate([np.full(2 * num_cables, -1), np.arange(num_gpus), np.arange(num_gpus)])
    ep_leaf = np.full(num_nodes * num_nics, -1, dtype=np.int64)
    ep_up = np.full(num_nodes * num_nics, -1, dtype=np.int64)
    ep_down = np.full(num_nodes * num_nics, -1, dtype=np.int64)
    ep_port = np.zeros(num_nodes * num_nics, dtype=np.int64)
    node_cab = np.flatnonzero(node_end)
    for c in node_cab.tolist():
        if tiers[int(b_dev[c])] != "leaf":
            raise InputError(f"{source}: cables[{c}] joins node {a_port[c]} to a {tiers[int(b_dev[c])]}, not a leaf")
        ep = int(a_dev[c]) * num_nics + nic_index[a_port[c]]
        if ep_leaf[ep] >= 0:
            raise InputError(f"{source}: cables[{c}]: NIC {a_port[c]} of {names[int(a_dev[c])]} is cabled twice")
        ep_leaf[ep], ep_up[ep], ep_down[ep] = b_dev[c], c, c + num_cables
        ep_port[ep] = int(b_port[c])
    cabled = np.flatnonzero(ep_leaf >= 0)
    order = cabled[np.lexsort((ep_port[cabled], ep_leaf[cabled]))]
    ep_pos = np.zeros(len(ep_leaf), dtype=np.int64)
    if len(order):
        starts = np.r_[0, np.flatnonzero(np.diff(ep_leaf[order])) + 1]
        first = np.repeat(starts, np.diff(np.r_[starts, len(order)]))
        ep_pos[order] = np.arange(len(order)) - first
    device_plane = np.array([fabric.plane[n] for n in names], dtype=np.int64)
    return SimGraph(
        kind=fabric.kind, num_nodes=num_nodes, gpus_per_node=gpus, nics_per_node=num_nics, num_planes=planes,
        nic_bytes_per_s=nic_cap, nvlink_bytes_per_s=nvlink_bytes_per_s, device_names=names, device_tier=tiers,
        device_plane=device_plane, nic_names=nics, nic_plane=nic_plane, link_src=link_src, link_dst=link_dst,
        link_cap=link_cap, link_kind=link_kind.astype(np.int8), link_plane=link_plane,
        link_src_port=a_port + b_port + [""] * (2 * num_gpus), link_dst_port=b_port + a_port + [""] * (2 * num_gpus),
        link_gpu=link_gpu, ep_leaf=ep_leaf, ep_up=ep_up, ep_down=ep_down, ep_pos=ep_pos,
        gpu_out=2 * num_cables + np.arange(num_gpus), gpu_in=2 * num_cables + num_gpus + np.arange(num_gpus))


def failed_links(graph: SimGraph, failures: list[str], random_cables: int, seed: int) -> tuple[np.ndarray, list[str]]:
    """Links taken out by ``--fail`` (a device name, or ``DEVICE:PORT`` naming one end of a cable) and by
    ``--fail-random N`` (N distinct switch-to-switch cables, seeded). Returns (bool [L] mask, what failed)."""
    mask = np.zeros(graph.num_links, dtype=bool)
    num_cables = int(np.count_nonzero(graph.link_kind <= SW_DOWN)) // 2
    index = {n: i for i, n in enumerate(graph.device_names)}
    described: list[str] = []
    for item in failures:
        name, _, port = item.rpartition(":") if ":" in item else (item, "", "")
        if not port:
            if item not in index:
                raise InputError(f"{item!r} is not a device or DEVICE:PORT of the plan", field="fail",
                                 hint="use a switch name such as p0-spine01, or a cable end such as p0-leaf01:33")
            dev = index[item]
            mask[:2 * num_cables] |= (graph.link_src[:2 * num_cables] == dev) | (graph.link_dst[:2 * num_cables] == dev)
            described.append(f"{graph.device_tier[dev]} {item}")
            continue
        if name not in index:
            raise InputError(f"{item!r}: {name!r} is not a device of the plan", field="fail")
        dev = index[name]
        ups = np.flatnonzero(((graph.link_src[:num_cables] == dev)
                              & (np.array(graph.link_src_port[:num_cables]) == port))
                             | ((graph.link_dst[:num_cables] == dev)
                                & (np.array(graph.link_dst_port[:num_cables]) == port)))
        if not len(ups):
            raise InputError(f"{item!r}: no cable at port {port!r} of {name}", field="fail")
        mask[ups] = True
        mask[ups + num_cables] = True
        described.append(f"cable {graph.link_name(int(ups[0])).replace(' -> ', ' <-> ')}")
    if random_cables:
        switch_cables = np.flatnonzero(graph.link_kind[:num_cables] == SW_UP)
        if random_cables < 0 or random_cables > len(switch_cables):
            raise InputError(f"{random_cables} must be 0..{len(switch_cables)} "
                             "(the switch-to-switch cables of the plan)", field="fail_random")
        pick = np.sort(np.random.default_rng(seed).choice(switch_cables, size=random_cables, replace=False))
        mask[pick] = True
        mask[pick + num_cables] = True
        described += [f"cable {graph.link_name(int(c)).replace(' -> ', ' <-> ')}" for c in pick.tolist()]
    return mask, described


