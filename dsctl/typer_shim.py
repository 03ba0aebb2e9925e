"""The two places dsctl relies on Typer beyond its public API, kept in this one module and tested
(tests/unit/test_typer_shim.py fails if a Typer release removes what they use).

1. Typer coerces every option value through pydantic (importing it costs ~60 ms). The root group's options
   (``--profiles-dir`` and flags) are processed on every invocation, ``dsctl GROUP --help`` included, and need no
   more than a ``Path``; :func:`plain_root_coercion` gives those parameters a converter of their own through the
   ``_runtime_param`` slot Typer fills lazily. If the slot goes away nothing breaks: start-up is 60 ms slower.
2. A group run without a subcommand raises Typer's ``NoArgsIsHelpError`` (a usage error carrying the help text),
   which Typer does not export; :func:`is_bare_group_help` recognises it by the class Typer defines it as.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

#: the private attribute of Typer's parameters that holds their value converter (typer.core._TyperParameter)
RUNTIME_PARAM_SLOT = "_runtime_param"


class _PlainRootValue:
    """Converts the root options' values (flags, ``--profiles-dir``) without pydantic: None and booleans as
    given, ``profiles_dir`` as a Path, anything else as the text."""

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None or isinstance(value, bool):
            return value
        return Path(value) if param.name == "profiles_dir" else value


def plain_root_coercion(params: list[Any]) -> int:
    """Give each of ``params`` (the root group's) the plain converter where Typer has not built its own yet.
    Returns how many were given it (0 when this Typer has no such slot)."""
    given = 0
    for param in params:
        if getattr(param, RUNTIME_PARAM_SLOT, False) is None:
            setattr(param, RUNTIME_PARAM_SLOT, _PlainRootValue())
            given += 1
    return given


def _no_args_is_help_class() -> type[BaseException] | None:
    try:
        found = getattr(importlib.import_module("typer._click.exceptions"), "NoArgsIsHelpError", None)
    except ImportError:
        return None
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


#: Typer's exception for a group given without a subcommand (None if this Typer has no such class)
NO_ARGS_IS_HELP: type[BaseException] | None = _no_args_is_help_class()


def is_bare_group_help(exc: BaseException) -> bool:
    """True when ``exc`` is a group's help raised because no subcommand was given (an answer, not an error)."""
    return NO_ARGS_IS_HELP is not None and isinstance(exc, NO_ARGS_IS_HELP)
