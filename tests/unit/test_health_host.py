"""Host facts read with psutil in the backend layer."""

from __future__ import annotations

import os
import time

from dsctl.health.backends.host import read_host_facts


def test_live_host_facts_are_sane() -> None:
    host = read_host_facts()
    assert host.num_logical_cpus == os.cpu_count()
    assert host.memory_total_bytes is not None and 2**26 < host.memory_total_bytes < 2**50
    assert host.boot_time_s is not None and 0 < host.boot_time_s < time.time()
    assert host.kernel_release == os.uname().release and host.hostname
