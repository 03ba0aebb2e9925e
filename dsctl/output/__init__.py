"""The one output layer: every command hands its result object here.

- ``table`` (default): rich tables for people, from a renderer registered for the result's type
  (``@table_renderer(ResultType)``) or, failing that, a generic key/value view of the dataclass.
- ``json`` / ``yaml``: the result's data (``to_data``) for scripts. An object result gets one extra
  top-level key, ``"dsctl"``, the envelope header ``{"schema_version", "command", "dsctl_version", "exit_code"}``;
  a list result is printed bare (there is no room for a header in a list). See docs/output.md.
"""

from dsctl.output.data import SCHEMA_VERSION, to_data
from dsctl.output.emit import OutputFormat, emit, render_json, stderr_console, stdout_console
from dsctl.output.registry import table_renderer

__all__ = [
    "SCHEMA_VERSION",
    "OutputFormat",
    "emit",
    "render_json",
    "stderr_console",
    "stdout_console",
    "table_renderer",
    "to_data",
]
