"""Device names from templates (hostlists: :mod:`dsctl.cluster.hostlist`).

Templates are Python format strings. Fields (numbering conventions are part of the documented output):

- node:  ``{n}``      node number, 1-based (``node{n:04d}`` -> node0001)
- nic:   ``{nic}``    NIC index inside the node, 0-based like the kernel's device names (``mlx5_{nic}``);
         ``{nic1}`` the same counted from 1, for sites whose descriptions say ``HCA-1`` .. ``HCA-8``
- leaf:  ``{plane}``  plane, 0-based (= the NIC index it serves in MPFT); ``{leaf}`` leaf number in its
         plane, 1-based; ``{pod}`` pod number, 1-based (three-tier only, 1 otherwise)
- spine: ``{plane}``, ``{spine}`` 1-based (in a three-tier plane the spines are the pods' aggregation switches)
- core:  ``{plane}``, ``{core}`` 1-based (three-tier only)

Switch ports are numbered 1..radix, as printed on the switch face plate and shown by ibnetdiscover.

Length: a name must fit an InfiniBand NodeDescription, a 64-byte field (IBA spec, NodeDescription
attribute). A switch's description is its name, so switch names are at most 64 bytes (UTF-8); a host
CA's description is "<hostname> <ibdev>" (the Linux default), so a node name, a space and its longest NIC
name together are at most 64 bytes; otherwise the fabric would truncate them and ``verify`` could not
match the devices. A template itself is at most 128 characters and a field width in it at most 64.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dsctl.errors import InputError
from dsctl.names import DEVICE, shown


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
    "nic": {"nic", "nic1"},
    "leaf": {"plane", "leaf", "pod"},
    "spine": {"plane", "spine", "pod"},
    "core": {"plane", "core"},
}
_FIELD = {"node": "node_name", "nic": "nic_name", "leaf": "leaf_name", "spine": "spine_name", "core": "core_name"}
#: bytes in an InfiniBand NodeDescription (the IBA NodeDescription attribute is 64 octets)
MAX_NAME_BYTES = 64
#: characters in a name template (format specs make a template a little longer than its names)
MAX_TEMPLATE_CHARS = 2 * MAX_NAME_BYTES
_WIDTH = re.compile(r"(\d+)")
#: a character no device name may hold (see ``dsctl.names.DEVICE``); ``\x00`` joins names for one search
_FORBIDDEN = re.compile(r"[^A-Za-z0-9._:/@+\-\x00]")
_RULE = ("names must be letters, digits and '._:/@+-', starting with a letter, digit or '_' (no spaces, commas, "
         "quotes, brackets, '#', '=' or control characters: they break CSV, DOT and Slurm's topology.conf)")


#: the old name of :func:`dsctl.names.shown`, kept only for topology/verify.py (another engineer's file this
#: round); remove once it imports ``shown``
short_repr = shown


def _check_spec_widths(text: str, field: str, parsed: list[tuple[str, str | None, str | None, str | None]]) -> None:
    """Reject nested fields and field widths/precisions above MAX_NAME_BYTES before anything is formatted."""
    for _, name, spec, _ in parsed:
        if name is None or not spec:
            continue
        if "{" in spec or "}" in spec:
            raise InputError(f"{shown(text)}: a field's format may not contain another field", field=field)
        widths = [int(w) for w in _WIDTH.findall(spec)]
        if widths and max(widths) > MAX_NAME_BYTES:
            raise InputError(f"{shown(text)}: field width {max(widths):,} is above the "
                             f"{MAX_NAME_BYTES}-byte limit of an InfiniBand node description",
                             hint="use a zero-padded width such as {n:04d}", field=field)


def check_templates(templates: NameTemplates) -> NameTemplates:
    """Raise InputError naming the field if a template uses an unknown field, is not a format string, is
    longer than MAX_TEMPLATE_CHARS, or has a field width above MAX_NAME_BYTES (checked before formatting)."""
    for kind, allowed in _FIELDS.items():
        text = getattr(templates, kind)
        field = _FIELD[kind]
        given = shown(text)
        if len(text) > MAX_TEMPLATE_CHARS:
            raise InputError(f"{given} is too long: a name template has at most {MAX_TEMPLATE_CHARS} "
                             f"characters (names at most {MAX_NAME_BYTES} bytes, as InfiniBand node "
                             "descriptions allow)", field=field)
        try:
            parsed = list(string.Formatter().parse(text))
        except ValueError as exc:
            raise InputError(f"{given} is not a valid name template: {exc}", field=field) from exc
        fields = {f for _, f, _, _ in parsed if f is not None}
        bad = {f.split(".")[0].split("[")[0] for f in fields} - allowed
        if bad or "" in fields:
            unknown = ", ".join(shown(b, 20) for b in sorted(bad)) or "{}"
            raise InputError(
                f"{given} uses unknown field(s) {unknown}",
                hint=f"a {kind} name may use {', '.join('{' + f + '}' for f in sorted(allowed))}", field=field,
            )
        _check_spec_widths(text, field, parsed)
        try:
            sample = text.format(**{f: 1 for f in allowed})
        except (ValueError, TypeError, IndexError, KeyError, AttributeError) as exc:
            raise InputError(f"{given} cannot be formatted with whole numbers: "
                             f"{shown(str(exc), 60)}", field=field) from exc
        if not DEVICE.fullmatch(sample):
            raise InputError(f"{given} gives {shown(sample)}; {_RULE}", field=field)
        check_name_length([sample], field)
    return templates


def check_name_length(names: Sequence[str], field: str, limit: int = MAX_NAME_BYTES) -> None:
    """Raise InputError naming ``field`` if a name is longer than ``limit`` bytes (UTF-8)."""
    longest = max(names, key=lambda n: len(n.encode()), default="")
    size = len(longest.encode())
    if size > limit:
        cut = repr(longest[:40]) + ("..." if len(longest) > 40 else "")
        raise InputError(f"gives a {size}-byte name {cut}; names are at most {limit} bytes, "
                         "as an InfiniBand node description allows", hint="use a shorter template", field=field)


def check_host_descriptions(node_names: Sequence[str], nic_names: Sequence[str]) -> None:
    """Raise InputError if "<node> <nic>" (a host CA's node description) can exceed MAX_NAME_BYTES."""
    if not node_names or not nic_names:
        return
    node = max(node_names, key=lambda n: len(n.encode()))
    nic = max(nic_names, key=lambda n: len(n.encode()))
    size = len(node.encode()) + 1 + len(nic.encode())
    if size > MAX_NAME_BYTES:
        desc = node + " " + nic
        cut = repr(desc[:40]) + ("..." if len(desc) > 40 else "")
        raise InputError(f"/{{nic_name}} give a {size}-byte host description {cut}; "
                         f"\"<node> <nic>\" must fit the {MAX_NAME_BYTES}-byte InfiniBand node description",
                         hint="shorten the node or NIC name template", field="node_name", mentions=("nic_name",))


def format_names(template: str, field: str, **columns: Any) -> list[str]:
    """Format ``template`` once per row of the equally long integer sequences/arrays ``columns``.

    Raises InputError naming ``field`` if a name breaks the rules of ``check_templates`` (length, no spaces,
    commas, quotes or brackets); larger numbers can make names longer than the checked sample.
    """
    keys = list(columns)
    rows = zip(*(list(columns[k]) for k in keys), strict=True)
    try:
        names = [template.format(**dict(zip(keys, map(int, row), strict=True))) for row in rows]
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise InputError(f"{shown(template)} cannot be used: {shown(str(exc), 60)}", field=field) from exc
    bad = _FORBIDDEN.search("\x00".join(names))
    if bad:
        raise InputError(f"{shown(template)} gives a name with {bad.group()!r}; {_RULE}", field=field)
    odd = next((n for n in names if not DEVICE.fullmatch(n)), None)
    if odd is not None:
        raise InputError(f"{shown(template)} gives {shown(odd)}; {_RULE}", field=field)
    check_name_length(names, field)
    return names


def require_unique(names: Sequence[str], what: str) -> None:
    """Raise InputError if two devices got the same name (a template missing a field, e.g. no ``{plane}``)."""
    if len(set(names)) != len(names):
        seen: set[str] = set()
        dup = next(n for n in names if n in seen or seen.add(n))  # type: ignore[func-returns-value]
        raise InputError(f"the name templates give two devices the same name {shown(dup)} ({what})",
                         hint="include every field of that device kind in its template, e.g. {plane} and {leaf}")
