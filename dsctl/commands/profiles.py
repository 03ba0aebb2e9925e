"""dsctl profiles list|show|validate."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dsctl.commands._common import FormatOpt, profile_store, show
from dsctl.output.formats import OutputFormat

if TYPE_CHECKING:
    from dsctl.profiles.schema import Profile

app = typer.Typer(
    name="profiles",
    help="Built-in and user profiles: models, nodes, switches, storage servers.",
    no_args_is_help=True,
)


@dataclass(frozen=True)
class ProfileRow:
    name: str
    kind: str
    source: str
    description: str


@dataclass(frozen=True)
class ProfileListing:
    profiles: list[ProfileRow] = field(default_factory=list)


@dataclass(frozen=True)
class ValidationReport:
    path: str
    valid: list[str]


@app.command("list")
def list_profiles(fmt: FormatOpt = OutputFormat.table) -> None:
    """List every profile: built-in ones and those from --profiles-dir / DSCTL_PROFILES."""
    store = profile_store()
    rows = []
    for entry in store.entries():
        profile = store.get(entry.kind, entry.name)
        rows.append(ProfileRow(entry.name, entry.kind.value, "built-in" if entry.builtin else str(entry.path),
                               profile.description))
    show(ProfileListing(rows), fmt, "profiles list")


@app.command("show")
def show_profile(
    name: Annotated[str, typer.Argument(help="Profile name, e.g. deepseek-v3, h800-hgx, ib-ndr-64.")],
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Print every field of one profile, in base units (bytes, Gb/s, bytes/s)."""
    profile: Profile = profile_store().find(name)
    show(profile, fmt, "profiles show")


@app.command("validate")
def validate(
    path: Annotated[Path, typer.Argument(help="A profile YAML file, or a folder of them.")],
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Check a profile file (or a folder of profiles) for syntax, types, units and ranges; every invalid key of
    every file is reported (one error line each), not only the first."""
    import sys

    from dsctl.errors import ProfileError, plural
    from dsctl.profiles.loader import validate_each

    profiles, invalid = validate_each(path)
    errors = [error for problems in invalid for error in problems]
    if len(errors) == 1:
        raise errors[0]
    if errors:
        for error in errors:
            sys.stderr.write(f"error: {error.message}\n" + (f"hint: {error.hint}\n" if error.hint else ""))
        found = f"{plural(len(errors), 'error')} (each named above)"
        if path.is_dir():
            raise ProfileError(f"{len(invalid)} of {len(invalid) + len(profiles)} profiles under {path} are "
                               f"invalid: {found}")
        raise ProfileError(f"{path} is invalid: {found}")
    show(ValidationReport(str(path), [p.name for p in profiles]), fmt, "profiles validate")
