"""Print a result in the chosen format: one place for stdout, one for stderr."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from dsctl import __version__
from dsctl.output.data import SCHEMA_VERSION, to_data
from dsctl.output.formats import OutputFormat

if TYPE_CHECKING:
    from rich.console import Console

# rich and yaml are imported where a format needs them: JSON output (every node of a fleet check) pays for neither.


def stdout_console() -> Console:
    # Created per call so that redirected sys.stdout (tests, pipes) is honoured.
    from rich.console import Console

    class _StdoutConsole(Console):
        def on_broken_pipe(self) -> None:
            # rich exits with 1 here, which means "a check found a problem"; the reader (| head) just stopped
            # reading: let dsctl.cli.main end with 0
            raise BrokenPipeError

    return _StdoutConsole(file=sys.stdout, soft_wrap=False)


def stderr_console() -> Console:
    from rich.console import Console

    return Console(file=sys.stderr, soft_wrap=True)


def envelope(result: Any, command: str, exit_code: int) -> Any:
    """The data printed for ``--format json|yaml``: the result's data plus the ``dsctl`` header key."""
    data = to_data(result)
    if isinstance(data, dict):
        header = {
            "schema_version": SCHEMA_VERSION,
            "command": command,
            "dsctl_version": __version__,
            "exit_code": exit_code,
        }
        return {"dsctl": header, **data}
    return data


def render_json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def emit(result: Any, fmt: OutputFormat, command: str) -> int:
    """Print ``result`` to stdout in ``fmt`` and return the process exit code it carries.

    A result may define ``exit_code`` (0 ok, 1 a check found a problem).
    """
    exit_code = int(getattr(result, "exit_code", 0))
    if fmt is OutputFormat.json:
        sys.stdout.write(render_json(envelope(result, command, exit_code)))
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
