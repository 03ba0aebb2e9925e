"""Error types and exit codes shared by every dsctl command.

Domain packages raise these; only ``dsctl.cli`` turns them into a line on stderr and an exit code.
"""

from __future__ import annotations

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
    """An error a user can act on: one message line plus an optional hint line.

    ``field`` names the request field the message is about (``replicas``); the message then leads with it and
    ``text`` is the rest (``InputError("must be positive", field="replicas")``). Domain code names fields, never
    command-line options: the command layer's table (``FIELD_OPTIONS`` of the running command group, applied by
    ``dsctl.cli``) sets ``option`` to the flag the user typed, so the user reads ``--replicas must be positive``.
    """

    exit_code: ExitCode = ExitCode.BAD_INPUT

    def __init__(self, message: str, *, hint: str | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.text = message
        self.hint = hint
        self.field = field
        #: the command-line spelling of ``field`` (set by the command layer; None: the field's own name is shown)
        self.option: str | None = None

    @property
    def message(self) -> str:
        """The line shown: the field (as its option when the command layer named one) and the text."""
        if self.field is None:
            return self.text
        return f"{self.option or self.field} {self.text}"

    def __str__(self) -> str:
        return self.message


class InputError(DsctlError):
    """Bad user input: an option value, a file, a field. Exit code 2."""

    exit_code = ExitCode.BAD_INPUT


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
