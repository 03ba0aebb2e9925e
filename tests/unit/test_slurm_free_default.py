"""The default test run starts no Slurm: the collection guard of tests/conftest.py (tests/slurm_guard.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.slurm_guard import unmarked_slurm_tests


@dataclass
class FakeItem:
    nodeid: str
    fixturenames: list[str]
    markers: set[str] = field(default_factory=set)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


def test_a_slurm_test_without_the_slow_mark_is_named() -> None:
    items = [FakeItem("e2e/a.py::t_slow", ["cli", "slurm_cluster"], {"slow"}),
             FakeItem("e2e/b.py::t_unmarked", ["tmp_path", "slurm_cluster"]),
             FakeItem("unit/c.py::t_plain", ["tmp_path"])]
    assert unmarked_slurm_tests(items) == ["e2e/b.py::t_unmarked"]


def test_collection_writes_bytecode() -> None:
    """tests/conftest.py turns bytecode caching back on (PYTHONDONTWRITEBYTECODE made every collection recompile)."""
    import sys

    assert sys.dont_write_bytecode is False
