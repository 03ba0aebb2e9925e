"""Unit constants, parsing of quantities with units, and human formatting.

Every quantity inside dsctl is a plain number in a base unit named in the variable:
``*_bytes`` (bytes), ``*_gbps`` (gigabits per second, 1e9 bit/s, the NIC convention),
``*_bytes_per_s`` (bytes per second), ``*_s`` (seconds), ``*_usd`` (US dollars), ``num_*`` (counts).
"""

from __future__ import annotations

import math
import re

KB = 1000
MB = 1000**2
GB = 1000**3
TB = 1000**4
KIB = 1024
MIB = 1024**2
GIB = 1024**3
TIB = 1024**4
PIB = 1024**5

#: seconds in a day: the longest wait dsctl accepts for a job, a fleet command or a burn-in, and tokens per day
DAY_S = 86_400.0

_BYTE_UNITS: dict[str, float] = {
    "B": 1,
    "KB": KB, "MB": MB, "GB": GB, "TB": TB, "PB": 1000**5,
    "KIB": KIB, "MIB": MIB, "GIB": GIB, "TIB": TIB, "PIB": PIB,
}
#: a decimal number: ``\d+(?:\.\d*)?`` (not ``\d+\.?\d*``, whose two digit runs split a long run every way: 44 s
#: for 20,000 digits and a letter that is no unit)
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_QUANTITY = re.compile(rf"^\s*({_NUMBER})\s*([A-Za-z/]+)\s*$")
_COUNT = re.compile(rf"^\s*({_NUMBER})\s*([A-Za-z]?)\s*$")
_COUNT_SUFFIX = {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


class QuantityError(ValueError):
    """A string could not be read as a quantity of the expected kind."""


def _split(text: str) -> tuple[float, str]:
    match = _QUANTITY.match(text)
    if not match:
        raise QuantityError(f"{text!r} is not a number followed by a unit")
    value = float(match.group(1))
    if not math.isfinite(value) or abs(value) > 1e30:  # 1e400 reads as inf: bad input, never an overflow later
        raise QuantityError(f"{text[:40]!r}: the number is out of range (at most 1e30 of its unit)")
    return value, match.group(2)


def parse_bytes(text: str | int | float) -> int:
    """Parse ``"80 GiB"``, ``"14 TiB"``, ``"70272 B"`` into bytes. Bare numbers are rejected."""
    if isinstance(text, (bool, int, float)):
        raise QuantityError(f"{text!r} has no unit; write it like '80 GiB' or '141 GB'")
    value, unit = _split(text)
    factor = _BYTE_UNITS.get(unit.upper())
    if factor is None:
        raise QuantityError(f"unit {unit!r} in {text!r} is not a byte unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)")
    return round(value * factor)


def parse_rate_bits(text: str | int | float) -> float:
    """Parse ``"400 Gb/s"`` or ``"900 GB/s"`` into bits per second.

    Lower-case ``b`` means bits and upper-case ``B`` bytes, as on data sheets.
    """
    if isinstance(text, (bool, int, float)):
        raise QuantityError(f"{text!r} has no unit; write it like '400 Gb/s' (bits) or '900 GB/s' (bytes)")
    value, unit = _split(text)
    if not unit.endswith("/s"):
        raise QuantityError(f"unit {unit!r} in {text!r} is not a rate; use Gb/s or GB/s")
    prefix = unit[:-2]
    scale = {"": 1, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
    if prefix.endswith("bit"):
        p, per = prefix[:-3], 1.0
    elif prefix.endswith("b"):
        p, per = prefix[:-1], 1.0
    elif prefix.endswith("B"):
        p, per = prefix[:-1], 8.0
    else:
        raise QuantityError(f"unit {unit!r} in {text!r} is not a rate; use Gb/s or GB/s")
    if p not in scale:
        raise QuantityError(f"unit {unit!r} in {text!r} has an unknown prefix {p!r}")
    return value * scale[p] * per


def parse_count(text: str | int | float) -> float:
    """Parse a count with an optional SI suffix: ``"14.8T"`` -> 1.48e13, ``"180K"`` -> 1.8e5, ``"37B"`` -> 3.7e10."""
    if isinstance(text, bool):
        raise QuantityError(f"{text!r} is not a number")
    if isinstance(text, (int, float)):
        return float(text)
    match = _COUNT.match(text)
    if not match or match.group(2).upper() not in _COUNT_SUFFIX:
        raise QuantityError(f"{text!r} is not a number with an optional K, M, B/G or T suffix")
    return float(match.group(1)) * _COUNT_SUFFIX[match.group(2).upper()]


def human_bytes(num_bytes: float, binary: bool = True, digits: int = 1) -> str:
    """``human_bytes(85899345920) == '80.0 GiB'``; decimal units with ``binary=False``."""
    if num_bytes is None or (isinstance(num_bytes, float) and math.isnan(num_bytes)):
        return "n/a"
    base = 1024.0 if binary else 1000.0
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"] if binary else ["B", "KB", "MB", "GB", "TB", "PB"]
    value = float(num_bytes)
    for unit in units:
        if abs(value) < base or unit == units[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.{digits}f} {unit}"
        value /= base
    return f"{value:.{digits}f} {units[-1]}"


def format_gib(num_bytes: float, digits: int = 1, unit: bool = True) -> str:
    """``format_gib(74197237760) == '69.1 GiB'``: always in GiB (``unit=False``: the number alone), so that
    memory figures of one table line up, unlike :func:`human_bytes` which picks the unit."""
    text = f"{num_bytes / GIB:.{digits}f}"
    return f"{text} GiB" if unit else text


def human_count(value: float, digits: int = 2) -> str:
    """``human_count(2_788_000) == '2.79M'``."""
    for suffix, factor in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(value) >= factor:
            return f"{value / factor:.{digits}f}{suffix}"
    return f"{value:g}"


def human_usd(value_usd: float) -> str:
    """``human_usd(5.576e6) == '$5.58M'``."""
    return "$" + human_count(value_usd)
