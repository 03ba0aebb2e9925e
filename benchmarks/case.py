"""One benchmark case."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Case:
    """``setup()`` returns the inputs (untimed); ``run(inputs)`` is the timed work; ``target_s`` the goal."""

    name: str
    setup: Callable[[], Any]
    run: Callable[[Any], Any]
    target_s: float | None = None
