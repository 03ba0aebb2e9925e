"""Stream the events of a Chrome trace out of byte chunks, one event at a time.

An own scanner instead of a streaming-JSON dependency (ijson): the structure walked here is fixed (a top-level
object whose ``traceEvents`` array holds flat event objects, or a bare array), so the scanner only has to find
where each array element starts; the element itself is parsed by the standard library's C JSON scanner
(``JSONDecoder.raw_decode``) from a text buffer of about :data:`CHUNK_CHARS` characters. Memory is the buffer
plus the event being parsed, whatever the file size; the caller keeps what it needs from each event and drops it.

Limits (exit 2 naming them): the decompressed size of a file (``max_bytes``; gzip is detected by content and
decompressed incrementally, so a gzip bomb stops at the limit without ever being held in memory) and the size of
one JSON value (:data:`MAX_VALUE_CHARS`). Every decoding failure is an InputError naming the source.
"""

from __future__ import annotations

import codecs
import json
import re
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

from dsctl.errors import InputError

#: default limit of decompressed bytes per trace file (the command's --max-bytes)
DEFAULT_MAX_BYTES = 8 * 1024**3
#: one event (or other top-level value) may not exceed this many characters: a profiler's event is a few kB and
#: its largest top-level value (``distributedInfo``) about 1 MB for 16,384 ranks; the decoded value of 16 Mi
#: characters (8 M small integers) peaks at about 150 MB
MAX_VALUE_CHARS = 16 * 1024**2
CHUNK_CHARS = 1 << 20
#: top-level keys kept in ``meta`` (small values); other keys' values are parsed and dropped
META_KEYS = frozenset({"distributedInfo", "baseTimeNanoseconds", "schemaVersion", "traceName", "displayTimeUnit",
                       "host_name"})

_WS = re.compile(r"[ \t\n\r]*")
_SEPARATOR = re.compile(r"[ \t\n\r]*,[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _inflate(chunks: Iterator[bytes], first: bytes, source: str, max_bytes: int) -> Iterator[bytes]:
    """Decompress gzip member(s) chunk by chunk, never producing more than ``max_bytes`` in all."""
    produced = 0
    inflater = zlib.decompressobj(wbits=31)
    pending = first
    fed = False  # the current gzip member has had input

    def count(out: bytes) -> bytes:
        nonlocal produced
        produced += len(out)
        if produced > max_bytes:
            raise InputError(f"{source}: decompresses to more than {max_bytes:,} bytes (the {{max_bytes}} limit)",
                             mentions=("max_bytes",),
                             hint="raise --max-bytes if the trace is genuinely that large")
        return out

    try:
        while True:
            while pending:
                fed = True
                out = inflater.decompress(pending, CHUNK_CHARS)
                pending = inflater.unconsumed_tail
                if out:
                    yield count(out)
                if inflater.eof:  # another gzip member may follow (concatenated .gz files)
                    rest = inflater.unused_data
                    inflater = zlib.decompressobj(wbits=31)
                    fed = False
                    pending = rest if rest.strip(b"\x00") else b""
            data = next(chunks, None)
            if data is None:
                break
            pending = data
        if fed and not inflater.eof:
            raise InputError(f"{source}: looks gzipped but cannot be decompressed (truncated gzip stream)")
    except zlib.error as exc:
        raise InputError(f"{source}: looks gzipped but cannot be decompressed ({exc})") from None


def _plain(chunks: Iterator[bytes], first: bytes, source: str, max_bytes: int) -> Iterator[bytes]:
    seen = 0
    data: bytes | None = first
    while data is not None:
        seen += len(data)
        if seen > max_bytes:
            raise InputError(f"{source}: more than {max_bytes:,} bytes (the {{max_bytes}} limit)",
                             mentions=("max_bytes",),
                             hint="raise --max-bytes if the trace is genuinely that large")
        yield data
        data = next(chunks, None)


class _Text:
    """A sliding text buffer over decoded chunks with the JSON value reader."""

    def __init__(self, raw: Iterator[bytes], source: str) -> None:
        self.raw = raw
        self.source = source
        self.decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self.buf = ""
        self.pos = 0
        self.done = False
        self.offset = 0  # characters dropped from the front of buf

    def more(self) -> bool:
        """Append the next chunk; False at the end of input."""
        if self.done:
            return False
        data = next(self.raw, None)
        try:
            text = self.decoder.decode(data or b"", final=data is None)
        except UnicodeDecodeError as exc:
            raise InputError(f"{self.source}: not a text JSON trace (a byte near character "
                             f"{self.offset + len(self.buf) + exc.start:,} is not UTF-8)") from None
        if data is None:
            self.done = True
        if self.pos > CHUNK_CHARS:
            self.offset += self.pos
            self.buf = self.buf[self.pos:]
            self.pos = 0
        self.buf += text
        return True

    def skip_ws(self) -> str:
        """Skip whitespace; the next character ('' at the end of input)."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def expect(self, chars: str, where: str) -> str:
        c = self.skip_ws()
        if not c or c not in chars:
            found = "the end of the file" if not c else repr(c)
            raise InputError(f"{self.source}: not valid JSON: expected {' or '.join(repr(x) for x in chars)} "
                             f"{where}, found {found} at character {self.offset + self.pos:,}")
        self.pos += 1
        return c

    def value(self) -> Any:
        """Parse one JSON value at the current position (after whitespace)."""
        self.skip_ws()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                # an error well before the end of the buffer is real (not a value cut by the chunk boundary),
                # except an unterminated string, which is reported where the string starts
                cut = exc.msg.startswith("Unterminated string") or exc.pos >= len(self.buf) - 64
                if cut and self._grow():
                    continue
                raise InputError(f"{self.source}: not valid JSON: {exc.msg} at character "
                                 f"{self.offset + exc.pos:,}") from None
            except RecursionError:
                raise InputError(f"{self.source}: JSON nested too deeply (thousands of levels)") from None
            except ValueError as exc:  # integers over 4,300 digits
                raise InputError(f"{self.source}: unreadable JSON value: {str(exc).split(';')[0]}") from None
            if end == len(self.buf) and self._grow():  # a number may go on in the next chunk
                continue
            self.pos = end
            return value

    def _grow(self) -> bool:
        """Read on for a value the buffer does not hold whole yet: as much again as it has so far (one chunk per
        try decoded a 40 MB value 40 times over: 35 s), so a value of n characters costs O(n) decoding."""
        pending = len(self.buf) - self.pos
        if pending > MAX_VALUE_CHARS:
            raise InputError(f"{self.source}: a JSON value at character {self.offset + self.pos:,} is over "
                             f"{MAX_VALUE_CHARS:,} characters long or malformed (one event may be at most that)")
        want = min(max(2 * pending, pending + CHUNK_CHARS), MAX_VALUE_CHARS + CHUNK_CHARS)
        grew = False
        while len(self.buf) - self.pos < want and self.more():
            grew = True
        return grew


def iter_events(chunks: Iterable[bytes], source: str, meta: dict[str, Any],
                max_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[Any]:
    """Yield each element of the trace's event array from raw (maybe gzipped) byte chunks.

    ``meta`` receives the small top-level values (:data:`META_KEYS`) as they are met (``distributedInfo`` may
    come after the events, so read it when the iterator is exhausted); ``meta["_form"]`` is ``"object"`` or
    ``"list"``. Raises InputError naming ``source`` for anything that is not a JSON trace.
    """
    it = iter(chunks)
    first = b""
    while not first:
        data = next(it, None)
        if data is None:
            break
        first = data
    raw = _inflate(it, first, source, max_bytes) if first[:2] == b"\x1f\x8b" else _plain(it, first, source,
                                                                                              max_bytes)
    text = _Text(raw, source)
    head = text.skip_ws()
    if head == "\ufeff":
        text.pos += 1
        head = text.skip_ws()
    if not head:
        raise InputError(f"{source}: empty file; expected a PyTorch profiler Chrome trace (JSON)")
    if head == "[":
        meta["_form"] = "list"
        yield from _array(text)
        text.skip_ws()
        return
    if head != "{":
        value = text.value()
        raise InputError(f"{source}: not a Chrome trace: the JSON is a {type(value).__name__}, expected an object "
                         "with \"traceEvents\" or a list of events")
    meta["_form"] = "object"
    text.pos += 1
    found = False
    keys: list[str] = []
    if text.skip_ws() == "}":
        text.pos += 1
    else:
        while True:
            if text.skip_ws() != '"':
                text.expect('"', "(an object key)")
            key = text.value()
            keys.append(key)
            text.expect(":", f"after key {key[:40]!r}")
            if key == "traceEvents" and text.skip_ws() == "[":
                found = True
                yield from _array(text)
            else:
                value = text.value()
                if key == "traceEvents":
                    raise InputError(f"{source}: not a Chrome trace: \"traceEvents\" is a {type(value).__name__}, "
                                     "expected a list of events")
                if key in META_KEYS:
                    meta[key] = value
            if text.expect(",}", "in the top-level object") == "}":
                break
    if not found:
        shown = ", ".join(sorted(keys)[:8]) or "none"
        raise InputError(f"{source}: not a Chrome trace: no \"traceEvents\" key (top-level keys: {shown})",
                         hint="give the JSON written by torch.profiler's export_chrome_trace (or .json.gz)")
    if text.skip_ws():
        raise InputError(f"{source}: not valid JSON: extra data after the top-level object at character "
                         f"{text.offset + text.pos:,}")


def _array(text: _Text) -> Iterator[Any]:
    """Yield the elements of the array whose ``[`` is at the current position."""
    text.pos += 1
    if text.skip_ws() == "]":
        text.pos += 1
        return
    decode, separator = _DECODER.raw_decode, _SEPARATOR.match
    while True:
        # fast path: the element and the comma after it are both in the buffer (all but one element per chunk)
        buf, found = text.buf, None
        try:
            value, end = decode(buf, text.pos)
            found = separator(buf, end)
        except (ValueError, RecursionError):
            pass  # the slow path below reports it (or reads more)
        if found is not None and found.end() < len(buf):
            text.pos = found.end()
            yield value
            continue
        yield text.value()
        if text.expect(",]", "between trace events") == "]":
            return
        text.skip_ws()
