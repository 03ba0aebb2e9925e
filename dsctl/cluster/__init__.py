"""The shared model of the cluster: the planned fabric (``plan.json``) and the rank map (``ranks.csv``).

Every command group that needs to know where something is (a rank, a NIC, a cable) reads these two files through
this package, so no domain package reaches into another's internals: ``topology`` writes plan.json and
``launch`` writes ranks.csv, and ``trace``, ``eplb``, ``health`` and ``topology`` itself read them here.

Low floor: this package imports only the standard library, numpy, :mod:`dsctl.errors` and :mod:`dsctl.textjson`
(checked by tests/unit/test_architecture.py). Pure functions over texts: the command layer reads the files.

- :mod:`dsctl.cluster.plan_file`: plan.json schema, :class:`PlannedFabric`, :func:`load_plan`.
- :mod:`dsctl.cluster.ranks_file`: ranks.csv columns, :class:`RankTable`, :func:`load_ranks`.
- :mod:`dsctl.cluster.place`: :class:`Places`, where each rank sits (node, GPU, NIC, plane, leaf, groups).
- :mod:`dsctl.cluster.hostlist`: Slurm hostlists, dsctl's own grammar (``expand``, ``node_names``, ``compress``).
"""

from dsctl.cluster.place import Places, place_ranks
from dsctl.cluster.plan_file import (
    CABLE_COLUMNS,
    CABLE_KINDS,
    DEVICE_COLUMNS,
    PLAN_SCHEMA,
    TIER_NAMES,
    PlannedFabric,
    Port,
    load_plan,
)
from dsctl.cluster.ranks_file import RANK_COLUMNS, RankTable, load_ranks

#: the public surface: the modules (and names) other packages, the commands and benchmarks may import;
#: tests/unit/test_architecture.py holds every import from outside the package to this list
__all__ = [
    "CABLE_COLUMNS",
    "CABLE_KINDS",
    "DEVICE_COLUMNS",
    "PLAN_SCHEMA",
    "RANK_COLUMNS",
    "TIER_NAMES",
    "Places",
    "PlannedFabric",
    "Port",
    "RankTable",
    "hostlist",
    "load_plan",
    "load_ranks",
    "place_ranks",
    "plan_file",
]
