"""Take a node snapshot: every static reading once, counters twice ``interval_s`` apart.

``wait(interval_s)`` is injected: ``time.sleep`` on a live node, "advance the fake to t1" when replaying a record,
so rate checks run instantly in CI through the same code path. ``interval_s == 0`` takes one sample only: the
second counter reading equals the first and the rate checks report SKIP.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from dsctl.errors import InputError
from dsctl.health.backends.base import GpuBackend, NvmlNoPermission, RdmaSource
from dsctl.health.model import Gpu, HostFacts, Nic, NodeSnapshot, Unavailable


def _one_sample(gpu: Gpu) -> Gpu:
    """``gpu`` with its t1 counters equal to t0 (nothing measured between them)."""
    return dataclasses.replace(gpu, links=tuple(dataclasses.replace(link, errors_t1=link.errors_t0)
                                                for link in gpu.links), pcie_replay_t1=gpu.pcie_replay_t0)


def _one_sample_nics(nics: tuple[Nic, ...]) -> tuple[Nic, ...]:
    return tuple(dataclasses.replace(n, ports=tuple(dataclasses.replace(p, counters_t1=dict(p.counters_t0))
                                                    for p in n.ports)) for n in nics)


def sample_node(gpus: GpuBackend | None, rdma: RdmaSource | None, interval_s: float,
                wait: Callable[[float], None], hostname: str = "", with_p2p: bool = True,
                host: HostFacts | None = None, kernel_log: str | None = None) -> NodeSnapshot:
    """Sample the node. ``gpus=None`` skips NVML (RDMA only); ``rdma=None`` skips sysfs; ``host`` and
    ``kernel_log`` are carried as they are.

    Raises LibraryMissing (exit 3) when the NVML library cannot be initialised; NVML answering NO_PERMISSION is
    recorded in ``NodeSnapshot.nvml`` (a G1 finding) instead.
    """
    if interval_s < 0:
        raise InputError(f"must be 0 (one sample) or a positive number of seconds, got {interval_s}",
                         field="interval_s")
    gpu_list = []
    driver: str | Unavailable = Unavailable("unsupported", "NOT_SAMPLED", "nvml")
    count: int | Unavailable = Unavailable("unsupported", "NOT_SAMPLED", "nvml")
    nvml_error: Unavailable | None = None
    if gpus is not None:
        try:
            gpus.start()
        except NvmlNoPermission as exc:
            nvml_error = driver = count = exc.why
            gpus = None
    if gpus is not None:
        driver = gpus.driver_version()
        count = gpus.device_count()
        gpu_list = [gpus.gpu(i) for i in range(count if isinstance(count, int) else 0)]
    pci_gpus = rdma.pci_gpus() if rdma is not None else ()
    nics = rdma.nics() if rdma is not None else ()
    if interval_s > 0:
        wait(interval_s)
    if gpus is not None:
        second = []
        for gpu in gpu_list:
            if gpu.lost is not None:
                second.append(gpu)
                continue
            if interval_s > 0:
                links, replay = gpus.counters(gpu.index, gpu.links)
                gpu = dataclasses.replace(gpu, links=links, pcie_replay_t1=replay)
            else:
                gpu = _one_sample(gpu)
            p2p = {}
            if with_p2p and gpu.links:
                p2p = {peer.index: gpus.p2p_nvlink(gpu.index, peer.index)
                       for peer in gpu_list if peer.index != gpu.index and peer.lost is None and peer.links}
            second.append(dataclasses.replace(gpu, p2p_nvlink=p2p))
        gpu_list = second
        gpus.stop()
    if rdma is not None:
        nics = rdma.recount(nics) if interval_s > 0 else _one_sample_nics(nics)
    return NodeSnapshot(
        hostname=hostname,
        driver_version=driver,
        device_count=count,
        gpus=tuple(gpu_list),
        pci_gpus=pci_gpus,
        nics=nics,
        nvidia_peermem=rdma.nvidia_peermem() if rdma is not None else False,
        interval_s=float(interval_s),
        nvml=nvml_error,
        host=host,
        kernel_log=kernel_log,
        driver=rdma.driver_facts() if rdma is not None else None,
    )


@dataclass
class Sources:
    """Opened backends (``dsctl.health.backends.source.open_source``): ``wait(seconds)`` between the samples,
    ``interval_s`` apart; ``replayed`` names the record being replayed ('' live); ``origin`` says why these."""

    gpus: GpuBackend | None
    rdma: RdmaSource | None
    wait: Callable[[float], None]
    interval_s: float
    hostname: str
    host: HostFacts | None
    kernel_log: str | None = None
    replayed: str = ""
    origin: str = ""


def sample_sources(src: Sources) -> NodeSnapshot:
    """:func:`sample_node` over opened sources. A replayed record is data: a value of the wrong type for its
    field (a word, null or NaN where NVML returns a whole number, an integer beyond 64 bits) is an InputError
    naming the record, not a bug."""
    try:
        snap = sample_node(src.gpus, src.rdma, src.interval_s, src.wait, hostname=src.hostname, host=src.host,
                           kernel_log=src.kernel_log)
    except (ValueError, TypeError, OverflowError, KeyError, IndexError, AttributeError) as exc:
        if not src.replayed:
            raise
        raise InputError(f"{src.replayed}: a value has the wrong type for its field "
                         f"({type(exc).__name__}: {str(exc)[:120]})", field="from_record",
                         hint="counters, widths, generations and limits are whole numbers") from None
    return dataclasses.replace(snap, source=src.origin)
