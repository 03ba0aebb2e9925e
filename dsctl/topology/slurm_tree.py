"""Plane 0 as Slurm's switch tree, each switch's children written as one hostlist, for topology.conf and
topology.yaml (computed once for both).

The hostlists are those of :func:`dsctl.cluster.hostlist.compress` (a test holds the two to the same text), built for
every switch at once: each name is split once into prefix and trailing number, runs and ranges are found by
comparing neighbours, and the texts are joined column-wise (:mod:`dsctl.topology.textcols`). ft3 at 524,288
endpoints lists 1.1M children in about a second instead of eight.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dsctl.cluster import hostlist
from dsctl.names import check_slurm_conf_name
from dsctl.topology.plan import Plan
from dsctl.topology.textcols import column, encoded, lines

_TRAILING_DIGITS = re.compile(r"^(.*?)([0-9]*)$", re.MULTILINE)
#: trailing numbers longer than this are compared as text by ``hostlist.compress`` (no int64 here)
_MAX_DIGITS = 18


@dataclass(frozen=True)
class SwitchEntry:
    """One switch of the tree: its name, ``Nodes`` (a leaf) or ``Switches``, its children as a hostlist and how
    many they are."""

    switch: str
    what: str
    children: str
    count: int


def _groups(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct keys ascending, their values in input order concatenated, start of each key's values)."""
    order = np.argsort(keys, kind="stable")
    k, v = keys[order], values[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]]) if len(k) else np.zeros(0, dtype=np.int64)
    return k[starts], v, starts


def _pairs(upper: np.ndarray, lower: np.ndarray, span: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (upper, lower) pairs sorted by upper then lower (``np.unique(axis=0)`` without its cost)."""
    key = np.sort(upper.astype(np.int64) * span + lower)
    key = key[np.r_[True, key[1:] != key[:-1]]] if len(key) else key
    return key // span, key % span


def switch_tree(plan: Plan) -> list[SwitchEntry]:
    """Plane 0 as a tree: leaves first (each node under the leaf of its first NIC in plane 0), then spines
    listing the leaves they are cabled to, then cores the spines. Every plane of these kinds places nodes
    identically, so plane 0 stands for all."""
    p0 = plan.cable_plane == 0
    node_cab = np.flatnonzero(p0 & (plan.cable_kind == 0))
    order = node_cab[np.lexsort((plan.a_port[node_cab], plan.a_dev[node_cab]))]
    first = order[np.r_[True, plan.a_dev[order][1:] != plan.a_dev[order][:-1]]] if len(order) else order
    leaf_of_node = plan.b_dev[first].astype(np.int64)
    names = plan.device_names
    for name in names:  # checked when formatted; a second guard because a '#' or '=' would rewrite the file
        check_slurm_conf_name(name, "device name")
    span = len(names)
    switches: list[np.ndarray] = []
    children: list[np.ndarray] = []
    starts: list[np.ndarray] = []
    kinds: list[str] = []
    at = 0
    leaves, nodes, cuts = _groups(leaf_of_node, plan.a_dev[first].astype(np.int64))
    blocks = [(leaves, nodes, cuts, "Nodes")]
    listed = np.zeros(span, dtype=bool)
    listed[leaves] = True
    for kind in (1, 2):
        cab = np.flatnonzero(p0 & (plan.cable_kind == kind))
        if not len(cab):
            continue
        upper, lower = _pairs(plan.b_dev[cab], plan.a_dev[cab].astype(np.int64), span)
        keep = listed[lower]
        upper, lower = upper[keep], lower[keep]
        group_keys, group_values, group_cuts = _groups(upper, lower)
        blocks.append((group_keys, group_values, group_cuts, "Switches"))
        listed = np.zeros(span, dtype=bool)
        listed[upper] = True
    for keys, values, cuts, what in blocks:
        switches.append(keys)
        children.append(values)
        starts.append(cuts + at)
        kinds += [what] * len(keys)
        at += len(values)
    all_switches = np.concatenate(switches)
    all_starts = np.concatenate(starts)
    texts = compress_groups(names, np.concatenate(children), all_starts)
    counts = np.diff(np.r_[all_starts, at]).tolist()
    return [SwitchEntry(names[s], w, t, c)
            for s, w, t, c in zip(all_switches.tolist(), kinds, texts, counts, strict=True)]


def compress_groups(names: Sequence[str], children: np.ndarray, starts: np.ndarray) -> list[str]:
    """``hostlist.compress`` of each group of ``children`` (indices into ``names``; group g is
    ``children[starts[g]:starts[g + 1]]``, every group non-empty), for all groups at once."""
    if not len(starts):
        return []
    split = _split_numbers(names)
    widths = np.array([len(d) for _, d in split], dtype=np.int64)
    if int(widths[children].max(initial=0)) > _MAX_DIGITS:
        bounds = [*starts.tolist(), len(children)]
        return [hostlist.compress([names[i] for i in children[lo:hi].tolist()])
                for lo, hi in itertools.pairwise(bounds)]
    prefixes = [pre for pre, _ in split]
    prefix_ids = {pre: i for i, pre in enumerate(dict.fromkeys(prefixes))}
    key = np.array([prefix_ids[pre] for pre in prefixes], dtype=np.int64) * (_MAX_DIGITS + 1) + widths
    value = np.array([int(d) if d else 0 for _, d in split], dtype=np.int64)
    c = children.astype(np.int64)
    n = len(c)
    w, k, v = widths[c], key[c], value[c]
    group_start = np.zeros(n, dtype=bool)
    group_start[starts] = True
    seg_start = group_start | (w == 0) | np.r_[True, w[:-1] == 0] | np.r_[True, k[1:] != k[:-1]]
    range_start = seg_start | np.r_[True, v[1:] != v[:-1] + 1]
    seg_id = np.cumsum(seg_start) - 1
    r_lo = np.flatnonzero(range_start)
    r_hi = np.r_[r_lo[1:] - 1, n - 1]
    single = r_lo == r_hi
    r_seg = seg_id[r_lo]
    r_text = np.where(single, w[r_lo], 2 * w[r_lo] + 1)
    s_lo = np.flatnonzero(seg_start)
    s_count = np.diff(np.r_[s_lo, n])
    s_prefix = np.array([len(p) for p in prefixes], dtype=np.int64)[c[s_lo]]
    s_w = w[s_lo]
    grouped = s_prefix + 2 + np.bincount(r_seg, weights=r_text, minlength=len(s_lo)).astype(np.int64) \
        + np.bincount(r_seg, minlength=len(s_lo)) - 1
    plain = (s_w == 0) | (s_count * (s_prefix + s_w + 1) - 1 <= grouped)
    # one token per child of a plain run, one per range of a bracketed run; tokens joined by ','
    plain_child = plain[seg_id]
    token = plain_child | range_start
    pos = np.flatnonzero(token)
    bracket = ~plain_child[pos]
    range_of = np.cumsum(range_start) - 1
    hi = r_hi[range_of[pos]]
    opens = bracket & seg_start[pos]
    closes = bracket & np.r_[seg_start[1:], True][hi]
    dashes = bracket & ~single[range_of[pos]]
    encoded_names = encoded(names)
    digits = encoded([d for _, d in split])
    open_text = encoded([f"{p}[" for p in prefixes])
    body = np.where(bracket[:, None], _wide(column(digits[c[pos]]), encoded_names),
                    _wide(column(encoded_names[c[pos]]), digits))
    group = np.searchsorted(starts, pos, side="right") - 1
    last = np.r_[group[1:] != group[:-1], True]
    text = lines(_masked(column(open_text[c[pos]]), opens), body, _masked(_dash(digits[c[hi]]), dashes),
                 _masked(np.full((len(pos), 1), ord("]"), np.uint8), closes),
                 np.where(last, ord("\n"), ord(","))[:, None].astype(np.uint8))
    return text.decode().split("\n")[:-1]


def _split_numbers(names: Sequence[str]) -> list[tuple[str, str]]:
    """(prefix, trailing ASCII digits) of every name, as ``hostlist`` splits one, by one regex pass."""
    found = _TRAILING_DIGITS.findall("\n".join(names)) if names else []
    if len(found) != len(names):  # a name holding a line break: one at a time
        return [hostlist.split_number(name) for name in names]
    return found


def _wide(matrix: np.ndarray, other: np.ndarray) -> np.ndarray:
    """``matrix`` NUL-padded to the item width of ``other`` (so the two can be chosen between row by row)."""
    width = max(matrix.shape[1], other.dtype.itemsize)
    out = np.zeros((len(matrix), width), dtype=np.uint8)
    out[:, :matrix.shape[1]] = matrix
    return out


def _dash(digits: np.ndarray) -> np.ndarray:
    out = np.zeros((len(digits), digits.dtype.itemsize + 1), dtype=np.uint8)
    out[:, 0] = ord("-")
    out[:, 1:] = column(digits)
    return out


def _masked(matrix: np.ndarray, keep: np.ndarray) -> np.ndarray:
    return np.where(keep[:, None], matrix, 0).astype(np.uint8)
