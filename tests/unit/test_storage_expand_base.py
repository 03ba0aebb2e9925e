"""storage expand keeps each round's replacement base for the chains that moved only (issue 32): it must choose
exactly what recomputing every chain's base every round chooses, in fresh rounds and after the untouched chains
ran out."""

from __future__ import annotations

import functools

import pytest

from dsctl.storage import expand as grow
from dsctl.storage import expand_replace
from dsctl.storage.api import generate_chains
from dsctl.storage.chaintable import IdScheme
from dsctl.storage.crosscheck import FILE_NAMES
from dsctl.storage.expand_replace import replace


def _plan(v: int, n: int, disks: int, k: int, r: int | None) -> tuple[list[tuple[int, ...]], dict[str, str]]:
    files = generate_chains(v, disks, k, r, 1, IdScheme()).files_text
    result = grow.expand({name: files[name] for name in FILE_NAMES}, "t", n, 1e12, 0.0, 0.0)
    steps = [(s.chain_id, s.old_target, s.new_target) for s in result.steps]
    return steps, {name: "".join(result.files_text.pieces(name)) for name in result.files_text}


# fresh rounds only; most steps after the untouched chains ran out; k = 2 and k = 5; an uneven r
@pytest.mark.parametrize(("v", "n", "disks", "k", "r"), [(25, 5, 8, 3, None), (20, 20, 4, 3, None),
                                                         (24, 12, 4, 2, 20), (30, 15, 4, 5, None),
                                                         (40, 30, 4, 3, 12)])
def test_kept_base_chooses_as_the_whole_recompute(monkeypatch: pytest.MonkeyPatch, v: int, n: int, disks: int,
                                                  k: int, r: int | None) -> None:
    monkeypatch.setattr(expand_replace, "KEPT_BASE_MIN_SLOTS", 0)  # these small shapes would take it whole
    kept = _plan(v, n, disks, k, r)
    monkeypatch.setattr(grow, "replace", functools.partial(replace, whole_base=True))
    whole = _plan(v, n, disks, k, r)
    assert kept[0], "the shape must make replacements"
    assert kept == whole
