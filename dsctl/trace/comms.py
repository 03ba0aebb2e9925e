"""Which events of a trace are its collectives, per backend, and which of them synchronise the ranks.

GPU traces (NCCL, DeepEP, ...): the communication kernels (``ncclDevKernel_*``/``ncclKernel_*``, DeepEP's
``dispatch``/``combine``/``notify_dispatch`` ...), classified by :mod:`dsctl.trace.classify`; NCCL kernels carry
the ``record_param_comms`` arguments (``Collective name``, ``Process Group Name``, ``Seq``) that Kineto copies to
the kernel it launched. CPU-only traces (gloo), in order of preference (:data:`HOST_SOURCES`):

1. ``gloo:<op>`` ``user_annotation`` events on the ``pt_gloo_runloop`` threads: the collective as gloo runs it,
   from the moment the work is picked up (the rank arrived) to its completion;
2. ``nccl:<op>`` annotations (ProcessGroupNCCL's host labels) when a trace has them but no kernels;
3. ``record_param_comms`` CPU ops with a ``Collective name`` (NCCL/XCCL host side);
4. ``c10d::<op>_`` enqueue ops on the main thread (any backend), as the last resort.

Synchronising collectives (:func:`is_synchronising`) are those every member leaves only after every member
arrived: all-reduce, all-gather, reduce-scatter, all-to-all and barrier (and DeepEP's barrier-based notify
kernels, by their source). Broadcast, reduce, gather, scatter and send/recv are not: a non-root rank may finish
before the root arrives, so their ends are no clock reference.
"""

from __future__ import annotations

import re

import numpy as np
from numpy.typing import NDArray

from dsctl.trace.parse import EventTable

#: host-side collective sources of CPU-only traces, in order of preference: (name, regex on the event name)
HOST_SOURCES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("gloo", re.compile(r"^gloo:")),
    ("nccl-annotation", re.compile(r"^nccl:")),
    ("record_param_comms", re.compile(r"^record_param_comms$")),
    ("c10d", re.compile(r"^c10d::")),
)
_SYNC_OPS = frozenset({"allreduce", "allgather", "reducescatter", "alltoall", "alltoallv", "barrier"})
_SUFFIXES = ("intotensorcoalesced", "intotensor", "tensorcoalesced", "coalesced", "base", "tensor", "single")
_DEEPEP_SYNC = re.compile(r"(?:deep_ep|dpsk::ep)(?:::legacy)?::(?:intranode|internode|internode_ll)::"
                          r"(?:notify_dispatch|cached_notify(?:_dispatch|_combine)?|barrier|clean_low_latency_buffer)\b")
_NCCL_KERNEL = re.compile(r"^(?:void )?(?:nccl|rccl)(?:Dev|Symk|SymkDev)?Kernel_([A-Za-z]+)")


def op_name(label: str) -> str:
    """A collective's operation in one spelling: ``gloo:all_reduce``, ``allreduce``, ``AllReduce``,
    ``c10d::allreduce_``, ``_allgather_base``, ``all_gather_into_tensor`` -> ``allreduce``/``allgather``."""
    name = label.removeprefix("void ")
    kernel = _NCCL_KERNEL.match(name)
    if kernel:
        name = kernel.group(1)
    for prefix in ("gloo:", "nccl:", "c10d::"):
        name = name.removeprefix(prefix)
    op = re.sub(r"[^a-z]", "", name.lower())
    for suffix in _SUFFIXES:
        if op.endswith(suffix) and op[:-len(suffix)] in _SYNC_OPS:
            return op[:-len(suffix)]
    return op


_P2P_OPS = frozenset({"send", "recv", "sendrecv", "isend", "irecv", "batchisendirecv", "ptop"})


def is_point_to_point(label: str) -> bool:
    """True for send/recv (``ncclDevKernel_SendRecv``, ``Collective name`` ``send``/``recv``): one transfer
    between two ranks, which matching by order across all ranks pairs with other transfers."""
    return op_name(label) in _P2P_OPS


def is_synchronising(label: str) -> bool:
    """True for the collectives whose ends are a clock reference (see the module docstring)."""
    return op_name(label) in _SYNC_OPS or _DEEPEP_SYNC.search(label) is not None


def host_label(name: str) -> str:
    """The label of a host collective event: ``gloo:all_reduce`` -> ``all_reduce``, ``c10d::allreduce_`` ->
    ``allreduce``."""
    for prefix in ("gloo:", "nccl:", "c10d::"):
        if name.startswith(prefix):
            return name[len(prefix):].rstrip("_") or name
    return name


def host_collectives(table: EventTable) -> tuple[str, NDArray[np.bool_]]:
    """``(source name, mask over table)`` of the host collective events of a CPU-only trace (first source of
    :data:`HOST_SOURCES` present); ``("", all False)`` when there is none."""
    for name, regex in HOST_SOURCES:
        hit = np.array([regex.search(n) is not None for n in table.names], dtype=bool)
        if not hit.any():
            continue
        mask = hit[table.name_code]
        if name == "record_param_comms":
            mask &= np.isin(np.arange(table.size), np.fromiter(table.collective, dtype=np.int64,
                                                               count=len(table.collective)))
            # a "wait" record is no collective of its own
            for i, coll in table.collective.items():
                if coll == "wait":
                    mask[i] = False
        if mask.any():
            return name, mask
    return "", np.zeros(table.size, dtype=bool)
