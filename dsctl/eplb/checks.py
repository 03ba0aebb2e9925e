"""Input validation for EPLB (rules V1-V11 of the reference spec) and the choice of policy.

The reference (deepseek-ai/EPLB) uses bare ``assert`` statements, or no check at all. dsctl checks
everything up front and reports every failing rule at once, naming the value and the rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dsctl.errors import InputError

POLICIES = ("auto", "hierarchical", "global")

#: float32 represents every integer up to 2**24 exactly; larger integer loads get rounded (rule V11)
FLOAT32_EXACT_INT = 2**24
#: rule V12: at most this many physical slots per layer, whatever the expert count
MAX_SLOTS_PER_LAYER = 65_536
#: rule V12: at most this many slots per logical expert on average (deployments use 1.1-2: DeepSeek-V3 288 or 320
#: slots for 256 experts); beyond it time and memory grow with no use (log2phy is [L, E, max replicas])
MAX_SLOTS_PER_EXPERT = 16
#: most physical slots over all layers, layers x slots per layer (DeepSeek-V3: 58 x 288 = 16,704): bounds every
#: plan's arrays and the algorithms' per-slot loops (statistics files and placement files alike)
MAX_PLAN_SLOTS = 2**21
#: most planning work one command may ask for, in units of ~0.1-0.3 us measured on one shared core: a balanced
#: plan costs layers x slots^2 (its swap search; V3 at 288 slots: 4.8 million, 1.6 s; 58 layers at 1,024 slots:
#: 61 million, 13-14 s), a reference plan 64 x layers x slots; a command that plans several times (replay's
#: windows, budget's slot counts, --previous's tolerances) sums them. The limit is about 10 s of planning; the
#: default V3 `eplb budget` (40 million: five slot counts and two final plans) takes 4.7 s.
MAX_PLANNING_WORK = 48_000_000


@dataclass(frozen=True)
class EplbLayout:
    """A checked layout and the policy that will run.

    ``num_groups_eff``/``num_nodes_eff`` are (G', N'): the caller's groups and nodes for the hierarchical
    policy, (1, 1) for the global one (the reference then ignores the caller's numbers).
    """

    num_layers: int
    num_experts: int
    num_replicas: int
    num_groups: int
    num_nodes: int
    num_gpus: int
    policy: str  # "hierarchical" | "global"
    warnings: tuple[str, ...] = field(default=())

    @property
    def num_groups_eff(self) -> int:
        return self.num_groups if self.policy == "hierarchical" else 1

    @property
    def num_nodes_eff(self) -> int:
        return self.num_nodes if self.policy == "hierarchical" else 1

    @property
    def slots_per_gpu(self) -> int:
        return self.num_replicas // self.num_gpus

    @property
    def gpus_per_node(self) -> int:
        return self.num_gpus // self.num_nodes_eff

    @property
    def slots_per_node(self) -> int:
        return self.num_replicas // self.num_nodes_eff

    @property
    def experts_per_node(self) -> int:
        return self.num_experts // self.num_nodes_eff


def _divmod_text(a: int, b: int) -> str:
    q, r = divmod(a, b)
    return f"{a} = {q} x {b} + {r}"


def choose_policy(num_groups: int, num_nodes: int, policy: str = "auto") -> str:
    """The policy that runs: ``auto`` -> hierarchical iff ``num_groups % num_nodes == 0`` (as the reference)."""
    if policy not in POLICIES:
        raise InputError(f"{policy!r} is not valid: choose auto, hierarchical or global", field="policy")
    if policy != "auto":
        return policy
    if num_nodes >= 1 and num_groups >= 1 and num_groups % num_nodes == 0:
        return "hierarchical"
    return "global"


def max_slots_per_layer(num_experts: int) -> int:
    """Rule V12: the most physical slots per layer accepted for ``num_experts`` logical experts."""
    return min(MAX_SLOTS_PER_LAYER, MAX_SLOTS_PER_EXPERT * num_experts)


#: the layout fields check_layout's messages name (as ``{field}``, spelled by the command layer)
LAYOUT_FIELDS = ("replicas", "gpus", "nodes", "groups", "policy")


def check_layout(
    num_layers: int,
    num_experts: int,
    num_replicas: int,
    num_groups: int,
    num_nodes: int,
    num_gpus: int,
    policy: str = "auto",
) -> EplbLayout:
    """Check rules V1, V4-V10 and V12 for a weight of shape [num_layers, num_experts]; raise one InputError listing
    every failure, or return the Layout with the policy that will run and any warnings (V10)."""
    problems: list[str] = []
    if num_layers < 1 or num_experts < 1:
        problems.append(f"statistics must be a 2-D table of layers x experts with at least one of each, "
                        f"got {num_layers} x {num_experts} (rule V1)")
    if num_nodes < 1:
        problems.append(f"{{nodes}} must be >= 1, got {num_nodes} (rule V4)")
    for name, value in (("{groups}", num_groups), ("{gpus}", num_gpus), ("{replicas}", num_replicas)):
        if value < 1:
            problems.append(f"{name} must be >= 1, got {value} (rule V5)")
    if problems:
        raise InputError("; ".join(problems), mentions=LAYOUT_FIELDS)

    if policy not in POLICIES:
        raise InputError(f"{policy!r} is not valid: choose auto, hierarchical or global", field="policy")
    chosen = choose_policy(num_groups, num_nodes, policy)
    warnings: list[str] = []
    if chosen == "hierarchical":
        if num_groups % num_nodes != 0:
            problems.append(
                f"hierarchical policy needs {{groups}} {num_groups} to be a multiple of {{nodes}} {num_nodes} "
                f"({_divmod_text(num_groups, num_nodes)}); use {{policy}} global or auto")
        if num_experts % num_groups != 0:
            problems.append(
                f"hierarchical policy needs the {num_experts} experts to split into {{groups}} {num_groups} equal "
                f"groups ({_divmod_text(num_experts, num_groups)}) (rule V6)")
        if num_gpus % num_nodes != 0:
            problems.append(
                f"hierarchical policy needs {{gpus}} {num_gpus} to be a multiple of {{nodes}} {num_nodes} "
                f"({_divmod_text(num_gpus, num_nodes)}) (rule V7)")
    else:
        if num_experts % num_groups != 0 or num_gpus % num_nodes != 0:
            warnings.append(
                f"global policy: --groups {num_groups} and --nodes {num_nodes} are ignored "
                f"(experts {num_experts} % groups = {num_experts % num_groups}, "
                f"gpus {num_gpus} % nodes = {num_gpus % num_nodes}) (rule V10)")
    if num_replicas % num_gpus != 0:
        problems.append(
            f"{{replicas}} {num_replicas} is not a multiple of {{gpus}} {num_gpus}: "
            f"{_divmod_text(num_replicas, num_gpus)} (rule V8)")
    if num_replicas < num_experts:
        problems.append(
            f"{{replicas}} {num_replicas} is smaller than the number of experts {num_experts}: "
            f"every expert needs at least one slot (rule V9)")
    limit = max_slots_per_layer(num_experts)
    if num_replicas > limit:
        problems.append(
            f"{{replicas}} {num_replicas} is above the limit of {limit} slots per layer for {num_experts} experts: "
            f"at most {MAX_SLOTS_PER_EXPERT} slots per expert and at most {MAX_SLOTS_PER_LAYER} per layer (rule V12)")
    if num_layers * num_replicas > MAX_PLAN_SLOTS:
        problems.append(
            f"{num_layers:,} layers x {num_replicas:,} slots = {num_layers * num_replicas:,} slots is above the limit "
            f"of {MAX_PLAN_SLOTS:,} slots over all layers")
    if problems:
        raise InputError("; ".join(problems), hint=f"policy that would run: {chosen}", mentions=LAYOUT_FIELDS)
    return EplbLayout(num_layers, num_experts, num_replicas, num_groups, num_nodes, num_gpus, chosen, tuple(warnings))


def planning_work(num_layers: int, num_slots: int, algorithm: str) -> int:
    """Estimated cost of one plan in MAX_PLANNING_WORK units (see there): balanced L x R^2, reference 64 x L x R."""
    return num_layers * num_slots * (num_slots if algorithm == "balanced" else 64)


def check_planning_work(work: int, what: str, field: str | None = None) -> None:
    """Refuse, before any planning, a command whose summed ``planning_work`` is above MAX_PLANNING_WORK.

    ``what`` names the planning asked for (after ``field``, the request field it is about, when given)."""
    if work > MAX_PLANNING_WORK:
        raise InputError(f"{what} needs about {work:,} units of planning work, above the limit of "
                         f"{MAX_PLANNING_WORK:,} (~10 s; balanced costs layers x slots^2, reference 64 x layers x "
                         "slots)",
                         hint="use --algorithm reference, fewer layers or windows, or fewer --replicas", field=field)


def check_weight(weight: np.ndarray, source: str = "statistics") -> tuple[np.ndarray, tuple[str, ...]]:
    """Check rules V1-V3 (2-D, finite, non-negative) and V11 (integers above 2**24 lose precision in float32).

    Returns the weight as float64 [L, E] and the warnings. ``source`` names the input in messages.
    """
    arr = np.asarray(weight)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise InputError(f"{source}: expected a 2-D table of layers x experts with at least one of each, "
                         f"got shape {tuple(arr.shape)} (rule V1)")
    if arr.dtype.kind not in "iuf":
        raise InputError(f"{source}: loads must be integers or floats, got dtype {arr.dtype} (rule V1)")
    arr = arr.astype(np.float64)
    bad = ~np.isfinite(arr)
    if bad.any():
        layer, expert = (int(v) for v in np.argwhere(bad)[0])
        raise InputError(f"{source}: load of layer {layer}, expert {expert} is {arr[layer, expert]}: "
                         f"every load must be a finite number (rule V2)")
    neg = arr < 0
    if neg.any():
        layer, expert = (int(v) for v in np.argwhere(neg)[0])
        raise InputError(f"{source}: load of layer {layer}, expert {expert} is {arr[layer, expert]:g}: "
                         f"loads must be >= 0 (rule V3)")
    with np.errstate(over="ignore"):  # a load above float32's range becomes inf here and is refused below
        row_sums = arr.astype(np.float32).sum(axis=1, dtype=np.float64)
    if not np.all(row_sums < float(np.finfo(np.float32).max) / 4):
        raise InputError(f"{source}: loads are too large for float32 arithmetic (a layer sums to "
                         f"{row_sums.max():.3g}); scale them down (rule V2)")
    warnings: list[str] = []
    big = arr > FLOAT32_EXACT_INT
    if big.any() and np.all(arr == np.round(arr)):
        warnings.append(f"{source}: {int(big.sum())} integer loads exceed 2^24 = {FLOAT32_EXACT_INT} and are rounded "
                        f"to float32 as the reference does (rule V11)")
    return arr, tuple(warnings)
