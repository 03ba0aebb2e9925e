"""Error types and exit codes shared by every dsctl command.

Domain packages raise these; only ``dsctl.cli`` turns them into a line on stderr and an exit code.
"""

from __future__ import annotations

from collections.abc import Callable
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
    ``text`` is the rest (``InputError("must be positive", field="replicas")``). ``mentions`` are other fields the
    text names as ``{field}`` (``InputError("and {all_steps} exclude each other", field="step",
    mentions=("all_steps",))``). Domain code names fields, never command-line options: the command layer's table
    (``FIELD_OPTIONS`` of the running command group, applied by ``dsctl.cli`` through ``name_options``) spells
    each as the flag the user typed, so the user reads ``--step and --all-steps exclude each other``; without it
    the field's own name is shown.
    """

    exit_code: ExitCode = ExitCode.BAD_INPUT

    def __init__(self, message: str, *, hint: str | None = None, field: str | None = None,
                 mentions: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.text = message
        self.hint = hint
        self.field = field
        self.mentions = mentions
        #: field -> the option that sets it, filled by ``name_options``
        self.options: dict[str, str] = {}

    def name_options(self, option_of: Callable[[str], str | None]) -> None:
        """Spell the field and the mentioned fields as ``option_of(field)`` (None: keep the field's name)."""
        for name in (self.field, *self.mentions):
            if name is not None and name not in self.options:
                spelled = option_of(name)
                if spelled is not None:
                    self.options[name] = spelled

    @property
    def message(self) -> str:
        """The line shown: the field (as its option once named) leading the text, mentioned fields filled in."""
        text = self.text
        for name in self.mentions:
            text = text.replace("{" + name + "}", self.options.get(name, name))
        if self.field is None:
            return text
        joint = "" if text[:1] in (":", ";", ",", "/") else " "  # "--ranks: ..." and "--from-us/--to-us: ..."
        return f"{self.options.get(self.field, self.field)}{joint}{text}"

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
