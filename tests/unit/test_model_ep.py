"""EP decode speed limit: the paper's section 2.3.2."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.model.ep import ep_speed_limit, link_bandwidth_bytes_per_s

IB = link_bandwidth_bytes_per_s(400)


def test_400g_ib_defaults() -> None:
    r = ep_speed_limit(bandwidth_bytes_per_s=IB)
    assert IB == 50e9
    assert r.bytes_per_step == 6_048_000
    assert r.comm_seconds_per_step * 1e6 == pytest.approx(120.96)
    assert r.layer_seconds * 1e6 == pytest.approx(241.92)
    assert round(r.tpot_seconds * 1e3, 2) == 14.76
    assert int(r.tokens_per_second) == 67  # "about 67 tokens/s" (67.8)


def test_gb200_nvl72_900_gb_per_s() -> None:
    r = ep_speed_limit(bandwidth_bytes_per_s=link_bandwidth_bytes_per_s(400, 900e9))
    assert r.comm_seconds_per_step * 1e6 == pytest.approx(6.72)
    assert round(r.tpot_seconds * 1e3, 2) == 0.82
    assert r.tokens_per_second == pytest.approx(1200, rel=0.02)  # 1,219.8; the paper says "about 1200"


def test_sensitivities() -> None:
    h = ep_speed_limit(bandwidth_bytes_per_s=IB, hidden=7168)
    assert round(h.comm_seconds_per_step * 1e6, 2) == 123.86
    assert round(h.tpot_seconds * 1e3, 2) == 15.11
    assert round(h.tokens_per_second, 1) == 66.2
    bw = ep_speed_limit(bandwidth_bytes_per_s=link_bandwidth_bytes_per_s(400, 40e9))
    assert bw.comm_seconds_per_step * 1e6 == pytest.approx(151.2)
    assert round(bw.tpot_seconds * 1e3, 2) == 18.45
    assert round(bw.tokens_per_second, 1) == 54.2
    moe_only = ep_speed_limit(bandwidth_bytes_per_s=IB, layers=58)
    assert round(moe_only.tpot_seconds * 1e3, 2) == 14.03


def test_bad_inputs() -> None:
    with pytest.raises(InputError, match=r"^nic_gbps must be positive, got 0$"):
        link_bandwidth_bytes_per_s(0)
    with pytest.raises(InputError, match=r"^bandwidth_bytes_per_s must be positive, got -1$"):
        link_bandwidth_bytes_per_s(400, -1)
    with pytest.raises(InputError, match=r"^layers must be positive, got 0$"):
        ep_speed_limit(bandwidth_bytes_per_s=IB, layers=0)
    with pytest.raises(InputError, match=r"^dispatch_bytes cannot be negative, got -1$"):
        ep_speed_limit(bandwidth_bytes_per_s=IB, dispatch_bytes=-1)
    with pytest.raises(InputError, match=r"^dispatch_bytes and combine_bytes cannot both be 0$"):
        ep_speed_limit(bandwidth_bytes_per_s=IB, dispatch_bytes=0, combine_bytes=0)


@settings(max_examples=40, deadline=None)
@given(bw=st.floats(1e9, 2e12), layers=st.integers(1, 200), tokens=st.integers(1, 1024))
def test_scaling(bw: float, layers: int, tokens: int) -> None:
    r = ep_speed_limit(bandwidth_bytes_per_s=bw, layers=layers, tokens_per_device=tokens)
    r2 = ep_speed_limit(bandwidth_bytes_per_s=2 * bw, layers=layers, tokens_per_device=tokens)
    assert r2.tpot_seconds == pytest.approx(r.tpot_seconds / 2)
    assert r.tpot_seconds == pytest.approx(layers * 2 * r.comm_seconds_per_step)
    assert r.tokens_per_second * r.tpot_seconds == pytest.approx(1.0)
