"""dsctl config show: the site configuration (dsctl.toml) and where each value comes from."""

from __future__ import annotations

import typer

from dsctl.commands._common import FormatOpt, show
from dsctl.output.formats import OutputFormat

app = typer.Typer(
    name="config",
    help="Site configuration (dsctl.toml): the defaults this site sets and where each comes from.",
    no_args_is_help=True,
)


@app.command("show")
def show_config(fmt: FormatOpt = OutputFormat.table) -> None:
    """Every configuration key with its value and source (a file, built-in or unset), and the files searched."""
    from dsctl import siteconfig

    show(siteconfig.current(), fmt, "config show")
