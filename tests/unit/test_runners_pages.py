"""dsctl/runners/pages.py: the process's transparent huge pages are off inside ``small_pages`` (Linux
``prctl(PR_SET_THP_DISABLE)``) and the previous setting comes back afterwards, also on error; where prctl is
unavailable the block runs unchanged."""

from __future__ import annotations

import ctypes

import pytest

from dsctl.runners import pages


class FakePrctl:
    """A process's THP-disable value as prctl reads and sets it; ``get``/``set_result`` -1 plays an error."""

    def __init__(self, value: int, get_result: int | None = None, set_result: int = 0) -> None:
        self.value, self.get_result, self.set_result = value, get_result, set_result
        self.calls: list[tuple[int, int, int]] = []

    def __call__(self, option: int, arg2: int, arg3: int) -> int:
        self.calls.append((option, arg2, arg3))
        if option == pages.PR_GET_THP_DISABLE:
            return self.value if self.get_result is None else self.get_result
        assert option == pages.PR_SET_THP_DISABLE
        if self.set_result == 0:
            self.value = arg2 | arg3
        return self.set_result


def _fake(monkeypatch: pytest.MonkeyPatch, fake: FakePrctl | None) -> None:
    monkeypatch.setattr(pages, "_prctl", lambda: fake)


@pytest.mark.parametrize("before", [0, 3])
def test_small_pages_disables_huge_pages_and_restores_the_value(monkeypatch: pytest.MonkeyPatch,
                                                                before: int) -> None:
    fake = FakePrctl(before)
    _fake(monkeypatch, fake)
    with pages.small_pages():
        assert fake.value == 1  # disabled completely (3 would still let numpy's advice through)
    assert fake.value == before
    assert fake.calls[-1] == (pages.PR_SET_THP_DISABLE, before & 1, before & 2)


def test_small_pages_restores_the_value_when_the_block_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakePrctl(0)
    _fake(monkeypatch, fake)
    with pytest.raises(RuntimeError, match="boom"), pages.small_pages():
        assert fake.value == 1
        raise RuntimeError("boom")
    assert fake.value == 0


def test_a_process_already_without_huge_pages_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakePrctl(1)
    _fake(monkeypatch, fake)
    with pages.small_pages():
        pass
    assert fake.value == 1
    assert fake.calls == [(pages.PR_GET_THP_DISABLE, 0, 0)]


@pytest.mark.parametrize("fake", [None, FakePrctl(0, get_result=-1), FakePrctl(0, set_result=-1)],
                         ids=["no-prctl", "get-fails", "set-fails"])
def test_without_a_working_prctl_the_block_runs_unchanged(monkeypatch: pytest.MonkeyPatch,
                                                          fake: FakePrctl | None) -> None:
    _fake(monkeypatch, fake)
    ran = []
    with pages.small_pages():
        ran.append(1)
    assert ran == [1]
    if fake is not None:
        assert fake.value == 0
        assert (pages.PR_SET_THP_DISABLE, 0, 0) not in fake.calls  # nothing to restore after a failure


def test_no_prctl_off_linux_or_without_a_c_library(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pages.sys, "platform", "darwin")
    assert pages._prctl() is None
    monkeypatch.setattr(pages.sys, "platform", "linux")

    def no_libc(*args: object, **kwargs: object) -> None:
        raise OSError("no C library")
    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    assert pages._prctl() is None


def test_the_kernel_switch_is_on_inside_and_restored_after() -> None:
    prctl = pages._prctl()
    if prctl is None or prctl(pages.PR_GET_THP_DISABLE, 0, 0) != 0:
        pytest.skip("no prctl THP switch here, or huge pages already disabled for this process")
    with pytest.raises(RuntimeError), pages.small_pages():
        assert prctl(pages.PR_GET_THP_DISABLE, 0, 0) == 1
        raise RuntimeError("boom")
    assert prctl(pages.PR_GET_THP_DISABLE, 0, 0) == 0
