"""Host facts for ``dsctl health``, read with psutil (hostname, kernel release, CPUs, memory, boot time)."""

from __future__ import annotations

import platform
import socket
from collections.abc import Callable
from typing import TypeVar

import psutil  # type: ignore[import-untyped]  # no stubs installed (types-psutil)

from dsctl.health.model import HostFacts

T = TypeVar("T")


def _attempt(read: Callable[[], T]) -> T | None:
    """``read()``, or ``None`` when the fact cannot be read here (container without /proc access, odd platform)."""
    try:
        return read()
    except (OSError, RuntimeError, ValueError, AttributeError, psutil.Error):
        return None


def read_host_facts() -> HostFacts:
    """This machine's facts; a fact that cannot be read is ``None`` (never an exception)."""
    return HostFacts(
        hostname=_attempt(socket.gethostname) or None,
        kernel_release=_attempt(lambda: platform.uname().release) or None,
        num_logical_cpus=_attempt(lambda: psutil.cpu_count(logical=True)),
        memory_total_bytes=_attempt(lambda: int(psutil.virtual_memory().total)),
        boot_time_s=_attempt(lambda: float(psutil.boot_time())),
    )
