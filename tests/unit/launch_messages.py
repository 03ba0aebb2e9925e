"""Launch errors as a user of ``dsctl launch`` reads them: fields spelled as the group's options."""

from __future__ import annotations

import importlib

import pytest

from dsctl.commands._common import option_for
from dsctl.errors import DsctlError


def as_read(exc: DsctlError | pytest.ExceptionInfo[DsctlError], command: str = "launch") -> str:
    """``exc``'s message once ``dsctl.cli`` has named its fields through ``command``'s table."""
    importlib.import_module(f"dsctl.commands.{command.split()[0]}")  # option_for reads the loaded group's table
    error = exc.value if isinstance(exc, pytest.ExceptionInfo) else exc
    error.name_options(lambda field: option_for(field, command))
    return error.message
