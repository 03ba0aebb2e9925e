"""KV cache per token: the paper's Table 1."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.model.kvcache import kv_bytes_per_token, kv_cache_report
from dsctl.profiles.loader import ProfileStore

STORE = ProfileStore()
TABLE1 = [STORE.model(n) for n in ("deepseek-v3", "qwen2.5-72b", "llama3.1-405b")]


def test_table1_bytes_per_token() -> None:
    assert [kv_bytes_per_token(m, 2) for m in TABLE1] == [70_272, 327_680, 516_096]


def test_table1_ratios() -> None:
    r = kv_cache_report(TABLE1, dtype="bf16", dtype_bytes=2, context_tokens=4096, batch=1)
    ratios = [row.ratio_to_first for row in r.models]
    assert ratios[0] == 1.0
    assert round(ratios[1], 2) == 4.66
    assert round(ratios[2], 2) == 7.34  # the paper prints 7.28x (= 512 / 70.272, an arithmetic slip)
    assert round(512_000 / 70_272, 3) == 7.286  # where the printed 7.28 comes from
    assert abs(ratios[2] - 7.28) > 0.05


def test_mla_formula_and_v2() -> None:
    assert kv_bytes_per_token(TABLE1[0], 2) == (512 + 64) * 61 * 2
    assert kv_bytes_per_token(STORE.model("deepseek-v2"), 2) == (512 + 64) * 60 * 2
    assert kv_bytes_per_token(STORE.model("deepseek-v2-lite"), 2) == (512 + 64) * 27 * 2 == 31_104


def test_sequence_and_batch_and_fp8() -> None:
    r = kv_cache_report(TABLE1, dtype="fp8", dtype_bytes=1, context_tokens=1000, batch=3)
    assert r.bytes_per_token == 35_136
    assert r.bytes_per_sequence == 35_136_000
    assert r.bytes_total == 105_408_000
    assert r.models[2].bytes_total == 516_096 // 2 * 1000 * 3


def test_bad_inputs() -> None:
    with pytest.raises(InputError, match=r"^context must be at least 1 token, got 0$"):
        kv_cache_report(TABLE1, dtype="bf16", dtype_bytes=2, context_tokens=0, batch=1)
    with pytest.raises(InputError, match=r"^batch must be at least 1, got 0$"):
        kv_cache_report(TABLE1, dtype="bf16", dtype_bytes=2, context_tokens=1, batch=0)
    with pytest.raises(InputError, match=r"^model needs at least one model$"):
        kv_cache_report([], dtype="bf16", dtype_bytes=2, context_tokens=1, batch=1)


@settings(max_examples=30, deadline=None)
@given(context=st.integers(1, 1 << 20), batch=st.integers(1, 512))
def test_totals_scale_linearly(context: int, batch: int) -> None:
    r = kv_cache_report(TABLE1, dtype="bf16", dtype_bytes=2, context_tokens=context, batch=batch)
    for row in r.models:
        assert row.bytes_total == row.bytes_per_token * context * batch
