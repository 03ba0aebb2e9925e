"""Multi-plane fat-tree planning: Table 3 sizing, wiring plans and exports, fabric verification.

Modules: ``sizing`` (closed-form topology sizes and costs), ``naming`` (name templates),
``fabric`` (vectorised plane construction), ``plan`` (specs, plans), ``summary``, ``export`` (CSV, JSON,
Slurm), ``graphics`` (DOT, SVG), ``observed`` (ibnetdiscover / links CSV parsers), ``verify``, ``api``;
``sim/`` (flow-level simulation of a workload on a plan: ``dsctl topology simulate``).
"""

#: the public surface: the modules (and names) other packages, the commands and benchmarks may import;
#: tests/unit/test_architecture.py holds every import from outside the package to this list
__all__ = [
    "api",
    "export",
    "ibformats",
    "observed",
    "plan",
    "sim",
    "sizing",
    "summary",
    "verify",
]
