"""dsctl.model.checks: the finite-number validation every model command shares."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.model.checks import require_finite_results, require_number


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 10**400])
def test_non_finite_is_rejected_naming_the_option(value: float) -> None:
    with pytest.raises(InputError, match=r"^opt must be a finite number") as err:
        require_number(value, "opt")
    assert err.value.field == "opt" and err.value.text.startswith("must be a finite number")


def test_bounds() -> None:
    require_number(None, "opt", positive=True)
    require_number(0.0, "opt", non_negative=True)
    require_number(1, "opt", positive=True, at_most=1)
    with pytest.raises(InputError, match=r"^opt must be positive"):
        require_number(0, "opt", positive=True)
    with pytest.raises(InputError, match=r"^opt cannot be negative"):
        require_number(-1e-9, "opt", non_negative=True)
    with pytest.raises(InputError, match=r"^opt must be at most 1"):
        require_number(1.5, "opt", at_most=1)


def test_typed_text_is_shown() -> None:
    with pytest.raises(InputError, match=r"'1e400' \(= inf\)"):
        require_number(float("1e400"), "tokens", text="1e400")


def test_results() -> None:
    require_finite_results({"a": 1.0, "b": 10**300}, ["--x"], positive=["a"])
    with pytest.raises(InputError, match=r"a overflows .*--x, --y"):
        require_finite_results({"a": math.inf}, ["--x", "--y"])
    with pytest.raises(InputError, match="b overflows"):
        require_finite_results({"b": 10**400}, ["--x"])
    with pytest.raises(InputError, match="a underflows to 0"):
        require_finite_results({"a": 0.0}, ["--x"], positive=["a"])


@settings(max_examples=60, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_accepts_exactly_the_finite_floats(value: float) -> None:
    if math.isfinite(value):
        require_number(value, "opt")
    else:
        with pytest.raises(InputError):
            require_number(value, "opt")
