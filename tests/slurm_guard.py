"""The default test run is Slurm-free: every test that starts the single-host Slurm (tests/ci/slurm_up.sh, about
160 s of set-up for 256 emulated nodes) must be marked ``slow``, which the default run deselects and .ci/run's slow
step runs. tests/conftest.py refuses a collection that breaks this."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

#: fixtures that start Slurm daemons (munged, slurmctld, slurmd), directly or through another fixture
SLURM_FIXTURES = frozenset({"slurm_cluster"})


class _Item(Protocol):
    nodeid: str
    fixturenames: list[str]

    def get_closest_marker(self, name: str) -> object | None: ...


def unmarked_slurm_tests(items: Iterable[_Item]) -> list[str]:
    """Node ids of the tests that use a Slurm-starting fixture (their fixture closure) without the slow mark."""
    return [item.nodeid for item in items
            if SLURM_FIXTURES.intersection(getattr(item, "fixturenames", ()))
            and item.get_closest_marker("slow") is None]
