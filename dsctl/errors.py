"""Error types and exit codes shared by every dsctl command.

Domain packages raise these; only ``dsctl.cli`` turns them into a line on stderr and an exit code.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes, the same for every command (documented in the README)."""

    OK = 0
    #: a check ran and found a problem (health finding, fabric mismatch, plan does not fit)
    CHECK_FAILED = 1
    #: bad usage or input: unknown option value, malformed file, impossible layout
    BAD_INPUT = 2
    #: a required environment piece is missing: NVML library, sbatch, kubectl ...
    ENV_MISSING = 3
    #: a bug in dsctl itself (an unexpected exception); run with --debug for the traceback
    INTERNAL = 4


class DsctlError(Exception):
    """An error a user can act on: one message line plus an optional hint line."""

    exit_code: ExitCode = ExitCode.BAD_INPUT

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class InputError(DsctlError):
    """Bad user input: an option value, a file, a field. Exit code 2."""

    exit_code = ExitCode.BAD_INPUT


class FieldError(InputError):
    """A bad value of a domain request's field. ``template`` names the fields as ``{0}``, ``{1}``, ... so that the
    domain words no command-line flag: the message says the field names, and the command layer says its own
    option names instead (:meth:`worded`, ``dsctl.commands._common.fields_as``)."""

    def __init__(self, fields: tuple[str, ...], template: str, *, hint: str | None = None) -> None:
        super().__init__(self._fill(template, fields), hint=hint)
        self.fields = fields
        self.template = template

    @staticmethod
    def _fill(template: str, names: tuple[str, ...]) -> str:
        # plain replacement, not str.format: values in the text (a node name, a path) may hold braces
        for k, name in enumerate(names):
            template = template.replace(f"{{{k}}}", name)
        return template

    def worded(self, names: Mapping[str, str]) -> InputError:
        """The same error with each field said as ``names[field]`` (the field's own name where absent)."""
        return InputError(self._fill(self.template, tuple(names.get(f, f) for f in self.fields)), hint=self.hint)


class ProfileError(InputError):
    """A profile is unknown or invalid; the message names the file and key path."""


class EnvironmentMissing(DsctlError):
    """A required piece of the environment is absent (NVML, sbatch, ...). Exit code 3."""

    exit_code = ExitCode.ENV_MISSING


def plural(count: int, word: str, suffix: str = "s") -> str:
    """``plural(3, "node") == "3 nodes"``; used in error messages."""
    return f"{count} {word}{'' if count == 1 else suffix}"


def one_of(values: list[str] | tuple[str, ...]) -> str:
    """Human list of valid choices for error messages: ``a, b or c``."""
    items = list(values)
    if not items:
        return "(none)"
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " or " + items[-1]
