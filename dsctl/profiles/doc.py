"""``Doc``: a typed, checking reader of one parsed profile document (a mapping of a YAML file, or a section of
one). Every getter checks its key and records each problem as one ProfileError naming the file and key path;
``build.py`` turns whole documents into profile dataclasses with it."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from dsctl.errors import ProfileError, one_of
from dsctl.units import QuantityError, human_bytes, parse_bytes, parse_count, parse_rate_bits

_T = TypeVar("_T")

#: sanity limits: far above any real hardware, low enough to catch unit slips (GiB written as TiB ...)
_MAX_INT = 10**7
_MAX_BYTES = 1024**5  # 1 PiB
_MAX_RATE_BITS = 8e15  # 1 PB/s


class Doc:
    """A mapping being validated, with its file and key path for error messages.

    With ``errors=None`` the first invalid key raises ``ProfileError`` (loading a profile for a command). With a
    list, every invalid key is appended to it and a placeholder value stands in, so that the rest of the file is
    still checked (``profiles validate``); the profile built that way is thrown away. A section that is missing
    or not a mapping is reported once and then read silently (its keys are not reported again as missing), and
    a check across keys runs only when the keys it reads are valid (see :meth:`valid`).
    """

    def __init__(self, data: Any, file: Path, keypath: str, errors: list[ProfileError] | None = None,
                 quiet: bool = False) -> None:
        self.file = file
        self.keypath = keypath
        self.errors = errors
        self.quiet = quiet
        self.invalid: set[str] = set()
        self.used: set[str] = set()
        self.data: Mapping[str, Any] = {}
        if isinstance(data, Mapping):
            self.data = data
        elif not quiet:
            self.fail(f"expected a mapping of keys to values, got {describe(data)}")
            self.quiet = True

    def where(self, key: str | None = None) -> str:
        path = ".".join(p for p in (self.keypath, key) if p)
        return f"{self.file}: {path}" if path else str(self.file)

    def error(self, message: str, key: str | None = None, hint: str | None = None) -> ProfileError:
        return ProfileError(f"{self.where(key)}: {message}", hint=hint)

    def fail(self, message: str, key: str | None = None, hint: str | None = None) -> None:
        """Report an invalid key: raised at once, or recorded when collecting every error."""
        self.report(self.error(message, key, hint), key)

    def report(self, error: ProfileError, key: str | None) -> None:
        if self.errors is None:
            raise error
        if key is not None:
            self.invalid.add(key)
        if not self.quiet:
            self.errors.append(error)

    def valid(self, *keys: str) -> bool:
        """True when none of ``keys`` was reported invalid (always True when the first error raises)."""
        return not self.quiet and not self.invalid.intersection(keys)

    def _get(self, key: str, required: bool) -> Any:
        self.used.add(key)
        if key not in self.data:
            if required:
                close = difflib.get_close_matches(key, [str(k) for k in self.data], n=1)
                hint = f"found {close[0]!r}: did you mean {key!r}?" if close else None
                raise self.error("required key is missing", key, hint=hint)
            return None
        return self.data[key]

    def _read(self, key: str, required: bool, check: Callable[[Any], _T], absent: _T, placeholder: _T,
              parse_null: bool = False) -> _T:
        """``check(value)`` of ``key``, ``absent`` when the key is missing or null (``parse_null``: null is checked
        too); on an invalid value the error is raised or recorded (then ``placeholder`` stands in)."""
        try:
            value = self._get(key, required)
            return absent if value is None and not (parse_null and key in self.data) else check(value)
        except ProfileError as exc:
            self.report(exc, key)
            return placeholder

    def text(self, key: str, default: str | None = None, choices: Sequence[str] | None = None) -> str:
        def check(value: Any) -> str:
            if not isinstance(value, str):
                raise self.error(f"expected a string, got {describe(value)}", key)
            if choices is not None and value not in choices:
                raise self.error(f"{value!r} is not valid; expected {one_of(list(choices))}", key)
            return value

        return self._read(key, default is None, check, default or "", default or "")

    def integer(self, key: str, minimum: int = 0, default: int | None = None, maximum: int = _MAX_INT) -> int:
        def check(value: Any) -> int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.error(f"expected an integer >= {minimum}, got {describe(value)}", key)
            if not minimum <= value <= maximum:
                raise self.error(f"expected an integer from {minimum} to {maximum:,}, got {value:,}", key)
            return int(value)

        fallback = int(default or 0)
        return self._read(key, default is None, check, fallback, max(minimum, 1) if default is None else fallback)

    def number(self, key: str, minimum: float = 0.0, default: float | None = None) -> float:
        def check(value: Any) -> float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise self.error(f"expected a number >= {minimum:g}, got {describe(value)}", key)
            if not minimum <= value < math.inf:  # also rejects NaN
                raise self.error(f"expected a finite number >= {minimum:g}, got {value}", key)
            return float(value)

        fallback = float(default or 0.0)
        return self._read(key, default is None, check, fallback, max(minimum, 1.0) if default is None else fallback)

    def count(self, key: str, default: float = 0.0) -> float:
        def check(value: Any) -> float:
            if not isinstance(value, (str, int, float)):
                raise self.error(f"expected a count like 671B or 14.8T, got {describe(value)}", key)
            try:
                result = parse_count(value)
            except QuantityError as exc:
                raise self.error(f"{exc}", key) from None
            if result < 0:
                raise self.error(f"expected a count >= 0, got {value!r}", key)
            return result

        return self._read(key, False, check, default, default)

    def flag(self, key: str, default: bool) -> bool:
        def check(value: Any) -> bool:
            if not isinstance(value, bool):
                raise self.error(f"expected true or false, got {describe(value)}", key)
            return bool(value)

        return self._read(key, False, check, default, default)

    def _quantity(self, key: str, parse: Callable[[Any], _T], maximum: float, what: str, example: str,
                  placeholder: _T) -> _T:
        """A required quantity with units, ``0 < value <= maximum``."""
        def check(value: Any) -> _T:
            if not isinstance(value, (str, int, float)):
                raise self.error(f"expected a quantity like {example!r}, got {describe(value)}", key)
            try:
                result = parse(value)
            except QuantityError as exc:
                raise self.error(str(exc), key) from None
            if not 0 < cast(float, result) <= maximum:
                raise self.error(f"expected a {what}, got {value!r}", key)
            return result

        return self._read(key, True, check, placeholder, placeholder, parse_null=True)

    def size_bytes(self, key: str, maximum: int = _MAX_BYTES) -> int:
        return self._quantity(key, parse_bytes, maximum, f"size > 0 and <= {human_bytes(maximum)}", "80 GiB", 1)

    def rate_bits(self, key: str, maximum_bits: float = _MAX_RATE_BITS) -> float:
        return self._quantity(key, parse_rate_bits, maximum_bits, f"rate > 0 and <= {maximum_bits / 8e12:g} TB/s",
                              "400 Gb/s", 1.0)

    def optional_rate_bits(self, key: str, maximum_bits: float = _MAX_RATE_BITS) -> float | None:
        """An optional rate in bits/s (``0 < value <= maximum``); None when the key is absent."""
        if key not in self.data:
            self.used.add(key)
            return None
        return self.rate_bits(key, maximum_bits)

    def names(self, key: str, pattern: str, example: str) -> tuple[str, ...]:
        """An optional list of names, each a full match of ``pattern``; () when the key is absent."""
        def check(value: Any) -> tuple[str, ...]:
            if not isinstance(value, list) or not all(isinstance(v, str) and re.fullmatch(pattern, v)
                                                      for v in value):
                raise self.error(f"expected a list of names like [{example}], got {describe(value)}", key)
            if len(set(value)) != len(value):
                raise self.error("lists a name twice", key)
            return tuple(value)

        return self._read(key, False, check, (), ())

    def _child(self, key: str, required: bool) -> Doc | None:
        path = ".".join(p for p in (self.keypath, key) if p)
        try:
            value = self._get(key, required)
        except ProfileError as exc:
            self.report(exc, key)
            return Doc({}, self.file, path, self.errors, quiet=True)
        if value is None and not required:
            return None
        child = Doc(value, self.file, path, self.errors, quiet=self.quiet)
        if child.quiet:
            self.invalid.add(key)
        return child

    def section(self, key: str) -> Doc:
        return cast(Doc, self._child(key, True))  # a required key never gives None

    def optional_section(self, key: str) -> Doc | None:
        return self._child(key, False)

    def finish(self) -> None:
        for unknown in [str(k) for k in self.data if k not in self.used]:
            close = difflib.get_close_matches(unknown, sorted(self.used), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"valid keys here: {', '.join(sorted(self.used))}"
            self.fail("unknown key", unknown, hint=hint)


def short(value: str, limit: int = 60) -> str:
    """``repr`` of a user-supplied name, cut so that a huge value never floods the error line."""
    return repr(value) if len(value) <= limit else repr(value[:limit]) + f"... ({len(value):,} characters)"


def describe(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, (int, float)):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__
