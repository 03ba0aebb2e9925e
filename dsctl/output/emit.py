"""Print a result in the chosen format: one place for stdout, one for stderr."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from dsctl import __version__
from dsctl.names import terminal_text
from dsctl.output.data import SCHEMA_VERSION, to_data
from dsctl.output.formats import OutputFormat

if TYPE_CHECKING:
    from rich.console import Console

# rich and yaml are imported where a format needs them: JSON output (every node of a fleet check) pays for neither.


def _safe_console_class() -> type[Console]:
    """A rich Console that shows terminal control characters escaped: every table cell, title and line printed
    through it passes through :func:`dsctl.names.terminal_text`, so names from records, node JSON, job names or
    trace kernels can never move the cursor, retitle the window or clear the screen (issue 23)."""
    from rich.console import Console
    from rich.segment import Segment

    class _SafeConsole(Console):
        def render_str(self, text: str, **kwargs: Any) -> Any:
            # before layout: column widths are measured on the escaped text
            return super().render_str(terminal_text(text), **kwargs)

        def _render_buffer(self, buffer: Iterable[Segment]) -> str:
            # after layout, for rich Text objects built by renderers (they bypass render_str); rich's own
            # cursor/colour codes are control segments or styles, not text, and stay
            return super()._render_buffer(
                Segment(terminal_text(seg.text), seg.style, seg.control) if not seg.control else seg
                for seg in buffer)

    return _SafeConsole


def stdout_console() -> Console:
    # Created per call so that redirected sys.stdout (tests, pipes) is honoured.
    class _StdoutConsole(_safe_console_class()):  # type: ignore[misc]
        def on_broken_pipe(self) -> None:
            # rich exits with 1 here, which means "a check found a problem"; the reader (| head) just stopped
            # reading: let dsctl.cli.main end with 0
            raise BrokenPipeError

    return _StdoutConsole(file=sys.stdout, soft_wrap=False)


def stderr_console() -> Console:
    return _safe_console_class()(file=sys.stderr, soft_wrap=True)


def result_exit_code(result: Any) -> int:
    """The exit code a result carries: its ``exit_code`` (0 ok, 1 a check found a problem), 0 when it has none."""
    return int(getattr(result, "exit_code", 0))


def envelope(result: Any, command: str, exit_code: int | None = None, *, keep_int_arrays: bool = False) -> Any:
    """The data printed for ``--format json|yaml``: the result's data plus the ``dsctl`` header key, whose
    ``exit_code`` is the result's own unless given (``keep_int_arrays``: see :func:`dsctl.output.data.to_data`)."""
    if exit_code is None:
        exit_code = result_exit_code(result)
    data = to_data(result, keep_int_arrays=keep_int_arrays)
    if isinstance(data, dict):
        header = {
            "schema_version": SCHEMA_VERSION,
            "command": command,
            "dsctl_version": __version__,
            "exit_code": exit_code,
        }
        return {"dsctl": header, **data}
    return data


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def error_envelope(command: str, message: str, hint: str | None, exit_code: int) -> dict[str, Any]:
    """What ``--format json`` prints on stdout when the command fails (the ``error:`` line still goes to stderr):
    the usual header and one ``error`` object (docs/output.md)."""
    header = {"schema_version": SCHEMA_VERSION, "command": command, "dsctl_version": __version__,
              "exit_code": exit_code}
    return {"dsctl": header, "error": {"message": message, "hint": hint, "exit_code": exit_code}}


#: ``--format json`` on stdout: 1 indents (as on a terminal), 0 prints one line (as into a pipe or file)
JSON_INDENT_ENV = "DSCTL_JSON_INDENT"


def stdout_json_indented(stream: Any = None) -> bool:
    """Whether ``--format json`` indents what it prints: DSCTL_JSON_INDENT=1/0 when set, else only on a terminal.
    One line goes through json's C encoder; indenting takes its pure-Python one (3-4x the CPU and memory of a
    table on big results, issue 32), worth it only where a person reads the text."""
    value = os.environ.get(JSON_INDENT_ENV, "").strip()
    if value in ("0", "1"):
        return value == "1"
    stream = sys.stdout if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def render_json(data: Any, *, indent: bool = True) -> str:
    """JSON, UTF-8 as is: indented by two spaces, or (``indent=False``) one line through json's C encoder; a lone
    surrogate (undecodable text in an input, e.g. a kernel name) is written as its JSON escape ``\\udXXX`` (valid
    JSON, and writable to a UTF-8 stream)."""
    return _json_text(data, indent) + "\n"


def _json_text(data: Any, indent: bool) -> str:
    """:func:`render_json` without the final newline (a big result is not copied once more to add it)."""
    return _escape_surrogates(json.dumps(data, indent=2 if indent else None, ensure_ascii=False, allow_nan=False))


def _escape_surrogates(text: str) -> str:
    """Lone surrogates in JSON text as their escapes (isascii: one fast pass over the usual all-ASCII text)."""
    if not text.isascii() and _SURROGATE.search(text):
        text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


def emit_text(text: str) -> None:
    """Print already-rendered text (Prometheus exposition) to stdout as it is."""
    sys.stdout.write(text)
    sys.stdout.flush()


def emit(result: Any, fmt: OutputFormat, command: str) -> int:
    """Print ``result`` to stdout in ``fmt`` and return the process exit code it carries.

    A result may define ``exit_code`` (0 ok, 1 a check found a problem).
    """
    exit_code = result_exit_code(result)
    if fmt is OutputFormat.json:
        if stdout_json_indented():
            sys.stdout.write(_json_text(envelope(result, command, exit_code), True))
        else:
            from dsctl.output.json_text import compact_json

            sys.stdout.write(_escape_surrogates(compact_json(envelope(result, command, exit_code,
                                                                       keep_int_arrays=True))))
        sys.stdout.write("\n")
    elif fmt is OutputFormat.yaml:
        import yaml

        sys.stdout.write(yaml.safe_dump(envelope(result, command, exit_code), sort_keys=False, allow_unicode=True))
    else:
        from dsctl.output.generic import generic_view
        from dsctl.output.registry import find_renderer, load_renderers

        console = stdout_console()
        load_renderers(command)
        renderer = find_renderer(result)
        from rich.table import Table

        from dsctl.output.tables import fit

        parts = renderer(result) if renderer else generic_view(to_data(result))
        for part in parts:
            console.print(fit(part, console) if isinstance(part, Table) else part)
    sys.stdout.flush()
    return exit_code
