"""Registry of human (table) renderers, one per result type."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from rich.console import RenderableType

Renderer = Callable[[Any], Iterable[RenderableType]]
_RENDERERS: dict[type, Renderer] = {}
T = TypeVar("T")


def table_renderer(result_type: type) -> Callable[[Renderer], Renderer]:
    """Register ``func(result) -> iterable of rich renderables`` as the table view of ``result_type``."""

    def register(func: Renderer) -> Renderer:
        _RENDERERS[result_type] = func
        return func

    return register


def find_renderer(result: Any) -> Renderer | None:
    for klass in type(result).__mro__:
        if klass in _RENDERERS:
            return _RENDERERS[klass]
    return None


def load_renderers(command: str) -> None:
    """Import the renderer modules of ``command``'s group: ``dsctl/output/GROUP.py`` and ``GROUP_*.py``.

    Command modules import lazily (fast start-up), so the table views register on first output instead.
    """
    group = command.split(" ", 1)[0].replace("-", "_")
    package = importlib.import_module("dsctl.output")
    for info in pkgutil.iter_modules(package.__path__):
        if info.name == group or info.name.startswith(group + "_"):
            importlib.import_module(f"dsctl.output.{info.name}")
