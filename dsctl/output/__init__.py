"""The one output layer: every command hands its result object here.

- ``table`` (default): rich tables for people, from a renderer registered for the result's type
  (``@table_renderer(ResultType)``) or, failing that, a generic key/value view of the dataclass.
- ``json`` / ``yaml``: the result's data (``to_data``) for scripts. An object result gets one extra
  top-level key, ``"dsctl"``, the envelope header ``{"schema_version", "command", "dsctl_version", "exit_code"}``;
  a list result is printed bare (there is no room for a header in a list). See docs/output.md.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from dsctl.output.formats import OutputFormat

if TYPE_CHECKING:
    from dsctl.output.data import SCHEMA_VERSION, to_data
    from dsctl.output.emit import emit, render_json, stderr_console, stdout_console
    from dsctl.output.registry import table_renderer

# Loaded on first use (PEP 562): start-up and --help must not pay for numpy, yaml and rich.
_LAZY = {
    "SCHEMA_VERSION": "dsctl.output.data",
    "to_data": "dsctl.output.data",
    "emit": "dsctl.output.emit",
    "render_json": "dsctl.output.emit",
    "stderr_console": "dsctl.output.emit",
    "stdout_console": "dsctl.output.emit",
    "table_renderer": "dsctl.output.registry",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dsctl.output' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


class _Package(types.ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        # Importing the submodule dsctl.output.emit binds the package attribute ``emit`` to that module; keep the
        # function of the same name there instead, as ``from dsctl.output import emit`` always meant.
        if isinstance(value, types.ModuleType) and _LAZY.get(name) == value.__name__:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__all__ = [
    "SCHEMA_VERSION",
    "OutputFormat",
    "emit",
    "render_json",
    "stderr_console",
    "stdout_console",
    "table_renderer",
    "to_data",
]
