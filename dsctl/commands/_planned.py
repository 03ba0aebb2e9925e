"""Placeholders for command groups whose commands are not built yet."""

from __future__ import annotations

import typer

from dsctl.errors import NotImplementedYet

_SETTINGS = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": ["--help", "-h"]}


def add_planned_group(app: typer.Typer, name: str, summary: str) -> None:
    """Register ``dsctl NAME`` as a command that explains it is not built yet (exit 2, no output)."""

    def planned(ctx: typer.Context) -> None:
        raise NotImplementedYet(
            f"'dsctl {name}' is not built yet: {summary}",
            hint="see the README's roadmap; nothing was run and no result was printed",
        )

    planned.__doc__ = f"{summary} [NOT BUILT YET: exits with code 2]"
    app.command(name, context_settings=_SETTINGS, help=planned.__doc__)(planned)
