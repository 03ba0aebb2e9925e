"""3FS cluster sizing (reference sheet section 4).

**These formulas are the sheet's model, derived from the 3FS design (CRAQ: write-all, read-any), not
formulas published by 3FS.** All rates are bytes per second; ``eff`` is one efficiency factor applied
to every resource (the published 180-node read test ran at ~81% of storage NIC line rate).

- usable capacity  = (targets used / targets) * raw * fill / replication
- read ceiling     = min(sum SSD read, sum storage NIC, sum client NIC) * eff      (every replica serves reads)
- write ceiling    = min(sum SSD write / r, sum storage NIC ingress / r, sum client NIC) * eff
  (each client byte is written on ``r`` SSDs and enters ``r`` storage NICs)
- degraded read    = with one node down its read share moves to its chain peers; each survivor takes
  ``1/(v-1)`` more (perfectly balanced chain table), so the storage-side ceiling is
  ``per-node ceiling * v / (1 + 1/(v-1))``, client side unchanged.
- checkpoint time  = checkpoint bytes / write ceiling.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from dsctl.errors import InputError
from dsctl.profiles.schema import ModelProfile, NodeProfile, StorageProfile

MAX_NODES = 100_000


@dataclass(frozen=True)
class SizingInputs:
    """Operator inputs (bytes, bytes/s, seconds)."""

    num_nodes: int
    replication: int = 3
    targets_per_ssd: int | None = None
    num_clients: int | None = None
    client_nic_bytes_per_s: float = 0.0  # per client node, all storage NICs together
    fill: float = 0.95
    efficiency: float = 0.81
    dataset_bytes: float | None = None
    checkpoint_bytes: float | None = None
    checkpoint_budget_s: float | None = None
    read_per_client_bytes_per_s: float | None = None
    read_bytes_per_s: float | None = None  # aggregate read the cluster must serve
    write_bytes_per_s: float | None = None  # aggregate client write the cluster must absorb
    recovery_bytes_per_s: float | None = None  # rebuild rate after losing a node (default: one node's ingest)


@dataclass(frozen=True)
class Ceiling:
    """An aggregate rate and the resource that binds it."""

    bytes_per_s: float
    bound_by: str
    candidates: dict[str, float]


@dataclass(frozen=True)
class Target:
    """One stated target and whether this cluster meets it."""

    name: str
    required: float
    available: float
    unit: str
    met: bool
    min_nodes: int | None


@dataclass(frozen=True)
class NodeLoss:
    """Cost of losing one storage node: capacity, degraded read and the rebuild of its replicas.

    ``data_bytes`` = stored data (the dataset, else the usable capacity) * replication / nodes: the replicas
    the node held. ``rebuild_s`` = data_bytes / recovery rate (copies stream from its chain peers, spread
    evenly by a balanced table, into replacement targets).
    """

    raw_capacity_bytes: float
    usable_capacity_bytes: float
    data_bytes: float
    degraded_read_bytes_per_s: float
    read_loss_fraction: float
    recovery_bytes_per_s: float
    recovery_bound_by: str
    rebuild_s: float


@dataclass(frozen=True)
class SizingResult:
    profile: str
    num_nodes: int
    replication: int
    targets_per_ssd: int
    num_chains: int
    unused_targets: int
    efficiency: float
    fill: float
    num_clients: int | None
    raw_capacity_bytes: float
    usable_capacity_bytes: float
    read: Ceiling
    write: Ceiling
    degraded_read: Ceiling
    per_node_read_bytes_per_s: float
    per_node_write_bytes_per_s: float
    targets: list[Target]
    min_nodes_for_targets: int | None
    notes: list[str]
    num_ssds: int = 0
    one_node_loss: NodeLoss | None = None
    smallest_for: str | None = None  # set when --nodes was left out: the need that decided the node count
    exit_code: int = field(default=0, metadata={"output": False})


def client_nic_bytes_per_s(node: NodeProfile) -> float:
    """All storage NICs of one client node together, bytes per second."""
    return node.num_storage_nics * node.storage_nic_gbps * 1e9 / 8


MAX_AUTO_TARGETS_PER_SSD = 99  # two digits of a target id


def auto_targets_per_ssd(num_nodes: int, replication: int, minimum: int = 1) -> int:
    """The upstream tool's automatic r: smallest r >= minimum with v*r divisible by k and r(k-1) >= v-1.

    Above 99 (a target id has two digits for it; upstream asserts r < 100) the largest r <= 99 with v*r
    divisible by k is used instead (then not every node pair can share a chain).
    """
    r = max(1, minimum)
    while (num_nodes * r) % replication or r * (replication - 1) < num_nodes - 1:
        r += 1
    if r > MAX_AUTO_TARGETS_PER_SSD:
        r = MAX_AUTO_TARGETS_PER_SSD
        while r > 1 and (num_nodes * r) % replication:
            r -= 1
    return r


def _validate(p: StorageProfile, s: SizingInputs) -> None:
    if not 2 <= s.num_nodes <= MAX_NODES:
        raise InputError(f"{s.num_nodes} must be 2..{MAX_NODES} (3FS replication needs 2 storage nodes)",
                         field="nodes")
    if s.replication < 2 or s.replication > s.num_nodes:
        raise InputError(f"{s.replication} must be 2..{{nodes}} ({s.num_nodes}): a chain needs at "
                         "least two replicas, each on a distinct node", field="replication", mentions=("nodes",))
    if s.targets_per_ssd is not None and not 1 <= s.targets_per_ssd <= 99:
        raise InputError(f"{s.targets_per_ssd} must be 1..99", field="targets_per_ssd")
    if s.num_clients is not None and not 1 <= s.num_clients <= 10_000_000:
        raise InputError(f"{s.num_clients} must be 1..10,000,000", field="clients")
    if not 0 < s.fill <= 1:
        raise InputError(f"{s.fill} must be in (0, 1]; 3FS refuses new chunks at 0.98", field="fill")
    if not 0 < s.efficiency <= 1:
        raise InputError(f"{s.efficiency} must be in (0, 1]", field="efficiency")
    if (s.checkpoint_bytes is None) != (s.checkpoint_budget_s is None):
        raise InputError("(or {checkpoint_model}) and {checkpoint_time_s} go together; give both or neither",
                         field="checkpoint", mentions=("checkpoint_model", "checkpoint_time_s"))
    for name, rate in (("read", s.read_bytes_per_s), ("write", s.write_bytes_per_s),
                       ("recovery_rate", s.recovery_bytes_per_s)):
        if rate is not None and not 0 < rate < 1e18:
            raise InputError("must be a positive rate below 1 EB/s", field=name)
    if s.checkpoint_budget_s is not None and not 0 < s.checkpoint_budget_s < 1e9:
        raise InputError(f"{s.checkpoint_budget_s} must be a positive number of seconds", field="checkpoint_time_s")
    if s.read_per_client_bytes_per_s is not None and s.num_clients is None:
        raise InputError("needs {clients} (how many client nodes read at that rate)", field="read_per_client",
                         mentions=("clients",))
    if p.num_ssds < 1 or p.ssd_capacity_bytes <= 0:
        raise InputError(f"storage profile {p.name} has no SSD capacity")


def _ceiling(candidates: dict[str, float]) -> Ceiling:
    name = min(candidates, key=lambda key: candidates[key])
    return Ceiling(candidates[name], name, candidates)


def size(p: StorageProfile, s: SizingInputs) -> SizingResult:
    """Capacity, read/write ceilings and target checks for ``s.num_nodes`` nodes of profile ``p``."""
    _validate(p, s)
    v, k, eff = s.num_nodes, s.replication, s.efficiency
    r = s.targets_per_ssd if s.targets_per_ssd is not None else auto_targets_per_ssd(v, k)
    unused = ((v * r) % k) * p.num_ssds
    total_targets = v * r * p.num_ssds
    raw = float(v * p.raw_capacity_bytes)
    usable = raw * (total_targets - unused) / total_targets * s.fill / k
    nic_bytes_per_s = p.num_nics * p.nic_gbps * 1e9 / 8
    node_read = min(p.num_ssds * p.ssd_read_bytes_per_s, nic_bytes_per_s) * eff
    node_write = min(p.num_ssds * p.ssd_write_bytes_per_s, nic_bytes_per_s) * eff / k
    client_total = (s.num_clients * s.client_nic_bytes_per_s * eff) if s.num_clients else None
    read_c = {"ssd": v * p.num_ssds * p.ssd_read_bytes_per_s * eff, "storage_nic": v * nic_bytes_per_s * eff}
    write_c = {"ssd": v * p.num_ssds * p.ssd_write_bytes_per_s * eff / k, "storage_nic": v * nic_bytes_per_s * eff / k}
    redirect = 1 + 1 / (v - 1)
    degraded_c = {"ssd": read_c["ssd"] / redirect, "storage_nic": read_c["storage_nic"] / redirect}
    if client_total is not None:
        read_c["client_nic"] = write_c["client_nic"] = degraded_c["client_nic"] = client_total
    read, write, degraded = _ceiling(read_c), _ceiling(write_c), _ceiling(degraded_c)
    notes = ["formulas are the reference sheet's model (CRAQ write-all/read-any), not published by 3FS",
             f"efficiency {eff:g} applied to SSD, storage NIC and client NIC rates"]
    if unused:
        notes.append(f"{unused} target slots unused: nodes x targets-per-ssd ({v}x{r}) is not a multiple of "
                     f"replication {k}")
    targets = _targets(p, s, read, write, usable, node_read, node_write, client_total)
    loss = _one_node_loss(p, s, usable, read, degraded, node_write * k)
    return SizingResult(
        profile=p.name, num_nodes=v, replication=k, targets_per_ssd=r,
        num_chains=(v * r // k) * p.num_ssds, unused_targets=unused, efficiency=eff, fill=s.fill,
        num_clients=s.num_clients, raw_capacity_bytes=raw, usable_capacity_bytes=usable, read=read, write=write,
        degraded_read=degraded, per_node_read_bytes_per_s=node_read, per_node_write_bytes_per_s=node_write,
        targets=targets, min_nodes_for_targets=max((t.min_nodes for t in targets if t.min_nodes), default=None),
        notes=notes, num_ssds=v * p.num_ssds, one_node_loss=loss, exit_code=0 if all(t.met for t in targets) else 1,
    )


def _one_node_loss(p: StorageProfile, s: SizingInputs, usable: float, read: Ceiling, degraded: Ceiling,
                   node_ingest: float) -> NodeLoss:
    """See ``NodeLoss``; the default recovery rate is one node's ingest (SSD write or NIC, times efficiency)."""
    v = s.num_nodes
    stored = min(s.dataset_bytes, usable) if s.dataset_bytes is not None else usable
    data = stored * s.replication / v
    given = s.recovery_bytes_per_s
    rate: float = node_ingest if given is None else given
    bound = "one node's SSD write / NIC ingest" if given is None else "--recovery-rate"
    return NodeLoss(raw_capacity_bytes=float(p.raw_capacity_bytes), usable_capacity_bytes=usable / v,
                    data_bytes=data, degraded_read_bytes_per_s=degraded.bytes_per_s,
                    read_loss_fraction=1 - degraded.bytes_per_s / read.bytes_per_s if read.bytes_per_s else 0.0,
                    recovery_bytes_per_s=rate, recovery_bound_by=bound, rebuild_s=data / rate if rate else 0.0)


def _min_nodes(required: float, per_node: float, s: SizingInputs) -> int:
    return max(s.replication, math.ceil(required / per_node - 1e-9), 1)


def _targets(p: StorageProfile, s: SizingInputs, read: Ceiling, write: Ceiling, usable: float,
             node_read: float, node_write: float, client_total: float | None) -> list[Target]:
    out: list[Target] = []
    usable_per_node = usable / s.num_nodes
    if s.dataset_bytes is not None:
        out.append(Target("dataset", s.dataset_bytes, usable, "bytes", s.dataset_bytes <= usable,
                          _min_nodes(s.dataset_bytes, usable_per_node, s)))
    if s.checkpoint_bytes is not None and s.checkpoint_budget_s is not None:
        need = s.checkpoint_bytes / s.checkpoint_budget_s
        if client_total is not None and need > client_total:
            raise InputError(f"{s.checkpoint_budget_s:g} cannot be met by any number of "
                             f"storage nodes: {s.num_clients} clients can send at most {client_total / 1e9:,.1f} GB/s; "
                             "allow more time or more {clients}", field="checkpoint_time_s", mentions=("clients",))
        seconds = s.checkpoint_bytes / write.bytes_per_s
        out.append(Target("checkpoint_seconds", s.checkpoint_budget_s, seconds, "s", seconds <= s.checkpoint_budget_s,
                          _min_nodes(need, node_write, s)))
    for name, wanted, ceiling, per_node in (("read", s.read_bytes_per_s, read, node_read),
                                            ("write", s.write_bytes_per_s, write, node_write)):
        if wanted is None:
            continue
        need = wanted
        if client_total is not None and need > client_total:
            raise InputError(f"{need / 2**30:,.1f} GiB/s cannot be met by any number of storage nodes: "
                             f"{s.num_clients} clients move at most {client_total / 2**30:,.1f} GiB/s", field=name)
        out.append(Target(name, need, ceiling.bytes_per_s, "bytes/s", need <= ceiling.bytes_per_s,
                          _min_nodes(need, per_node, s)))
    if s.read_per_client_bytes_per_s is not None and s.num_clients is not None:
        per_client_max = s.client_nic_bytes_per_s * s.efficiency
        if s.read_per_client_bytes_per_s > per_client_max:
            raise InputError(f"{s.read_per_client_bytes_per_s / 2**30:,.2f} GiB/s cannot be met: "
                             f"one client NIC gives at most {per_client_max / 2**30:,.2f} GiB/s at efficiency "
                             f"{s.efficiency:g}", field="read_per_client")
        need = s.read_per_client_bytes_per_s * s.num_clients
        out.append(Target("read_aggregate", need, read.bytes_per_s, "bytes/s", need <= read.bytes_per_s,
                          _min_nodes(need, node_read, s)))
    return out


TRAINING_STATE_BYTES_PER_PARAM = 8  # FP32 master weights (4) + BF16 AdamW first and second moments (2 + 2)


def training_checkpoint_bytes(params_with_mtp: int) -> float:
    """Bytes of a full training checkpoint: master weights and optimizer moments of every parameter.

    DeepSeek-V3 trains with FP32 master weights and BF16 AdamW moments (tech report section 3.3); the FP8/BF16
    compute copy is derived from the master weights and is not stored.
    """
    return float(params_with_mtp * TRAINING_STATE_BYTES_PER_PARAM)


def smallest_cluster(p: StorageProfile, s: SizingInputs) -> SizingResult:
    """The fewest nodes of profile ``p`` meeting every target in ``s`` (``s.num_nodes`` is ignored)."""
    if all(x is None for x in (s.dataset_bytes, s.checkpoint_bytes, s.read_per_client_bytes_per_s,
                               s.read_bytes_per_s, s.write_bytes_per_s)):
        raise InputError("give {nodes}, or at least one need ({dataset}, {read}, {write}, {read_per_client}, "
                         "{checkpoint}/{checkpoint_model} with {checkpoint_time_s}) to size the smallest cluster",
                         mentions=("nodes", "dataset", "read", "write", "read_per_client", "checkpoint",
                                   "checkpoint_model", "checkpoint_time_s"))
    guess = max(s.replication, 2)
    for _ in range(64):
        result = size(p, replace(s, num_nodes=guess))
        if result.exit_code == 0:
            break
        nxt = max([guess + 1] + [t.min_nodes for t in result.targets if not t.met and t.min_nodes])
        if nxt > MAX_NODES:
            raise InputError(f"the needs take more than {MAX_NODES:,} storage nodes of profile {p.name}")
        guess = nxt
    while guess > max(s.replication, 2):  # the per-node estimates round up; step back while still met
        smaller = size(p, replace(s, num_nodes=guess - 1))
        if smaller.exit_code:
            break
        result, guess = smaller, guess - 1
    binding = max((t for t in result.targets), key=lambda t: t.min_nodes or 0, default=None)
    return replace(result, smallest_for=binding.name if binding is not None else None)


def plan(p: StorageProfile, s: SizingInputs, smallest: bool, checkpoint_model: ModelProfile | None = None
         ) -> SizingResult:
    """``storage size``: the cluster of ``s.num_nodes`` nodes, or (``smallest``) the fewest nodes meeting every
    need. ``checkpoint_model`` sets the checkpoint to a full training checkpoint of that model."""
    notes: list[str] = []
    if checkpoint_model is not None:
        if s.checkpoint_bytes is not None:
            raise InputError("and {checkpoint_model} both set the checkpoint size; give one", field="checkpoint",
                             mentions=("checkpoint_model",))
        from dsctl.model.params import count_parameters

        params = count_parameters(checkpoint_model).total_with_mtp
        checkpoint = training_checkpoint_bytes(params)
        s = replace(s, checkpoint_bytes=checkpoint)
        notes.append(f"checkpoint of {checkpoint_model.name}: {params / 1e9:,.1f}B parameters (MTP included) x "
                     f"{TRAINING_STATE_BYTES_PER_PARAM} bytes (FP32 master weights + BF16 AdamW moments) = "
                     f"{checkpoint / 1e12:,.2f} TB")
    result = smallest_cluster(p, s) if smallest else size(p, s)
    if smallest and result.smallest_for:
        notes.append(f"smallest cluster: {result.num_nodes} nodes, set by the {result.smallest_for} need")
    return replace(result, notes=notes + result.notes)
