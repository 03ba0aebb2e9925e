"""Which trace events are communication: a documented, overridable list of regular expressions.

A pattern matches an event when ``re.search(pattern, name)`` succeeds. The defaults cover NCCL/RCCL kernels,
DeepEP-style expert-parallel all-to-all kernels, peer-to-peer copies and the CPU-side collective ops of
CPU-only (gloo) runs. ``--comm-pattern`` replaces the list, ``--add-comm-pattern`` extends it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from dsctl.errors import InputError

#: default communication patterns, ``(regex, what it is for)``; the order only matters for documentation
DEFAULT_COMM_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"^nccl", "NCCL/RCCL GPU kernels (ncclDevKernel_*, ncclKernel_*) and nccl:* CPU annotations"),
    (r"^msccl|^rccl", "MSCCL / RCCL-specific kernels"),
    (r"(^|::|\s)(notify_|cached_notify_)?(dispatch|combine)\b",
     "DeepEP-style all-to-all kernels: dispatch, combine, void deep_ep::intranode::dispatch<...>(...), "
     "notify_dispatch"),
    (r"userbuffers", "Transformer Engine userbuffers kernels (tensor-parallel communication overlap)"),
    (r"Memcpy PtoP|cudaMemcpyPeer|MemcpyPeer", "peer-to-peer (P2P, NVLink) copies"),
    (r"^c10d::|^gloo:|record_param_comms|^ProcessGroup", "CPU-side collectives (c10d ops, gloo, comms records)"),
)

#: the default list as plain regexes
DEFAULT_PATTERNS: tuple[str, ...] = tuple(p for p, _ in DEFAULT_COMM_PATTERNS)

_NCCL_COLLECTIVE = re.compile(r"^(?:nccl|rccl|msccl)(?:Dev)?Kernel_([A-Za-z]+)")


def compile_patterns(patterns: Sequence[str], option: str = "--comm-pattern") -> re.Pattern[str]:
    """One compiled alternation of ``patterns``; an invalid regex raises InputError naming it and ``option``."""
    if not patterns:
        raise InputError(f"{option}: no communication patterns left; give at least one regular expression")
    for pattern in patterns:
        if not pattern.strip():
            raise InputError(f"{option} {pattern!r}: an empty pattern matches every event name, so everything "
                             "would count as communication", hint="give a regular expression such as 'nccl|deep_ep'")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise InputError(f"{option} {pattern!r}: not a valid regular expression ({exc})") from None
    return re.compile("|".join(f"(?:{p})" for p in patterns))


def classify_names(names: Sequence[str], regex: re.Pattern[str]) -> NDArray[np.bool_]:
    """``is_comm[i]`` for each distinct event name (shape ``(len(names),)``); callers map names to codes first."""
    return np.fromiter((regex.search(n) is not None for n in names), dtype=bool, count=len(names))


def collective_label(name: str, args_collective: str | None = None) -> str:
    """Short label of a communication event for the per-collective table.

    The profiler's ``"Collective name"`` argument wins (``allreduce``); else an NCCL kernel's collective
    (``ncclDevKernel_AllGather_RING_LL`` -> ``AllGather``); else the name without C++ template arguments.
    """
    if args_collective:
        return args_collective
    name = name.removeprefix("void ")
    match = _NCCL_COLLECTIVE.match(name)
    if match:
        return match.group(1)
    cut = len(name)
    for mark in ("<", "("):
        at = name.find(mark)
        if 0 < at < cut:
            cut = at
    return name[:cut][:80]
