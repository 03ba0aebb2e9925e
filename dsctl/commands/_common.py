"""Options, settings and helpers shared by every command module."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from dsctl.errors import InputError
from dsctl.inputs import read_bytes
from dsctl.output import OutputFormat, emit
from dsctl.profiles.loader import ProfileStore

FormatOpt = Annotated[
    OutputFormat,
    typer.Option(
        "--format",
        "-f",
        case_sensitive=False,
        help="Output format: table for people, json or yaml for scripts.",
        show_default=True,
    ),
]


@dataclass
class Settings:
    """Global options given before the command name (``dsctl --debug ...``) or through the environment."""

    debug: bool = False
    profiles_dir: Path | None = None


SETTINGS = Settings()


def profile_store() -> ProfileStore:
    """The profiles visible to this invocation (built-ins, ``DSCTL_PROFILES``, ``--profiles-dir``)."""
    return ProfileStore.from_environment(os.environ, SETTINGS.profiles_dir)


def show(result: Any, fmt: OutputFormat, command: str) -> None:
    """Print ``result`` and end the command with the exit code it carries."""
    code = emit(result, fmt, command)
    if code:
        raise typer.Exit(code)


def read_input(path: Path, what: str) -> bytes:
    """The bytes of an input file (regular file or ``-``, within the input limit); any failure is one
    InputError naming ``what`` (an option or argument) and the path."""
    return read_bytes(path, what)


def read_text_input(path: Path, what: str, hint: str | None = None) -> str:
    """``read_input`` decoded as UTF-8 (a leading byte-order mark is dropped); other bytes are an InputError
    naming the byte offset."""
    data = read_input(path, what)
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {path}: not UTF-8 text (byte {exc.start})", hint=hint) from None
