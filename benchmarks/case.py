"""One benchmark case."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Case:
    """``setup()`` returns the inputs (untimed); ``run(inputs)`` is the timed work; ``target_s`` the goal, in wall
    seconds or, with ``target_cpu``, in CPU seconds of this process (a goal stated for a shared machine)."""

    name: str
    setup: Callable[[], Any]
    run: Callable[[Any], Any]
    target_s: float | None = None
    target_cpu: bool = False
