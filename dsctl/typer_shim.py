"""The places dsctl relies on Typer beyond its public API, kept in this one module and tested
(tests/unit/test_typer_shim.py fails if a Typer release removes what they use).

1. Typer coerces every option value through pydantic (importing it costs ~60 ms). The root group's options
   (``--profiles-dir`` and flags) are processed on every invocation, ``dsctl GROUP --help`` included, and need no
   more than a ``Path``; :func:`plain_root_coercion` gives those parameters a converter of their own through the
   ``_runtime_param`` slot Typer fills lazily. If the slot goes away nothing breaks: start-up is 60 ms slower.
2. A group run without a subcommand raises Typer's ``NoArgsIsHelpError`` (a usage error carrying the help text),
   which Typer does not export; :func:`is_bare_group_help` recognises it by the class Typer defines it as.
3. Typer words a bad value in pydantic's terms ("Input should be a valid integer, unable to parse string as an
   integer"); :func:`plain_wording` rewords it from the pydantic error Typer chains as the cause.
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


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return repr(text[:60] + ("..." if len(text) > 60 else ""))


def _plain(error: dict[str, Any]) -> str | None:
    """One pydantic error (``ValidationError.errors()[0]``: type, input, ctx) in dsctl's words."""
    kind, given, ctx = error.get("type", ""), error.get("input"), error.get("ctx") or {}
    if kind in ("int_parsing", "int_from_float", "int_type"):
        return f"{_shown(given)} is not a whole number (e.g. 16)"
    if kind in ("float_parsing", "float_type", "finite_number"):
        return f"{_shown(given)} is not a number (e.g. 2.5)"
    bounds = {"greater_than_equal": ("at least", "ge"), "less_than_equal": ("at most", "le"),
              "greater_than": ("above", "gt"), "less_than": ("below", "lt")}
    if kind in bounds and bounds[kind][1] in ctx:
        word, key = bounds[kind]
        return f"{_shown(given)} is out of range: give a value {word} {ctx[key]}"
    if kind in ("enum", "literal_error") and "expected" in ctx:
        return f"{_shown(given)} is not one of {ctx['expected']}"
    if kind == "bool_parsing":
        return f"{_shown(given)} is not true or false"
    if kind == "value_error" and "error" in ctx:
        return str(ctx["error"])
    return None


def plain_wording(exc: BaseException) -> None:
    """Reword a Typer usage error whose cause is a pydantic validation error ("Input should be a valid integer,
    unable to parse string as an integer") in dsctl's words, with the value given ("'abc' is not a whole
    number"). Reads only pydantic's public ``ValidationError.errors()``; anything unexpected leaves the message."""
    errors = getattr(exc.__cause__, "errors", None)
    if not callable(errors) or not isinstance(getattr(exc, "message", None), str):
        return
    try:
        first = errors()[0]
    except (IndexError, TypeError, ValueError, KeyError):
        return
    plain = _plain(first) if isinstance(first, dict) else None
    if plain:
        exc.message = plain  # type: ignore[attr-defined]
