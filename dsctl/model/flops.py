"""Training FLOPs per token (the paper's Table 2), forward + backward.

Convention (reproduces DeepSeek-V3's 250 GFLOP/token at sequence length 4096 to 0.2%):

- **Matmul FLOPs**: 2 FLOPs per multiply-add for every weight a token touches in a matrix product:
  ``2 * N_mm`` forward, where ``N_mm`` = active parameters minus the embedding row (a lookup) and minus
  the RMSNorm weights (elementwise). It includes the output head and the MoE router.
- **Attention FLOPs**: scores ``Q K^T`` and ``P V`` per layer, ``2 * n_heads * (d_qk + d_v) * S`` forward per
  token for the full matrix; the **causal** convention (FlashAttention's, the one behind the paper's
  causal MFU) counts only the lower triangle, i.e. half of it. MLA uses ``d_qk = d_nope + d_rope`` and
  ``d_v = v_head_dim`` (training runs MLA un-absorbed); GQA/MHA use ``head_dim`` for both.
- **Training** = 3 x forward (backward = 2 x forward: gradients for inputs and for weights).
- MTP modules are excluded (the paper's 250 excludes them; with V3's MTP it would be about 260).
"""

from __future__ import annotations

from dataclasses import dataclass

from dsctl.errors import InputError
from dsctl.model.checks import require_finite_results, require_number
from dsctl.model.params import count_parameters
from dsctl.profiles.schema import ModelProfile

#: backward pass costs twice the forward pass
TRAINING_MULTIPLIER = 3


@dataclass(frozen=True)
class FlopsReport:
    """Training FLOPs per token of one model.

    - ``matmul_params``: parameters in matrix products one token touches (active minus embedding row and norms).
    - ``matmul_flops_per_token`` / ``attention_flops_per_token``: training (forward + backward) FLOPs.
    - ``flops_per_token``: their sum; ``forward_flops_per_token`` is one third of it.
    - ``published_flops_per_token`` and ``error_pct`` (ours vs published, in percent); 0 / None if unpublished.
    """

    model: str
    seq_len: int
    causal: bool
    matmul_params: int
    matmul_flops_per_token: float
    attention_flops_per_token: float
    forward_flops_per_token: float
    flops_per_token: float
    gflops_per_token: float
    published_flops_per_token: float
    error_pct: float | None


def attention_head_dims(model: ModelProfile) -> tuple[int, int]:
    """(d_qk, d_v): per-head dimensions of the score and value products."""
    a = model.attention
    if a.is_mla:
        return a.qk_nope_head_dim + a.qk_rope_head_dim, a.v_head_dim
    return a.head_dim, a.head_dim


def matmul_params_per_token(model: ModelProfile) -> int:
    """Active parameters used in matrix products: active - embedding row - final norm - 2 norms per layer.

    The embedding row is a lookup, not a product. MLA's two low-rank RMSNorms (``q_lora_rank`` and
    ``kv_lora_rank`` weights) are also elementwise and are subtracted too.
    """
    counts = count_parameters(model)
    a = model.attention
    norms = 2 * model.hidden_size + (a.q_lora_rank + a.kv_lora_rank if a.is_mla else 0)
    embedding_row = model.hidden_size
    return counts.active - embedding_row - counts.final_norm - norms * model.num_layers


def training_flops(model: ModelProfile, seq_len: int = 4096, causal: bool = True) -> FlopsReport:
    """Forward + backward FLOPs of one trained token at sequence length ``seq_len`` (tokens)."""
    if seq_len < 1:
        raise InputError(f"must be at least 1 token, got {seq_len}", field="seq_len")
    require_number(seq_len, "seq_len", positive=True)
    d_qk, d_v = attention_head_dims(model)
    n_mm = matmul_params_per_token(model)
    attended = seq_len / 2 if causal else float(seq_len)
    attn_forward = 2.0 * model.attention.num_heads * (d_qk + d_v) * attended * model.num_layers
    matmul_forward = 2.0 * n_mm
    forward = matmul_forward + attn_forward
    total = TRAINING_MULTIPLIER * forward
    require_finite_results({"FLOPs per token": total}, ["--seq-len"])
    published = model.published.training_gflops_per_token * 1e9
    return FlopsReport(
        model=model.name,
        seq_len=seq_len,
        causal=causal,
        matmul_params=n_mm,
        matmul_flops_per_token=TRAINING_MULTIPLIER * matmul_forward,
        attention_flops_per_token=TRAINING_MULTIPLIER * attn_forward,
        forward_flops_per_token=forward,
        flops_per_token=total,
        gflops_per_token=total / 1e9,
        published_flops_per_token=published,
        error_pct=(total / published - 1.0) * 100.0 if published > 0 else None,
    )
