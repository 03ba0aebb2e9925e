"""How the process asks the kernel for memory while a large simulation runs.

numpy asks for transparent huge pages (``madvise(MADV_HUGEPAGE)``) on every array of 4 MiB or more. Where the
kernel's THP ``defrag`` setting is ``madvise`` (the common default), each such page fault may compact memory
first: on a node whose memory is fragmented by page cache, fresh large arrays then cost ~5 ms of system CPU per
MiB instead of ~0.6 ms (measured on a 2-core VM: 100 MB of fresh int32 arrays 0.57 s against 0.06 s with
4 KiB pages). ``topology simulate`` at 16,384 GPUs allocates ~3 GB over its planes: 1-2 s of system time with
huge pages, 0.6 s without, and less variation with the neighbours' load. The small extra TLB cost of 4 KiB
pages is ~0.4 s of user time there.

The switch is the kernel's own, per process: Linux ``prctl(PR_SET_THP_DISABLE, 1)`` (3.15+; kept across fork
and exec, so a child started inside the block has no huge pages either), under which page faults ignore the
advice, rather than numpy's private ``_set_madvise_hugepage``. Measured on the 2-core VM (kernel 6.18, THP
``enabled`` and ``defrag`` both ``madvise``, memory not fragmented then): 12 fresh 8 MiB int32 arrays hold
72 MiB of huge pages (``AnonHugePages`` in ``/proc/self/smaps_rollup``) outside the block and none inside;
``benchmarks.sim_peaks --only alltoall-ecmp`` (16,384 GPUs, dsctl[fast], ``/usr/bin/time -v``, three runs each,
interleaved, load 2.5-3.5): no switch 0.76-2.17 s system time, 5.5-7.7 CPU s; numpy's switch 0.37-0.48 s,
5.4-6.1 CPU s; prctl 0.39-0.43 s, 5.5-5.6 CPU s; 509 MB peak in each.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
from collections.abc import Callable, Iterator

PR_SET_THP_DISABLE = 41
PR_GET_THP_DISABLE = 42


def _prctl() -> Callable[[int, int, int], int] | None:
    """libc's ``prctl(option, arg2, arg3, 0, 0)`` (-1 on error), None off Linux or without a C library."""
    if not sys.platform.startswith("linux"):
        return None
    try:  # the symbols already loaded (libc's among them): no ctypes.util.find_library, which runs ldconfig or cc
        call = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    call.restype = ctypes.c_int
    call.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]

    def prctl(option: int, arg2: int, arg3: int) -> int:
        return int(call(option, arg2, arg3, 0, 0))
    return prctl


@contextlib.contextmanager
def small_pages() -> Iterator[None]:
    """Inside the block this process gets no transparent huge pages for new memory (pages faulted in before
    keep theirs); the previous setting comes back afterwards, also when the block raises. Where prctl cannot
    read or set the switch (not Linux, no C library, a kernel before 3.15, a seccomp filter) nothing changes."""
    prctl = _prctl()
    # 0 allowed, 1 disabled, 3 disabled except where advised (Linux 6.18: PR_THP_DISABLE_EXCEPT_ADVISED = 2,
    # which numpy's advice would still get); -1 unavailable
    before = -1 if prctl is None else prctl(PR_GET_THP_DISABLE, 0, 0)
    if before < 0 or before == 1 or prctl is None or prctl(PR_SET_THP_DISABLE, 1, 0) != 0:
        yield
        return
    try:
        yield
    finally:
        prctl(PR_SET_THP_DISABLE, before & 1, before & ~1)  # as it was
