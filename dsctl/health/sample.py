"""Take a node snapshot: every static reading once, counters twice ``interval_s`` apart.

``wait(interval_s)`` is injected: ``time.sleep`` on a live node, "advance the fake to t1" when replaying a record,
so rate checks run instantly in CI through the same code path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from dsctl.errors import InputError
from dsctl.health.backends.base import GpuBackend, RdmaSource
from dsctl.health.model import HostFacts, NodeSnapshot, Unavailable


def sample_node(gpus: GpuBackend | None, rdma: RdmaSource | None, interval_s: float,
                wait: Callable[[float], None], hostname: str = "", with_p2p: bool = True,
                host: HostFacts | None = None) -> NodeSnapshot:
    """Sample the node. ``gpus=None`` skips NVML (RDMA only); ``rdma=None`` skips sysfs; ``host`` is carried as is.

    Raises LibraryMissing (exit 3) when the NVML library cannot be initialised.
    """
    if interval_s <= 0:
        raise InputError(f"--interval must be a positive number of seconds, got {interval_s}")
    gpu_list = []
    driver: str | Unavailable = Unavailable("unsupported", "NOT_SAMPLED", "nvml")
    count: int | Unavailable = Unavailable("unsupported", "NOT_SAMPLED", "nvml")
    if gpus is not None:
        gpus.start()
        driver = gpus.driver_version()
        count = gpus.device_count()
        gpu_list = [gpus.gpu(i) for i in range(count if isinstance(count, int) else 0)]
    pci_gpus = rdma.pci_gpus() if rdma is not None else ()
    nics = rdma.nics() if rdma is not None else ()
    wait(interval_s)
    if gpus is not None:
        second = []
        for gpu in gpu_list:
            if gpu.lost is not None:
                second.append(gpu)
                continue
            links, replay = gpus.counters(gpu.index, gpu.links)
            p2p = {}
            if with_p2p and gpu.links:
                p2p = {peer.index: gpus.p2p_nvlink(gpu.index, peer.index)
                       for peer in gpu_list if peer.index != gpu.index and peer.lost is None and peer.links}
            second.append(dataclasses.replace(gpu, links=links, pcie_replay_t1=replay, p2p_nvlink=p2p))
        gpu_list = second
        gpus.stop()
    if rdma is not None:
        nics = rdma.recount(nics)
    return NodeSnapshot(
        hostname=hostname,
        driver_version=driver,
        device_count=count,
        gpus=tuple(gpu_list),
        pci_gpus=pci_gpus,
        nics=nics,
        nvidia_peermem=rdma.nvidia_peermem() if rdma is not None else False,
        interval_s=float(interval_s),
        host=host,
    )
