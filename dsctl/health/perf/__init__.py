"""``dsctl health perf``: perftest (``ib_*_bw``) and nccl-tests reports read and judged against the node profile.

Modules: ``perftest`` and ``nccltests`` (parsers: text in, frozen dataclasses out), ``expect`` (what the path should
deliver: NIC line rate x efficiency, the bus bandwidth of a collective on N nodes), ``judge`` (one verdict per
run). See docs/health.md ("Bandwidth reports").
"""
