"""dsctl/runners/pages.py: numpy's huge-page advice is off inside ``small_pages`` and comes back afterwards."""

from __future__ import annotations

import pytest

from dsctl.runners import pages


def test_small_pages_turns_the_advice_off_and_restores_it() -> None:
    switch = pages._switch()
    if switch is None:
        pytest.skip("this numpy has no huge-page switch")
    before = switch(True)
    try:
        with pages.small_pages():
            assert switch(False) is False  # the advice was off inside the block
        assert switch(True) is True  # and on again after it
        switch(False)
        with pages.small_pages():
            pass
        assert switch(False) is False  # an advice that was off stays off
    finally:
        switch(before)


def test_small_pages_restores_the_advice_when_the_block_raises() -> None:
    switch = pages._switch()
    if switch is None:
        pytest.skip("this numpy has no huge-page switch")
    before = switch(True)
    try:
        with pytest.raises(RuntimeError), pages.small_pages():
            raise RuntimeError("boom")
        assert switch(True) is True
    finally:
        switch(before)


def test_a_numpy_without_the_switch_runs_the_block_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pages, "_switch", lambda: None)
    ran = []
    with pages.small_pages():
        ran.append(1)
    assert ran == [1]
