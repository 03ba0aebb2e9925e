"""3FS storage: cluster sizing (``sizing``) and chain-table generation and checks (``design``, ``layout``,
``balance``, ``chaintable``, ``api``). Pure logic; the command layer reads and writes files."""

#: the public surface: the modules (and names) other packages, the commands and benchmarks may import;
#: tests/unit/test_architecture.py holds every import from outside the package to this list
__all__ = [
    "api",
    "balance",
    "chaintable",
    "choice",
    "crosscheck",
    "doctor",
    "expand",
    "sizing",
]
