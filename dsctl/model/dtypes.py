"""Bytes per value of the number formats dsctl knows (weights, KV cache, activations)."""

from __future__ import annotations

from dsctl.errors import InputError, one_of

#: bytes per value; fp8 means E4M3/E5M2 (1 byte), without block-scale overhead
DTYPE_BYTES: dict[str, float] = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0}


def dtype_bytes(name: str, field: str = "dtype") -> float:
    """Bytes per value of ``name`` (case-insensitive); ``InputError`` naming ``field`` if unknown."""
    key = name.strip().lower()
    if key not in DTYPE_BYTES:
        raise InputError(f"{name!r} is not a known dtype; valid: {one_of(list(DTYPE_BYTES))}", field=field)
    return DTYPE_BYTES[key]
