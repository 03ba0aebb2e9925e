"""Frozen dataclasses for every profile kind. No I/O here; ``loader.py`` builds them from YAML.

Units are in the field names: ``_bytes``, ``_gbps`` (gigabits/s), ``_bytes_per_s``, ``_tflops``
(dense tera-FLOP/s per GPU), ``_usd``; ``num_`` prefixes counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Union


class ProfileKind(str, Enum):
    """The four profile kinds; the value is the sub-folder name under ``profiles/``."""

    MODEL = "models"
    NODE = "nodes"
    SWITCH = "switches"
    STORAGE = "storage"


@dataclass(frozen=True)
class AttentionSpec:
    """Attention shape.

    ``kind`` is ``mla`` (multi-head latent attention, DeepSeek-V2/V3), ``gqa`` (grouped-query) or ``mha``.
    For MLA the KV cache holds ``kv_lora_rank + qk_rope_head_dim`` values per token and layer; for GQA/MHA it
    holds ``2 * num_kv_heads * head_dim`` (K and V).
    """

    kind: str
    num_heads: int
    num_kv_heads: int
    head_dim: int
    q_lora_rank: int = 0  # 0 = queries are not low-rank compressed
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0

    @property
    def is_mla(self) -> bool:
        return self.kind == "mla"


@dataclass(frozen=True)
class MoESpec:
    """Mixture-of-experts shape of one MoE layer."""

    num_routed_experts: int
    num_shared_experts: int
    num_experts_per_token: int  # routed experts chosen per token (top-k)
    moe_intermediate_size: int  # FFN width of one expert
    num_expert_groups: int = 1  # experts are split into this many equal groups (node-limited routing)
    num_limited_groups: int = 1  # a token may use experts from at most this many groups

    @property
    def experts_per_group(self) -> int:
        return self.num_routed_experts // self.num_expert_groups


#: deployment kinds a model profile may publish (``deployments:`` keys; ``dsctl eplb rebalance --deployment``)
DEPLOYMENT_KINDS = ("prefill", "decode")


@dataclass(frozen=True)
class Deployment:
    """A published expert-parallel serving deployment: ``num_gpus`` on ``num_nodes`` nodes (EP size = num_gpus),
    ``num_redundant_experts`` extra slots per MoE layer (slots = routed experts + redundant, split evenly over the
    GPUs), and where it is published. The defaults of ``dsctl eplb rebalance STATS`` when no layout is given."""

    kind: str
    num_gpus: int
    num_nodes: int
    num_redundant_experts: int
    source: str


@dataclass(frozen=True)
class PublishedFigures:
    """Figures the model's authors published, kept to check dsctl's arithmetic against. 0 = not published."""

    total_params: float = 0.0
    active_params: float = 0.0
    training_gflops_per_token: float = 0.0
    #: measured training throughput restated as GPU hours per 1e12 trained tokens (DeepSeek-V3: 180K H800 hours)
    training_gpu_hours_per_trillion_tokens: float = 0.0
    #: where the published figures come from
    training_source: str = ""


#: names of the activation recipes a model profile may name (defined in dsctl.model.recipes)
ACTIVATION_RECIPES = ("deepseek", "selective", "full-recompute", "none")


@dataclass(frozen=True)
class ModelProfile:
    """Shapes of a transformer model, enough for KV-cache, parameter, FLOP and memory arithmetic.

    ``num_dense_layers`` is the number of leading layers with a dense FFN (all layers for a dense model);
    the remaining ``num_layers - num_dense_layers`` layers are MoE layers when ``moe`` is set.
    """

    name: str
    description: str
    source: str
    num_layers: int
    num_dense_layers: int
    hidden_size: int
    vocab_size: int
    dense_intermediate_size: int
    attention: AttentionSpec
    moe: MoESpec | None
    num_mtp_modules: int
    tie_word_embeddings: bool
    published: PublishedFigures
    path: str = ""
    #: published EP deployments, in the file's order (``deployments:``; only on MoE models)
    deployments: tuple[Deployment, ...] = ()
    #: GEMM precision of the model's published training recipe, ``fp8`` or ``bf16`` (``training_precision:``)
    training_precision: str = "bf16"
    #: activation recipe of the model's published training run (``activation_recipe:``; dsctl.model.recipes)
    activation_recipe: str = "selective"

    kind = ProfileKind.MODEL

    def deployment(self, kind: str) -> Deployment | None:
        """The published ``kind`` deployment, or None."""
        return next((d for d in self.deployments if d.kind == kind), None)

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.num_dense_layers if self.moe else 0

    @property
    def is_moe(self) -> bool:
        return self.moe is not None


@dataclass(frozen=True)
class AchievedCompute:
    """Fractions (0-1] of a GPU's dense peak that its kernels achieve, per op class (docs/steptime.md).

    - ``fp8_gemm`` / ``moe_gemm``: large FP8 GEMMs (dense layers) and grouped MoE expert GEMMs, of the FP8 peak;
    - ``bf16_gemm``: BF16 GEMMs (output head, router), of the BF16 peak;
    - ``attention_forward`` / ``attention_backward``: the attention core (FlashAttention-style), of the BF16 peak;
    - ``hbm``: achieved fraction of ``hbm_bytes_per_s`` for memory-bound (elementwise, norm, optimizer) work.

    Small GEMMs fall below these through the shape-aware roofline of ``dsctl.steptime.gemm``. The defaults are
    Hopper kernel figures (DeepGEMM, FlashAttention-3, vendor HBM), never fitted to a training run.
    """

    fp8_gemm: float = 0.75
    moe_gemm: float = 0.75
    bf16_gemm: float = 0.72
    attention_forward: float = 0.60
    attention_backward: float = 0.45
    hbm: float = 0.80


@dataclass(frozen=True)
class NodeProfile:
    """One GPU server (e.g. an 8-GPU HGX board) with its NICs.

    ``nvlink_bytes_per_s`` is the per-GPU NVLink bandwidth as data sheets give it (both directions together:
    400 GB/s on H800, 900 GB/s on H100/H200). Compute NIC *i* is paired with GPU *i* and sits on network plane *i*.

    Calibrated fabric (the EP model, ``dsctl.topology.sim.ep_time``): ``nic_efficiency`` is the fraction of the
    compute NIC's line rate that RDMA all-to-all payload achieves (0 < f <= 1); ``nvlink_achievable_bytes_per_s``
    what NVLink carries per direction per GPU in practice (the paper: ~160 of 200 GB/s on H800). Absent from a
    profile: 1.0 and half of ``nvlink_bytes_per_s`` (the uncalibrated peak).
    """

    name: str
    description: str
    gpu_model: str
    num_gpus: int
    hbm_bytes: int
    bf16_tflops: float
    fp8_tflops: float
    nvlink_bytes_per_s: float
    num_nvlinks_per_gpu: int
    num_compute_nics: int
    compute_nic_model: str
    compute_nic_gbps: float
    compute_link_layer: str
    num_storage_nics: int
    storage_nic_gbps: float
    storage_link_layer: str
    path: str = ""
    #: RDMA device names of the compute NICs in GPU order (e.g. mlx5_0..mlx5_7); empty when the profile has none.
    #: Launch limits NCCL to them (NCCL_IB_HCA) so that it never picks the storage NIC.
    compute_nic_devices: tuple[str, ...] = ()
    nic_efficiency: float = 1.0
    #: bytes/s per direction per GPU; 0 here means half of ``nvlink_bytes_per_s`` (set in ``__post_init__``)
    nvlink_achievable_bytes_per_s: float = 0.0
    #: HBM bandwidth per GPU in bytes/s (vendor figure); 0 = not given (step-time model uses 3.35 TB/s)
    hbm_bytes_per_s: float = 0.0
    #: streaming multiprocessors per GPU, and how many of them training keeps for communication kernels
    num_sms: int = 0
    num_comm_sms: int = 0
    #: achieved fractions of peak per op class (``gpu: achieved:``)
    achieved: AchievedCompute = AchievedCompute()
    #: HBM a program can allocate (``gpu: hbm_usable:``, what nvidia-smi reports as total); 0 = ``hbm_bytes``
    hbm_usable_bytes: int = 0

    kind = ProfileKind.NODE

    @property
    def usable_hbm_bytes(self) -> int:
        """HBM per GPU the memory plan may fill: ``hbm_usable`` when the profile gives it, else ``hbm``."""
        return self.hbm_usable_bytes or self.hbm_bytes

    def __post_init__(self) -> None:
        if not self.nvlink_achievable_bytes_per_s:
            object.__setattr__(self, "nvlink_achievable_bytes_per_s", self.nvlink_bytes_per_s / 2)


@dataclass(frozen=True)
class SwitchProfile:
    """A network switch model and the cost assumptions used for topology costing.

    Costs are the fitted reconstruction of the paper's Table 3 (see docs/topology.md), not vendor prices.
    """

    name: str
    description: str
    model: str
    num_ports: int
    port_gbps: float
    link_layer: str
    cost_usd: float
    link_cost_usd: float  # one inter-switch link, optics included
    endpoint_link_cost_usd: float  # one NIC-to-leaf cable, optics included
    path: str = ""
    #: InfiniBand width x speed every port should train at, as ibnetdiscover prints it (``4xNDR``; ``2xNDR``
    #: for a QM9700 in split mode, whose 64 400G ports are numbered as 128 200G ports); "" = from port_rate
    link: str = ""

    kind = ProfileKind.SWITCH


@dataclass(frozen=True)
class StorageProfile:
    """One 3FS storage server."""

    name: str
    description: str
    num_ssds: int
    ssd_capacity_bytes: int
    ssd_read_bytes_per_s: float
    ssd_write_bytes_per_s: float
    num_nics: int
    nic_gbps: float
    link_layer: str
    path: str = ""

    kind = ProfileKind.STORAGE

    @property
    def raw_capacity_bytes(self) -> int:
        return self.num_ssds * self.ssd_capacity_bytes


Profile = Union[ModelProfile, NodeProfile, SwitchProfile, StorageProfile]
