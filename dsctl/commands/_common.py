"""Options, settings and helpers shared by every command module."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dsctl.errors import InputError
from dsctl.inputs import read_bytes, read_text
from dsctl.output.formats import OutputFormat

if TYPE_CHECKING:
    from dsctl.profiles.loader import ProfileStore

#: the one way every command names a planned fabric it reads
PLAN_HELP = "Folder written by 'topology plan --out-dir' (or its plan.json)."
#: a command's planned-fabric argument
PlanArg = Annotated[Path, typer.Argument(help=PLAN_HELP)]

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



#: request field -> the option that sets it, for fields every command group spells the same way. A domain error
#: names a field (``DsctlError.field``); a group's own ``FIELD_OPTIONS`` (its command module) adds to this table and
#: wins over it; ``option_for`` reads both, and dsctl.cli spells the field as its option in the message shown.
COMMON_FIELD_OPTIONS: dict[str, str] = {
    # the file a command writes (eplb rebalance, health record, launch calibrate, trace timeline); a group or
    # subcommand whose output is a folder (--out-dir: topology, storage, launch, health burn-in) spells it in its
    # own table
    "out": "--out",
    "model": "--model",
    "node_profile": "--node-profile",
    "recipe": "--recipe",
    "seq_len": "--seq-len",
}


def option_for(field: str, command: str) -> str | None:
    """The option that sets ``field`` in ``command`` (``"eplb rebalance"``): the key ``"SUBCOMMAND FIELD"`` of the
    group's ``FIELD_OPTIONS`` (a field one subcommand spells differently), else ``FIELD``, else the common table;
    None when no table names it (the message then shows the field's own name)."""
    group, _, sub = command.partition(" ")
    module = sys.modules.get(f"dsctl.commands.{group}")
    table: dict[str, str] = getattr(module, "FIELD_OPTIONS", {}) if group else {}
    return table.get(f"{sub} {field}") or table.get(field) or COMMON_FIELD_OPTIONS.get(field)


class Recipe(str, Enum):
    """Activation recipes (``dsctl.model.recipes``), for ``--recipe``."""

    deepseek = "deepseek"
    selective = "selective"
    full_recompute = "full-recompute"
    none = "none"


RecipeOpt = Annotated[Recipe | None, typer.Option(
    "--recipe", case_sensitive=False,
    help="Activation recipe: deepseek (recompute RMSNorm + MLA up-projections, FP8 caching, E5M6 attention "
         "output), selective (Megatron: attention core recomputed), full-recompute (only layer inputs kept), none "
         "(plain BF16, everything kept) \\[default: the model profile's; DeepSeek-V3: deepseek].")]


@dataclass
class Settings:
    """Global options given before the command name (``dsctl --debug ...``) or through the environment."""

    debug: bool = False
    profiles_dir: Path | None = None
    #: ``defaults.profiles_dirs`` of the site configuration (dsctl.toml)
    site_profile_dirs: list[Path] = field(default_factory=list)
    #: profile name -> "FILE: KEY" of the site configuration that set it (named in an unknown-profile error)
    site_origins: dict[str, str] = field(default_factory=dict)


SETTINGS = Settings()


def profile_store(site_dirs: list[Path] | None = None) -> ProfileStore:
    """The profiles visible to this invocation; later folders override earlier ones: built-ins, the site
    configuration's ``profiles_dirs``, ``DSCTL_PROFILES``, ``--profiles-dir``."""
    from dsctl.profiles.loader import ENV_VAR, ProfileStore

    site = SETTINGS.site_profile_dirs if site_dirs is None else site_dirs
    dirs = [*site, *(Path(p) for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p)]
    store = ProfileStore([*dirs, *([SETTINGS.profiles_dir] if SETTINGS.profiles_dir is not None else [])])
    store.origins = dict(SETTINGS.site_origins)
    return store


def show(result: Any, fmt: OutputFormat, command: str) -> None:
    """Print ``result`` and end the command with the exit code it carries."""
    from dsctl.output.emit import emit

    try:
        code = emit(result, fmt, command)
    except BrokenPipeError:  # the reader stopped early (dsctl ... | head): the result still sets the exit code
        silence_stdout()
        from dsctl.output.emit import result_exit_code

        code = result_exit_code(result)
    if code:
        raise typer.Exit(code)


def silence_stdout() -> None:
    """Point stdout at /dev/null so that later writes and the interpreter's final flush do not fail on a closed
    pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass  # not a real file (tests): nothing will be flushed to a pipe


def read_input(path: Path, what: str) -> bytes:
    """The bytes of an input file (regular file or ``-``, within the input limit); any failure is one
    InputError naming ``what`` (an option or argument) and the path."""
    return read_bytes(path, what)


def read_text_input(path: Path, what: str, hint: str | None = None) -> str:
    """``read_input`` decoded as UTF-8 (a leading byte-order mark is dropped); other bytes are an InputError
    naming the byte offset (:func:`dsctl.inputs.read_text`)."""
    return read_text(path, what, hint)


#: what a perftest / nccl-tests report file should hold (health perf FILE..., health burn-in --from-perf)
PERF_REPORT_HINT = "give the saved output of ib_write_bw or of an nccl-tests binary"
#: most report files one invocation reads (each within the input limit; read and judged one at a time)
MAX_PERF_FILES = 10_000


def perf_report_texts(files: list[Path], what: str) -> Iterator[tuple[str, str]]:
    """(name, text) of each saved perftest / nccl-tests report, read one at a time as they are judged;
    InputError at once (before any file is read) for more than MAX_PERF_FILES files."""
    if len(files) > MAX_PERF_FILES:
        raise InputError(f"{what}: {len(files):,} files; at most {MAX_PERF_FILES:,} per run")

    def texts() -> Iterator[tuple[str, str]]:
        for path in files:
            yield str(path), read_text_input(path, what, hint=PERF_REPORT_HINT)
    return texts()


def plan_text_of(plan: Path) -> tuple[str, str]:
    """(plan.json text, its name) of PLAN_DIR or a plan.json path (``PlanArg``, ``--plan``)."""
    plan_file = plan / "plan.json" if plan.is_dir() else plan
    if plan.is_dir() and not plan_file.exists():
        raise InputError(f"PLAN {plan} has no plan.json", hint="write one with 'dsctl topology plan --out-dir DIR'")
    return read_text_input(plan_file, "PLAN"), str(plan_file)

