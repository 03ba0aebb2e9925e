"""Read input files within stated limits: regular files (or ``-`` for standard input) of bounded size.

Every file dsctl reads goes through :func:`read_bytes`, so the limits of ``docs/reliability.md`` hold for all
commands: a FIFO, a device (``/dev/zero``) or a socket is refused before it is opened for reading (it could
block forever or never end), and a file above ``max_input_bytes`` is refused from its size, before a byte is
read. The limit is raised with ``dsctl --max-input-bytes N`` or ``DSCTL_MAX_INPUT_BYTES``.
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from dsctl.errors import InputError
from dsctl.names import ascii_digits

#: default largest input file: 64 MiB is far above any real profile, record, statistics or fabric dump
DEFAULT_MAX_INPUT_BYTES = 64 * 1024**2
#: environment variable that raises (or lowers) the input limit
ENV_MAX_INPUT_BYTES = "DSCTL_MAX_INPUT_BYTES"
_CHUNK = 1024**2


@dataclass
class Limits:
    """Limits of this invocation (set once by ``dsctl.cli`` from ``--max-input-bytes`` or the environment)."""

    max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES


LIMITS = Limits()


@dataclass(frozen=True)
class ReadInput:
    """One input file this invocation read: its identity (device, inode), what named it and its real path."""

    device: int
    inode: int
    what: str
    path: str


#: every input file read in this invocation (reset by ``dsctl.cli`` per command); outputs are checked against it
INPUTS_READ: list[ReadInput] = []


def note_input(path: Path | str, what: str) -> None:
    """Record ``path`` as an input of this command, so no output of the command may replace it.

    :func:`read_bytes` records every file it reads; call this for an input a command uses without reading it
    through here (a script it points a job at, a folder it reads). A path that does not exist is ignored.
    """
    if str(path) == "-":
        return
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return
    INPUTS_READ.append(ReadInput(info.st_dev, info.st_ino, what, os.path.realpath(path)))


def forget_inputs() -> None:
    """Start a new invocation: no inputs read yet."""
    INPUTS_READ.clear()


def parse_limit(text: str, source: str) -> int:
    """A byte count from an option or variable: a whole number >= 1 (``_`` separators allowed)."""
    digits = text.strip().replace("_", "").removeprefix("+")
    value = int(digits) if ascii_digits(digits) and len(digits) <= 19 else 0  # bounded before int()
    if not 1 <= value <= 2**62:
        raise InputError(f"{source} {text[:40]!r} is not a byte count: use a whole number of bytes >= 1, "
                         f"e.g. {4 * DEFAULT_MAX_INPUT_BYTES}")
    return value


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _too_big(what: str, path: Path | str, limit: int) -> InputError:
    return InputError(f"{what} {path}: larger than the input limit of {limit:,} bytes",
                      hint="raise it with dsctl --max-input-bytes N (or DSCTL_MAX_INPUT_BYTES) if the file is "
                           "genuine")


def _read_limited(fd: int, limit: int, what: str, path: Path | str) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
        total += len(chunk)
        if total > limit:
            raise _too_big(what, path, limit)


def read_bytes(path: Path | str, what: str, error: type[InputError] = InputError, limit: int | None = None) -> bytes:
    """The bytes of a regular file (or of standard input for ``-``), at most ``limit`` bytes.

    ``what`` (an option or argument name) starts every error message; ``error`` is the InputError subclass raised.
    """
    limit = LIMITS.max_input_bytes if limit is None else limit
    try:
        if str(path) == "-":
            return _read_limited(sys.stdin.buffer.fileno(), limit, what, "-")
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise error(f"{what} {path}: is a folder, expected a file")
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{what} {path}: is {_kind(info.st_mode)}; give a regular file (or - for standard input)")
        if info.st_size > limit:
            raise _too_big(what, path, limit)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced between stat and open
                raise error(f"{what} {path}: is not a regular file")
            data = _read_limited(fd, limit, what, path)
            note_input(path, what)
            return data
        finally:
            os.close(fd)
    except InputError as exc:
        if isinstance(exc, error):
            raise
        raise error(exc.text, hint=exc.hint, field=exc.field, mentions=exc.mentions) from None
    except FileNotFoundError:
        raise error(f"{what} {path}: file not found (it does not exist)") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise error(f"{what} {path}: cannot read ({reason})") from None


def read_text(path: Path | str, what: str, hint: str | None = None, error: type[InputError] = InputError,
              limit: int | None = None) -> str:
    """:func:`read_bytes` decoded as UTF-8 (a leading byte-order mark is dropped); other bytes are an ``error``
    naming ``what``, the path and the byte offset, with ``hint``."""
    data = read_bytes(path, what, error=error, limit=limit)
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise error(f"{what} {path}: not UTF-8 text (byte {exc.start})", hint=hint) from None


def input_inside(path: Path | str) -> tuple[str, str] | None:
    """(what, path) of a command input that ``path`` is or holds (by real path, or by device and inode for a
    file), or None. Everything the writer deletes or replaces is asked first."""
    real = os.path.realpath(path)
    try:
        info = os.lstat(path)
    except (OSError, ValueError):
        info = None
    for read in INPUTS_READ:
        if read.path == real or read.path.startswith(real.rstrip(os.sep) + os.sep):
            return read.what, read.path
        if info is not None and (read.device, read.inode) == (info.st_dev, info.st_ino):
            return read.what, read.path
    return None
