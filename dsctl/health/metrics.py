"""Raw readings worth graphing, taken from a node snapshot: active NVLinks, NVLink error rates per GPU, RDMA port
state, rate and error-counter rates. Names carry their unit; the output layer adds the ``dsctl_health_`` prefix.

Readings that could not be taken are left out (no series), never reported as zero.
"""

from __future__ import annotations

from dataclasses import dataclass

from dsctl.health.checks_rdma import DEGRADATION_LIMITS, FATAL_COUNTERS, parse_rate, state_code
from dsctl.health.model import NVLINK_COUNTERS, NodeSnapshot, ok

#: RDMA counters exported as per-second rates over the sampling interval
RDMA_ERROR_COUNTERS = ("symbol_error", *FATAL_COUNTERS, *(c[0] for c in DEGRADATION_LIMITS))
GBIT_BYTES = 1e9 / 8


@dataclass(frozen=True)
class Gauge:
    """One sample: metric name (unit-suffixed, without prefix), label pairs in order, value."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def to_data(self) -> dict[str, object]:
        return {"name": self.name, "labels": dict(self.labels), "value": self.value}


def gauges(snap: NodeSnapshot) -> tuple[Gauge, ...]:
    """Gauges of one snapshot (``interval_s`` seconds between the two counter samples)."""
    out: list[Gauge] = []
    interval = snap.interval_s
    for gpu in snap.gpus:
        if gpu.lost is not None or not gpu.links:
            continue
        label: tuple[tuple[str, str], ...] = (("gpu", str(gpu.index)),)
        out.append(Gauge("nvlink_active_links", label, float(sum(1 for link in gpu.links if link.active is True))))
        totals = dict.fromkeys(NVLINK_COUNTERS, 0)
        seen = False
        for link in gpu.links:
            t0, t1 = link.errors_t0, link.errors_t1
            if not (ok(t0) and ok(t1)) or not isinstance(t0, dict) or not isinstance(t1, dict):
                continue
            seen = True
            for name in NVLINK_COUNTERS:
                if name in t0 and name in t1:
                    totals[name] += max(0, t1[name] - t0[name])
        if seen and interval > 0:
            out.extend(Gauge("nvlink_errors_per_second", (*label, ("counter", name)), totals[name] / interval)
                       for name in NVLINK_COUNTERS)
    for nic in snap.nics:
        for port in nic.ports:
            label = ("device", nic.name), ("port", str(port.port))
            code = state_code(port.state)
            if code is not None:
                out.append(Gauge("rdma_port_state", label, float(code)))
            rate = parse_rate(port.rate) if isinstance(port.rate, str) else None
            if rate is not None:
                out.append(Gauge("rdma_port_rate_bytes_per_second", label, rate[0] * GBIT_BYTES))
            if not interval > 0:
                continue
            for name in RDMA_ERROR_COUNTERS:
                if name in port.counters_t0 and name in port.counters_t1:
                    delta = max(0, port.counters_t1[name] - port.counters_t0[name])
                    out.append(Gauge("rdma_port_errors_per_second", (*label, ("counter", name)), delta / interval))
    return tuple(out)
