"""Numbers in a replayed health record must be what NVML and sysfs can return."""

from __future__ import annotations

import math
from typing import Any

from dsctl.errors import InputError


def check_record_numbers(node: Any, source: str, where: str = "") -> None:
    """Record numbers fit what NVML and sysfs return: 64-bit integers and finite floats (else exit 2, not an
    overflow deep inside a check)."""
    if isinstance(node, dict):
        for key, value in node.items():
            check_record_numbers(value, source, f"{where}.{key}" if where else str(key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            check_record_numbers(value, source, f"{where}[{index}]")
    elif isinstance(node, bool):
        return
    elif isinstance(node, int) and not -(2**63) <= node < 2**64:
        raise InputError(f"{source}: {where} is an integer of {len(str(abs(node))):,} digits; record values are "
                         "64-bit integers")
    elif isinstance(node, float) and not math.isfinite(node):
        raise InputError(f"{source}: {where} is {node}; record values are finite numbers")
