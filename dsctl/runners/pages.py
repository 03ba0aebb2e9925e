"""How the process asks the kernel for memory while a large simulation runs.

numpy asks for transparent huge pages (``madvise(MADV_HUGEPAGE)``) on every array of 4 MiB or more. Where the
kernel's THP ``defrag`` setting is ``madvise`` (the common default), each such page fault may compact memory
first: on a node whose memory is fragmented by page cache, fresh large arrays then cost ~5 ms of system CPU per
MiB instead of ~0.6 ms (measured on a 2-core VM: 100 MB of fresh int32 arrays 0.57 s against 0.06 s with
4 KiB pages). ``topology simulate`` at 16,384 GPUs allocates ~3 GB over its planes: 1-2 s of system time with
huge pages, 0.6 s without, and less variation with the neighbours' load. The small extra TLB cost of 4 KiB
pages is ~0.4 s of user time there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any


def _switch() -> Callable[[bool], Any] | None:
    """numpy's process-wide hugepage switch (numpy 2: ``numpy._core``, numpy 1: ``numpy.core``), None if absent."""
    import numpy as np

    core = getattr(np, "_core", None) or getattr(np, "core", None)
    switch = getattr(getattr(core, "multiarray", None), "_set_madvise_hugepage", None)
    return switch if callable(switch) else None


@contextlib.contextmanager
def small_pages() -> Iterator[None]:
    """Inside the block numpy does not ask for huge pages for new arrays (arrays made before keep theirs); the
    previous setting comes back afterwards. A numpy without the switch leaves everything as it was."""
    switch = _switch()
    if switch is None:
        yield
        return
    before = bool(switch(False))
    try:
        yield
    finally:
        switch(before)
