"""dsctl health: GPU, NVLink and RDMA health over plain-data snapshots (see docs/health.md).

Checks (checks_gpu, checks_rdma, xid) see only the frozen dataclasses of :mod:`dsctl.health.model`; hardware access
lives in :mod:`dsctl.health.backends` (NVML adapter, strict fake NVML module, sysfs reader/renderer); the fake-node
record (its format and its writer) in :mod:`dsctl.health.record`.
"""
