"""dsctl health: GPU, NVLink and RDMA health over plain-data snapshots (see docs/health.md).

Checks (checks_gpu, checks_rdma, xid) see only the frozen dataclasses of :mod:`dsctl.health.model`; hardware access
lives in :mod:`dsctl.health.backends` (NVML adapter, strict fake NVML module, sysfs reader/renderer); the fake-node
record (its format and its writer) in :mod:`dsctl.health.record`.
"""

#: the public surface: the modules (and names) other packages, the commands and benchmarks may import;
#: tests/unit/test_architecture.py holds every import from outside the package to this list
__all__ = [
    "api",
    "backends",
    "burnin",
    "check_catalog",
    "drain",
    "expectations",
    "fleet",
    "inventory",
    "metrics",
    "model",
    "perf",
    "record",
    "sample",
    "source",
    "topo",
]
