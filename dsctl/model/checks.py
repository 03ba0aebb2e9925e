"""Validation shared by every ``dsctl model`` command: inputs must be finite numbers, results must not overflow.

Two helpers, both raising :class:`~dsctl.errors.InputError` (exit 2) with a message that names the option:

- :func:`require_number` for an input (a float or int option, or a parsed count such as ``--tokens 14.8T``):
  it must be a finite number (no ``nan``, ``inf`` or ``1e400``, no integer too large for a float) and, as asked,
  positive, non-negative, at most a bound or whole;
- :func:`require_finite_results` for computed figures: every one must be finite (an overflow to ``inf`` or a
  ``nan`` is reported against the options that produced it) and, where asked, still positive (an underflow to 0).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from dsctl.errors import InputError


def _as_float(value: float | int) -> float:
    """``float(value)``; ``inf`` for an int too large for a float (so it is reported as not finite)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _shown(value: float | int) -> str:
    number = _as_float(value)
    if isinstance(value, int) and math.isinf(number):
        return f"an integer of {len(str(abs(value)))} digits"
    return f"{value:g}" if isinstance(value, float) else str(value)


def require_number(
    value: float | int | None,
    field: str,
    *,
    positive: bool = False,
    non_negative: bool = False,
    at_most: float | None = None,
    text: str | None = None,
) -> None:
    """Raise InputError naming ``field`` unless ``value`` is None or a finite number meeting the bounds.

    ``positive``: > 0; ``non_negative``: >= 0; ``at_most``: <= that bound (all optional). ``text`` is what the
    user typed, shown in the message when it differs from the parsed value (``1e400`` parses to ``inf``).
    """
    if value is None:
        return
    number = _as_float(value)
    if not math.isfinite(number):
        got = _shown(value)
        if text is not None and text.strip() != got:
            got = f"{text.strip()!r} (= {got})"
        raise InputError(f"must be a finite number, got {got}", field=field,
                         hint="give an ordinary number such as 1, 0.5 or 1e6 (no nan, inf or overflow)")
    if positive and not number > 0:
        raise InputError(f"must be positive, got {_shown(value)}", field=field)
    if non_negative and number < 0:
        raise InputError(f"cannot be negative, got {_shown(value)}", field=field)
    if at_most is not None and number > at_most:
        raise InputError(f"must be at most {at_most:g}, got {_shown(value)}", field=field)


def require_finite_results(
    results: Mapping[str, float | int],
    options: Sequence[str],
    *,
    positive: Sequence[str] = (),
) -> None:
    """Raise InputError naming ``options`` if any of ``results`` (label -> value) is not finite, or if a label in
    ``positive`` is not > 0 (it underflowed). Call it before dividing by a result."""
    inputs = ", ".join(options)
    for label, value in results.items():
        number = _as_float(value)
        if not math.isfinite(number):
            raise InputError(f"{label} overflows ({_shown(value)}) with these inputs; check {inputs}",
                             hint="at least one of them is far outside any realistic range")
        if label in positive and not number > 0:
            raise InputError(f"{label} underflows to 0 with these inputs; check {inputs}",
                             hint="at least one of them is far outside any realistic range")
