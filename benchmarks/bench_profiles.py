"""Loading every built-in profile (the start-up cost of most commands)."""

from __future__ import annotations

from typing import Any

from benchmarks.case import Case
from dsctl.profiles.loader import ProfileStore


def _load_all(_: Any) -> int:
    store = ProfileStore()
    return len([store.get(e.kind, e.name) for e in store.entries()])


CASES = [Case("profiles: load every built-in", lambda: None, _load_all, target_s=0.1)]
