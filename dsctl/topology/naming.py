"""Device names from templates, and Slurm-style hostlist compression.

Templates are Python format strings. Fields (numbering conventions are part of the documented output):

- node:  ``{n}``      node number, 1-based (``node{n:04d}`` -> node0001)
- nic:   ``{nic}``    NIC index inside the node, 0-based like the kernel's device names (``mlx5_{nic}``)
- leaf:  ``{plane}``  plane, 0-based (= the NIC index it serves in MPFT); ``{leaf}`` leaf number in its
         plane, 1-based; ``{pod}`` pod number, 1-based (three-tier only, 1 otherwise)
- spine: ``{plane}``, ``{spine}`` 1-based (in a three-tier plane the spines are the pods' aggregation switches)
- core:  ``{plane}``, ``{core}`` 1-based (three-tier only)

Switch ports are numbered 1..radix, as printed on the switch face plate and shown by ibnetdiscover.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dsctl.errors import InputError


@dataclass(frozen=True)
class NameTemplates:
    """Name templates for every device kind (see the module docstring for the fields each may use)."""

    node: str = "node{n:04d}"
    nic: str = "mlx5_{nic}"
    leaf: str = "p{plane}-leaf{leaf:02d}"
    spine: str = "p{plane}-spine{spine:02d}"
    core: str = "p{plane}-core{core:03d}"


_FIELDS = {
    "node": {"n"},
    "nic": {"nic"},
    "leaf": {"plane", "leaf", "pod"},
    "spine": {"plane", "spine", "pod"},
    "core": {"plane", "core"},
}
_OPTION = {"node": "--node-name", "nic": "--nic-name", "leaf": "--leaf-name", "spine": "--spine-name",
           "core": "--core-name"}


def check_templates(templates: NameTemplates) -> NameTemplates:
    """Raise InputError naming the option if a template uses an unknown field or is not a format string."""
    for kind, allowed in _FIELDS.items():
        text = getattr(templates, kind)
        option = _OPTION[kind]
        try:
            fields = {f for _, f, _, _ in string.Formatter().parse(text) if f is not None}
        except ValueError as exc:
            raise InputError(f"{option} {text!r} is not a valid name template: {exc}") from exc
        bad = {f.split(".")[0].split("[")[0] for f in fields} - allowed
        if bad or "" in fields:
            raise InputError(
                f"{option} {text!r} uses unknown field(s) {sorted(bad or {'{}'})}",
                hint=f"a {kind} name may use {', '.join('{' + f + '}' for f in sorted(allowed))}",
            )
        try:
            sample = text.format(**{f: 1 for f in allowed})
        except (ValueError, TypeError, IndexError, KeyError) as exc:
            raise InputError(f"{option} {text!r} cannot be formatted with whole numbers: {exc}") from exc
        if not sample or any(c.isspace() for c in sample) or any(c in sample for c in ',"[]'):
            raise InputError(f"{option} {text!r} gives {sample!r}; names must be non-empty with no spaces, "
                             "commas, quotes or brackets")
    return templates


def format_names(template: str, option: str, **columns: Any) -> list[str]:
    """Format ``template`` once per row of the equally long integer sequences/arrays ``columns``."""
    keys = list(columns)
    rows = zip(*(list(columns[k]) for k in keys), strict=True)
    try:
        return [template.format(**dict(zip(keys, map(int, row), strict=True))) for row in rows]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise InputError(f"{option} {template!r} cannot be used: {exc}") from exc


def require_unique(names: Sequence[str], what: str) -> None:
    """Raise InputError if two devices got the same name (a template missing a field, e.g. no ``{plane}``)."""
    if len(set(names)) != len(names):
        seen: set[str] = set()
        dup = next(n for n in names if n in seen or seen.add(n))  # type: ignore[func-returns-value]
        raise InputError(f"the name templates give two devices the same name {dup!r} ({what})",
                         hint="include every field of that device kind in its template, e.g. {plane} and {leaf}")


_TAIL = re.compile(r"(\d+)(\D*)$")


def compress_hostlist(names: Iterable[str]) -> str:
    """Slurm hostlist expression for ``names``: ``node0001,node0002,node0003`` -> ``node[0001-0003]``.

    Names are grouped by (prefix, digit width, suffix) around their last number; order of first appearance
    is kept; names without a number are listed as they are.
    """
    groups: dict[tuple[str, int, str], list[int]] = {}
    plain: list[str] = []
    order: list[tuple[str, int, str] | str] = []
    for name in names:
        match = _TAIL.search(name)
        if not match:
            if name not in plain:
                plain.append(name)
                order.append(name)
            continue
        digits = match.group(1)
        key = (name[:match.start()], len(digits), match.group(2))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(digits))
    parts: list[str] = []
    for item in order:
        if isinstance(item, str):
            parts.append(item)
            continue
        prefix, width, suffix = item
        numbers = sorted(set(groups[item]))
        ranges: list[str] = []
        start = prev = numbers[0]
        for value in [*numbers[1:], None]:
            if value is not None and value == prev + 1:
                prev = value
                continue
            ranges.append(f"{start:0{width}d}" if start == prev else f"{start:0{width}d}-{prev:0{width}d}")
            if value is not None:
                start = prev = value
        if len(numbers) == 1:
            parts.append(f"{prefix}{numbers[0]:0{width}d}{suffix}")
        elif suffix:
            parts.extend(f"{prefix}{n:0{width}d}{suffix}" for n in numbers)
        else:
            parts.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(parts)
