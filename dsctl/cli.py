"""Root of the dsctl command line: global options, command groups, and error-to-exit-code mapping."""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import sys
import traceback
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from dsctl import __version__
from dsctl.commands._common import SETTINGS, option_for, silence_stdout
from dsctl.errors import DsctlError, ExitCode
from dsctl.inputs import DEFAULT_MAX_INPUT_BYTES, ENV_MAX_INPUT_BYTES, LIMITS, forget_inputs, parse_limit
from dsctl.names import MAX_INTEGER_DIGITS, ascii_digits  # the bound on arguments is the one on input text
from dsctl.typer_shim import is_bare_group_help, plain_root_coercion, plain_wording

#: Every command group: ``dsctl NAME`` is the Typer app ``app`` of module ``dsctl.commands.NAME``, imported only
#: when the group is run, completed or asked for its own help. The text is the group's help (the module's
#: ``typer.Typer(help=...)``; a test keeps the two equal), shown by ``dsctl --help`` without importing the module.
GROUPS: dict[str, str] = {
    "topology": "Multi-plane fat-tree wiring plans, topology cost comparison, cabling export and fabric "
                "verification.",
    "eplb": "Expert-parallel load balancing: replicate hot experts and place replicas on GPUs from routing "
            "statistics.",
    "model": "The arithmetic behind the paper's tables: KV cache, training FLOPs, GPU hours and cost, EP speed "
             "limit, memory.",
    "launch": "Plan a training launch (parallel layout, memory fit, rank map, pipeline schedule) and write or "
              "submit its job for Slurm, torchrun or Kubernetes (dsctl launch --nodes N \\[options] "
              "\\[--backend B] \\[--out-dir DIR] \\[--submit] -- TRAIN_SCRIPT \\[ARGS...]).",
    "health": "GPU, NVLink and RDMA health through NVML and sysfs (live, or replayed from a recorded node).",
    "storage": "3FS cluster sizing, chain-table generation and chain-table checks.",
    "trace": "Compute/communication overlap, kernel classes, stragglers and timelines from PyTorch profiler "
             "traces.",
    "profiles": "Built-in and user profiles: models, nodes, switches, storage servers.",
    "config": "Site configuration (dsctl.toml): the defaults this site sets and where each comes from.",
    "examples": "Copy small example inputs (EPLB statistics, an ibnetdiscover dump, 3FS admin_cli output, profiler "
                "traces, a node record, a rank map, a burn-in fault model) into a folder, to try every documented "
                "example on.",
}


class _Unloaded(TyperGroup):
    """Stands in for a command group whose module is not imported yet (name and help only)."""


#: every command's help option (the root's context settings, inherited by every group and command)
HELP_OPTION_NAMES = ["--help", "-h"]


def quiet_flags(command: Any) -> None:
    """Show on/off options in help as bare flags (``--dry-run``), not ``--dry-run <bool>``: a reader took the type
    for a value to give (``--dry-run true``) and the value was then read as a subcommand. Click's public
    ``Option.metavar`` set to an empty string is what help prints in the type column."""
    help_option = command.get_help_option(typer.Context(command, help_option_names=HELP_OPTION_NAMES))
    for param in [*command.params, *([help_option] if help_option is not None else [])]:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        quiet_flags(sub)


class LazyGroup(TyperGroup):
    """The root group (Click's lazy-group pattern): a command group's module is imported on first real use.

    Listing the groups (``dsctl --help``, completing ``dsctl <TAB>``) shows the placeholders' help instead.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._listing = 0
        for name, summary in GROUPS.items():
            self.commands.setdefault(name, _Unloaded(name=name, help=summary))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = self.commands.get(cmd_name)
        if isinstance(command, _Unloaded) and not self._listing:
            command = self.load(cmd_name)
        return command

    def load(self, name: str) -> TyperGroup:
        """Import ``dsctl.commands.NAME`` and build its group."""
        from dsctl.commands._aliases import add_deprecated_aliases
        from dsctl.commands._complete import add_profile_completion

        module = importlib.import_module(f"dsctl.commands.{name}")
        group = typer.main.get_group(module.app)
        group.name = name
        add_profile_completion(group)
        add_deprecated_aliases(group, name)
        quiet_flags(group)
        self.commands[name] = group
        return group

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        plain_root_coercion(self.get_params(ctx))
        return super().parse_args(ctx, args)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing += 1
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing -= 1

    def shell_complete(self, ctx: Any, incomplete: str) -> Any:
        self._listing += 1
        try:
            return super().shell_complete(ctx, incomplete)
        finally:
            self._listing -= 1


app = typer.Typer(
    name="dsctl",
    cls=LazyGroup,
    help="Plan, balance, check and launch DeepSeek-V3-style GPU training clusters.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": HELP_OPTION_NAMES},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dsctl {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks for errors (also DSCTL_DEBUG=1).")
    ] = False,
    profiles_dir: Annotated[
        Path | None,
        typer.Option("--profiles-dir", help="Extra profiles folder; overrides built-ins of the same name. "
                     "DSCTL_PROFILES may list more (os.pathsep-separated)."),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    max_input_bytes: Annotated[
        str | None,
        typer.Option("--max-input-bytes", help="Largest input file read, in bytes (also DSCTL_MAX_INPUT_BYTES; "
                     "default 64 MiB)."),
    ] = None,
) -> None:
    """Plan, balance, check and launch DeepSeek-V3-style GPU training clusters."""
    from dsctl import siteconfig

    SETTINGS.debug = debug or SETTINGS.debug
    forget_inputs()  # outputs are checked against the inputs of this invocation only
    SETTINGS.profiles_dir = profiles_dir
    site = siteconfig.current()  # dsctl.toml: defaults for options not given on the command line
    SETTINGS.site_profile_dirs = _existing_site_dirs(site)
    SETTINGS.site_origins = site.origins()
    ctx.default_map = {**site.default_map(), **(ctx.default_map or {})}
    if max_input_bytes is not None:
        LIMITS.max_input_bytes = parse_limit(max_input_bytes, "--max-input-bytes")


def _existing_site_dirs(site: Any) -> list[Path]:
    """The site's ``defaults.profiles_dirs`` that exist; one missing (a mount absent on this host) is one
    ``warning:`` line naming the file and key, not a failure of every command."""
    found = []
    for directory, origin in site.profile_dirs_with_origin():
        if directory.is_dir():
            found.append(directory)
        else:
            sys.stderr.write(f"warning: {origin}: profile folder {directory} does not exist; skipped\n")
    return found


def _is_click_exception(exc: BaseException) -> bool:
    return hasattr(exc, "format_message") and hasattr(exc, "exit_code") and hasattr(exc, "show")


def _print_error(message: str, hint: str | None = None) -> None:
    from dsctl.names import terminal_text  # a file name or value with ESC/CR is shown escaped, not obeyed

    sys.stderr.write(f"error: {terminal_text(message)}\n")
    if hint:
        sys.stderr.write(f"hint: {terminal_text(hint)}\n")
    sys.stderr.flush()


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    """Every Python warning (numpy's RuntimeWarning, a DeprecationWarning of a library) as one ``warning:`` line
    on stderr, without the source file and code line Python prints (those with --debug)."""
    text = " ".join(str(message).split())
    where = f" ({filename}:{lineno})" if SETTINGS.debug else ""
    stream = sys.stderr if file is None else file
    with contextlib.suppress(OSError, ValueError):  # stderr closed: a warning is never worth a failure
        stream.write(f"warning: {text}{where}\n")


def _route_warnings() -> None:
    """One handler for Python warnings (see :func:`_show_warning`); the filters stay Python's (once per place)."""
    import warnings

    warnings.showwarning = _show_warning


#: options of the root command (``dsctl OPTION GROUP ...``): flags, and those that take a value
ROOT_FLAGS = ("--debug",)
ROOT_VALUED = ("--profiles-dir", "--max-input-bytes")
#: the per-command output option, accepted before the group too (``dsctl -f json model kv-cache``)
FORMAT_OPTIONS = ("--format", "-f")


def _takes(token: str, names: tuple[str, ...]) -> int:
    """How many words the option ``token`` starts (1 or 2) if it is one of ``names``, else 0."""
    if token in names:
        return 2
    if token.startswith("--") and token.split("=", 1)[0] in names:
        return 1
    if "-f" in names and token.startswith("-f") and len(token) > 2 and not token.startswith("--"):
        return 1  # -fjson
    return 0


def place_global_options(args: list[str]) -> list[str]:
    """Accept the global options where users put them: the root's ``--debug``, ``--profiles-dir``,
    ``--max-input-bytes`` after the group or command are moved before it; ``--format``/``-f`` given before the
    group, or between a group and its command, is moved to the end of the command's options (before ``--``).

    Nothing after ``--`` (a training command's own arguments) is touched; the words are otherwise kept in order.
    """
    end = args.index("--") if "--" in args else len(args)
    head, tail = args[:end], args[end:]
    root: list[str] = []
    fmt: list[str] = []
    rest: list[str] = []
    # where we are: the group word comes first unless an unknown option precedes it; a -f after the command's
    # first word is already in place
    group_seen = other_option = command_seen = False
    i = 0
    while i < len(head):
        token = head[i]
        width = _takes(token, ROOT_VALUED) or (1 if token in ROOT_FLAGS else 0)
        if width:
            root += head[i:i + width]
            i += width
            continue
        width = _takes(token, FORMAT_OPTIONS)
        if width and not command_seen:
            fmt += head[i:i + width]
            i += width
            continue
        if token.startswith("-"):
            other_option = True
        elif group_seen or other_option:
            command_seen = True
        else:
            group_seen = True
        rest.append(token)
        i += 1
    return [*root, *rest, *fmt, *tail]


def _wants_json(args: list[str]) -> bool:
    """``--format json`` / ``-f json`` / ``--format=json`` among the options (not after ``--``)."""
    for i, arg in enumerate(args):
        if arg == "--":
            return False
        if arg in ("--format", "-f") and i + 1 < len(args):
            if args[i + 1].lower() == "json":
                return True
        elif arg.lower() in ("--format=json", "-fjson"):
            return True
    return False


def _command_name(args: list[str]) -> str:
    """``health check`` from ``dsctl --debug health check --from-record x``: the leading words that name a group
    and its subcommand."""
    words: list[str] = []
    for arg in args:
        if arg.startswith("-"):
            if words:
                break
            continue
        if not words and arg not in GROUPS:
            continue  # the value of a root option (--profiles-dir DIR)
        words.append(arg)
        if len(words) == 2:
            break
    return " ".join(words)


def _fail(args: list[str], code: int, message: str, hint: str | None = None) -> int:
    """The error on stderr; with ``--format json`` also a JSON error envelope on stdout. Returns ``code``."""
    _print_error(message, hint)
    if _wants_json(args):
        from dsctl.output.emit import error_envelope, render_json, stdout_json_indented

        try:
            sys.stdout.write(render_json(error_envelope(_command_name(args), message, hint, code),
                                         indent=stdout_json_indented()))
            sys.stdout.flush()
        except (OSError, ValueError):  # stdout is gone or full: the stderr line stands
            pass
    return code


def _integer_digits(arg: str) -> int:
    """Digits of ``arg`` when it is an integer literal (``[+-]?[0-9_]+`` in ASCII, as int() reads it), else 0."""
    body = arg.split("=", 1)[1] if arg.startswith("--") and "=" in arg else arg
    body = body[1:] if body[:1] in ("-", "+") else body
    plain = body.replace("_", "")
    return len(plain) if ascii_digits(plain) else 0


def _check_arguments(args: list[str]) -> None:
    """Arguments are UTF-8 text: an undecodable byte (a lone surrogate after Python's decoding) is bad input.
    Before ``--`` (the training command's own arguments follow it) no integer may pass MAX_INTEGER_DIGITS."""
    for number, arg in enumerate(args, start=1):
        if arg == "--":
            break
        digits = _integer_digits(arg)
        if digits > MAX_INTEGER_DIGITS:
            option = arg.split("=", 1)[0] if arg.startswith("--") and "=" in arg else (
                args[number - 2] if number > 1 and args[number - 2].startswith("-") else f"argument {number}")
            raise DsctlError(f"{option}: an integer of {digits:,} digits is out of range (dsctl's counts, sizes "
                             f"and ids fit in 64 bits: at most {MAX_INTEGER_DIGITS} digits)",
                             hint="give a whole number such as 16")
    for number, arg in enumerate(args, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as exc:
            try:  # a byte Python decoded as U+DC80..U+DCFF shows as \xNN; any other surrogate as \uNNNN
                raw = arg.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError:
                raw = arg.encode("utf-8", "backslashreplace")
            shown = raw.decode("utf-8", "backslashreplace")[:60]
            raise DsctlError(f"argument {number} ({shown!r}) is not UTF-8 text (byte {exc.start})",
                             hint="give names and paths as UTF-8") from None


def _output_failed(exc: OSError) -> bool:
    """True when ``exc`` is a device refusing output (full, I/O error, quota): the environment, not a bug.

    If standard output is the device, it is pointed at /dev/null so that the interpreter's final flush does
    not fail a second time with a traceback.
    """
    if exc.errno not in (errno.ENOSPC, errno.EIO, errno.EFBIG, errno.EDQUOT):
        return False
    try:
        sys.stdout.flush()
    except OSError:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):  # stdout is not a real file (tests capture it)
            pass
    return True


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point. Returns the process exit code (see ``dsctl.errors.ExitCode``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    SETTINGS.debug = os.environ.get("DSCTL_DEBUG", "") not in ("", "0") or "--debug" in args
    _route_warnings()
    command = typer.main.get_command(app)
    quiet_flags(command)
    try:
        _check_arguments(args)
        args = place_global_options(args)
        env_limit = os.environ.get(ENV_MAX_INPUT_BYTES, "")
        LIMITS.max_input_bytes = parse_limit(env_limit, ENV_MAX_INPUT_BYTES) if env_limit else DEFAULT_MAX_INPUT_BYTES
        result: Any = command.main(args=args, prog_name="dsctl", standalone_mode=False)
        sys.stdout.flush()  # a full device must fail here, inside the error mapping, not at interpreter exit
    except DsctlError as exc:
        if SETTINGS.debug:
            traceback.print_exc()
        command_words = _command_name(args)
        exc.name_options(lambda field: option_for(field, command_words))
        return _fail(args, int(exc.exit_code), exc.message, exc.hint)
    except KeyboardInterrupt:
        _print_error("interrupted")
        return 130
    except BrokenPipeError:  # the reader of stdout went away (dsctl ... | head): not an error
        silence_stdout()
        return 0
    except SystemExit as exc:  # --show-completion / --install-completion and shell completion end this way
        return exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except Exception as exc:
        if isinstance(exc, OSError) and _output_failed(exc):
            _print_error(f"cannot write the output ({exc.strerror or exc}); is standard output a full device?")
            return int(ExitCode.BAD_INPUT)
        if is_bare_group_help(exc):
            # A group given without a subcommand: its help is the answer, not an error. Rich help has
            # already been printed while the exception was built; plain help is the exception's message.
            text = exc.format_message()  # type: ignore[attr-defined]
            if text.strip():
                sys.stdout.write(text + "\n")
            return 0
        if _is_click_exception(exc):
            plain_wording(exc)
            ctx = getattr(exc, "ctx", None)
            where = f" ({ctx.command_path})" if ctx is not None else ""
            hint = f"run '{ctx.command_path} --help'" if ctx is not None else "run 'dsctl --help'"
            message = exc.format_message().replace("\n", " ")  # type: ignore[attr-defined]
            return _fail(args, int(getattr(exc, "exit_code", 2)) or int(ExitCode.BAD_INPUT), f"{message}{where}", hint)
        if isinstance(exc, typer.Abort):
            _print_error("aborted")
            return 130
        if SETTINGS.debug:
            traceback.print_exc()
        return _fail(args, int(ExitCode.INTERNAL), f"internal error: {type(exc).__name__}: {exc}",
                     "this is a bug in dsctl; rerun with --debug for the traceback and report it")
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
