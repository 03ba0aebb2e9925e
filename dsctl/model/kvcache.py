"""KV-cache size per token, per sequence and per batch (the paper's Table 1).

- MLA caches, per layer, the compressed latent ``c^KV`` (``kv_lora_rank`` values) and the decoupled RoPE key
  ``k^R`` (``qk_rope_head_dim`` values), shared by all heads.
- GQA caches K and V for each KV head: ``2 * num_kv_heads * head_dim`` values per layer; MHA the same with
  ``num_kv_heads = num_heads``.

bytes/token = values/token/layer * num_layers * dtype bytes. MTP modules are not counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dsctl.errors import InputError
from dsctl.model.checks import require_finite_results, require_number
from dsctl.profiles.schema import ModelProfile


def kv_values_per_token_per_layer(model: ModelProfile) -> int:
    """Number of cached values per token in one layer (see the module docstring)."""
    a = model.attention
    if a.is_mla:
        return a.kv_lora_rank + a.qk_rope_head_dim
    if a.kind == "gqa":
        return 2 * a.num_kv_heads * a.head_dim
    if a.kind == "mha":
        return 2 * a.num_heads * a.head_dim
    raise InputError(f"model {model.name!r}: attention kind {a.kind!r} is not supported; use mla, gqa or mha")


def kv_bytes_per_token(model: ModelProfile, dtype_bytes: float) -> int:
    """KV-cache bytes one token occupies across all ``num_layers`` layers (rounded to whole bytes)."""
    return round(kv_values_per_token_per_layer(model) * model.num_layers * dtype_bytes)


@dataclass(frozen=True)
class KVCacheRow:
    """KV cache of one model. ``ratio_to_first`` is bytes_per_token / the first model's (1.0 for the first)."""

    model: str
    attention_kind: str
    num_layers: int
    values_per_token_per_layer: int
    bytes_per_token: int
    bytes_per_sequence: int
    bytes_total: int
    ratio_to_first: float


@dataclass(frozen=True)
class KVCacheReport:
    """KV cache of one or more models at a context length, dtype and batch.

    The top-level ``bytes_*`` figures are the first (reference) model's; ``models`` has one row per model.
    ``bytes_per_sequence = bytes_per_token * context_tokens``; ``bytes_total = bytes_per_sequence * batch``.
    """

    dtype: str
    dtype_bytes: float
    context_tokens: int
    batch: int
    bytes_per_token: int
    bytes_per_sequence: int
    bytes_total: int
    models: tuple[KVCacheRow, ...]


def kv_cache_report(
    models: Sequence[ModelProfile], *, dtype: str, dtype_bytes: float, context_tokens: int, batch: int
) -> KVCacheReport:
    """KV-cache sizes of ``models`` (at least one); ratios are to ``models[0]``."""
    if not models:
        raise InputError("needs at least one model", field="model")
    if context_tokens < 1:
        raise InputError(f"must be at least 1 token, got {context_tokens}", field="context")
    if batch < 1:
        raise InputError(f"must be at least 1, got {batch}", field="batch")
    require_number(context_tokens, "context", positive=True)
    require_number(batch, "batch", positive=True)
    require_number(dtype_bytes, "dtype_bytes", positive=True)
    rows = []
    first = kv_bytes_per_token(models[0], dtype_bytes)
    for model in models:
        per_token = kv_bytes_per_token(model, dtype_bytes)
        rows.append(
            KVCacheRow(
                model=model.name,
                attention_kind=model.attention.kind,
                num_layers=model.num_layers,
                values_per_token_per_layer=kv_values_per_token_per_layer(model),
                bytes_per_token=per_token,
                bytes_per_sequence=per_token * context_tokens,
                bytes_total=per_token * context_tokens * batch,
                ratio_to_first=per_token / first if first else 0.0,
            )
        )
    require_finite_results({f"KV-cache bytes of {row.model}": row.bytes_total for row in rows},
                           ["--context", "--batch"])
    head = rows[0]
    return KVCacheReport(
        dtype=dtype,
        dtype_bytes=dtype_bytes,
        context_tokens=context_tokens,
        batch=batch,
        bytes_per_token=head.bytes_per_token,
        bytes_per_sequence=head.bytes_per_sequence,
        bytes_total=head.bytes_total,
        models=tuple(rows),
    )
