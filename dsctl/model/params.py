"""Parameter counts of a transformer described by a ``ModelProfile``.

Every count is a number of parameters (weights), not bytes; multiply by the bytes of a dtype
(``dsctl.model.dtypes``) for memory. The counting follows the reference implementations:

- **Embedding**: ``vocab_size * hidden_size``. **Head** (output projection): the same shape, 0 if tied.
  The final RMSNorm (``hidden_size``) is ``final_norm``.
- **Attention, GQA/MHA**: Q ``h*n_q*d``, K and V ``h*n_kv*d`` each, O ``n_q*d*h`` (no biases; Qwen2.5's
  0.8M QKV biases are not in the profile schema and are left out).
- **Attention, MLA** (DeepSeek-V2/V3): ``wq_a`` ``h*r_q`` + ``q_norm`` ``r_q`` + ``wq_b`` ``r_q*n*(d_nope+d_rope)``
  (or ``wq`` ``h*n*(d_nope+d_rope)`` when ``q_lora_rank == 0``), ``wkv_a`` ``h*(r_kv+d_rope)`` + ``kv_norm``
  ``r_kv``, ``wkv_b`` ``r_kv*n*(d_nope+d_v)``, ``wo`` ``n*d_v*h``.
- **Norms**: two RMSNorms of ``hidden_size`` per layer (before attention and before the FFN).
- **FFN**: gated (SwiGLU) with three matrices, ``3*h*i``. A MoE layer holds ``num_routed_experts`` routed
  experts and ``num_shared_experts`` shared experts of width ``moe_intermediate_size`` plus a router
  ``num_routed_experts*h``.
- **Active** (what one token reads): one embedding row (``hidden_size``; the lookup reads nothing else),
  attention, norms, dense FFN, or in a MoE layer the router, the shared experts and ``num_experts_per_token``
  routed experts; plus the final norm and the whole head (every logit is computed). This convention matches
  DeepSeek's published figures best: V3 36.63B (README_WEIGHTS 36.7B, paper "37B"), V2 20.85B ("21B"),
  V2-Lite 2.45B ("2.4B"); counting the whole embedding table instead gives 37.55B, 21.38B and 2.66B
  (``active_with_embedding_table``, the convention of Mixtral's "12.9B"). docs/model.md has the comparison.
- **MTP** (multi-token prediction, DeepSeek-V3): each module has two RMSNorms (``2h``), a projection
  ``eh_proj`` ``2h*h``, one transformer layer of the MoE kind (dense when the model is dense) and a final
  RMSNorm ``h``; it shares the main model's embedding and head, so ``mtp`` excludes them.
  The published Hugging Face checkpoint stores a copy of both per module; ``mtp_stored`` includes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from dsctl.errors import InputError
from dsctl.profiles.schema import AttentionSpec, ModelProfile


@dataclass(frozen=True)
class ParameterCounts:
    """Parameter counts (numbers of weights) of one model.

    - ``embedding``: token embedding table.
    - ``head``: output projection (0 if tied to the embedding). ``final_norm``: the RMSNorm before it.
    - ``per_layer``: total parameters of each transformer layer 0..L-1 (attention + norms + dense FFN or
      all routed experts, shared experts and router).
    - ``per_layer_active``: the parameters one token touches in each layer.
    - ``attention``: attention parameters of one layer (the same in every layer).
    - ``routed_expert``: one routed expert of one MoE layer (0 for a dense model).
    - ``mtp``: MTP modules without the shared embedding and head (0 if none); ``mtp_stored`` with them, as in
      the published checkpoint.
    - ``total``: main model = embedding + layers + final norm + head, MTP excluded.
    - ``active``: per token = one embedding row + active layers + final norm + head, MTP excluded.
    - ``active_with_embedding_table``: ``active`` with the whole embedding table instead of one row.
    - ``total_with_mtp``: ``total + mtp``.
    """

    embedding: int
    head: int
    final_norm: int
    per_layer: tuple[int, ...]
    per_layer_active: tuple[int, ...]
    attention: int
    routed_expert: int
    num_routed_experts_total: int
    mtp: int
    mtp_stored: int
    total: int
    active: int
    active_with_embedding_table: int
    total_with_mtp: int

    @property
    def layers(self) -> int:
        """All transformer layers together (no embedding, head or MTP)."""
        return sum(self.per_layer)

    @property
    def layers_active(self) -> int:
        return sum(self.per_layer_active)

    @property
    def routed_experts(self) -> int:
        """Every routed expert in every MoE layer."""
        return self.routed_expert * self.num_routed_experts_total


def attention_parameters(attention: AttentionSpec, hidden_size: int) -> int:
    """Parameters of one attention block (projections and, for MLA, its two low-rank norms)."""
    a = attention
    h = hidden_size
    if a.is_mla:
        qk_head_dim = a.qk_nope_head_dim + a.qk_rope_head_dim
        if a.q_lora_rank > 0:
            q = h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * a.num_heads * qk_head_dim
        else:
            q = h * a.num_heads * qk_head_dim
        kv = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank
        kv += a.kv_lora_rank * a.num_heads * (a.qk_nope_head_dim + a.v_head_dim)
        out = a.num_heads * a.v_head_dim * h
        return q + kv + out
    if a.kind in ("gqa", "mha"):
        num_kv = a.num_kv_heads if a.kind == "gqa" else a.num_heads
        return h * a.num_heads * a.head_dim * 2 + h * num_kv * a.head_dim * 2
    raise InputError(f"attention kind {a.kind!r} is not supported; use mla, gqa or mha")


def ffn_parameters(hidden_size: int, intermediate_size: int) -> int:
    """One gated (SwiGLU) FFN: gate, up and down projections, ``3 * h * i``."""
    return 3 * hidden_size * intermediate_size


def _layer_shapes(model: ModelProfile) -> tuple[int, int, int, int, int]:
    """(dense layer total, MoE layer total, MoE layer active, attention, one routed expert)."""
    h = model.hidden_size
    attn = attention_parameters(model.attention, h)
    norms = 2 * h
    dense = attn + norms + ffn_parameters(h, model.dense_intermediate_size)
    moe = model.moe
    if moe is None:
        return dense, dense, dense, attn, 0
    expert = ffn_parameters(h, moe.moe_intermediate_size)
    router = moe.num_routed_experts * h
    shared = moe.num_shared_experts * expert
    moe_total = attn + norms + router + shared + moe.num_routed_experts * expert
    moe_active = attn + norms + router + shared + moe.num_experts_per_token * expert
    return dense, moe_total, moe_active, attn, expert


@lru_cache(maxsize=64)  # frozen in, frozen out: the layout search and the step model ask for it per layout
def count_parameters(model: ModelProfile) -> ParameterCounts:
    """Count the parameters of ``model`` (see the module docstring for what each part holds)."""
    h = model.hidden_size
    dense, moe_total, moe_active, attn, expert = _layer_shapes(model)
    is_moe = model.moe is not None
    per_layer = tuple(
        moe_total if is_moe and i >= model.num_dense_layers else dense for i in range(model.num_layers)
    )
    per_layer_active = tuple(
        moe_active if is_moe and i >= model.num_dense_layers else dense for i in range(model.num_layers)
    )
    embedding = model.vocab_size * h
    head = 0 if model.tie_word_embeddings else model.vocab_size * h
    mtp_layer = moe_total if is_moe else dense
    mtp_module = 2 * h + 2 * h * h + mtp_layer + h
    mtp = model.num_mtp_modules * mtp_module
    mtp_stored = mtp + model.num_mtp_modules * (embedding + model.vocab_size * h) if mtp else 0
    total = embedding + sum(per_layer) + h + head
    embedding_row = h
    active = embedding_row + sum(per_layer_active) + h + head
    num_routed = model.num_moe_layers * model.moe.num_routed_experts if model.moe is not None else 0
    return ParameterCounts(
        embedding=embedding,
        head=head,
        final_norm=h,
        per_layer=per_layer,
        per_layer_active=per_layer_active,
        attention=attn,
        routed_expert=expert,
        num_routed_experts_total=num_routed,
        mtp=mtp,
        mtp_stored=mtp_stored,
        total=total,
        active=active,
        active_with_embedding_table=active - embedding_row + embedding,
        total_with_mtp=total + mtp,
    )


def bytes_per_routed_expert(model: ModelProfile, dtype_bytes: float) -> int:
    """Bytes of ONE routed expert's weights (gate, up, down) in one layer at ``dtype_bytes`` per weight.

    This is what an EPLB migration moves per replica and what a GPU holds per expert slot. 0 for dense models.
    """
    if dtype_bytes <= 0:
        raise InputError(f"dtype_bytes must be positive, got {dtype_bytes}")
    return round(count_parameters(model).routed_expert * dtype_bytes)
