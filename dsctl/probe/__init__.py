"""The burn-in probe that runs on training nodes: ``python -m dsctl.probe --round SPEC`` (see docs/burn-in.md).

It is a payload, not part of the dsctl command: torch is imported only inside it (and only in :mod:`exchange`),
so dsctl itself never depends on torch. Exit 3 with a one-line message where torch is missing.
"""

PROBE_SCHEMA = "dsctl.probe/1"
#: exit status when torch (torch.distributed) cannot be imported on the node
EXIT_NO_TORCH = 3
