"""Numbers in a replayed health record must be what NVML and sysfs can return."""

from __future__ import annotations

from typing import Any

from dsctl.errors import InputError


def check_record_numbers(data: Any, source: str) -> None:
    """Record integers fit what NVML and sysfs return, 64 bits (else exit 2, not an overflow deep inside a
    check). Floats are checked where they are used (NaN and inf are named there). Iterative: any depth."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, dict):
            stack.extend((f"{where}.{key}" if where else str(key), value) for key, value in node.items())
        elif isinstance(node, list):
            stack.extend((f"{where}[{index}]", value) for index, value in enumerate(node))
        elif isinstance(node, int) and not isinstance(node, bool) and not -(2**63) <= node < 2**64:
            raise InputError(f"{source}: {where} is an integer of {len(str(abs(node))):,} digits; record values "
                             "are 64-bit integers")
        elif isinstance(node, str) and len(node) > 20 and node.strip().lstrip("+-").isdigit():
            # quoted digits are read as integers by the fake NVML (as sysfs text is by the reader)
            raise InputError(f"{source}: {where} is a number of {len(node.strip()):,} digits; record values are "
                             "64-bit integers")
