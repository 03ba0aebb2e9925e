"""Root of the dsctl command line: global options, command groups, and error-to-exit-code mapping."""

from __future__ import annotations

import errno
import os
import sys
import traceback
from pathlib import Path
from typing import Annotated, Any

import typer

from dsctl import __version__
from dsctl.commands import profiles
from dsctl.commands._common import SETTINGS
from dsctl.commands._planned import add_planned_group
from dsctl.errors import DsctlError, ExitCode
from dsctl.inputs import DEFAULT_MAX_INPUT_BYTES, ENV_MAX_INPUT_BYTES, LIMITS, parse_limit

app = typer.Typer(
    name="dsctl",
    help="Plan, balance, check and launch DeepSeek-V3-style GPU training clusters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["--help", "-h"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dsctl {__version__}")
        raise typer.Exit()


@app.callback()
def root(
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
                     "default 64 MiB). See docs/reliability.md."),
    ] = None,
) -> None:
    """Plan, balance, check and launch DeepSeek-V3-style GPU training clusters."""
    SETTINGS.debug = debug or SETTINGS.debug
    SETTINGS.profiles_dir = profiles_dir
    if max_input_bytes is not None:
        LIMITS.max_input_bytes = parse_limit(max_input_bytes, "--max-input-bytes")


app.add_typer(profiles.app, name="profiles")

_PLANNED = {
    "topology": "multi-plane fat-tree wiring plans, topology cost comparison, cabling export, fabric verification",
    "eplb": "expert-parallel load balancing from routing statistics",
    "health": "GPU, NVLink and RDMA health through NVML and sysfs",
    "storage": "3FS cluster sizing and chain tables",
    "launch": "parallelism layouts, rank maps, pipeline schedules and job launch",
    "model": "the arithmetic behind the paper's tables (KV cache, FLOPs, GPU hours, EP speed limit, memory)",
    "trace": "compute/communication overlap from PyTorch profiler traces",
}


def _register_groups() -> None:
    """Attach each command group; groups whose module is not written yet get a placeholder."""
    import importlib

    for name, summary in _PLANNED.items():
        try:
            module = importlib.import_module(f"dsctl.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"dsctl.commands.{name}":
                raise
            add_planned_group(app, name, summary)
            continue
        module.register(app)


_register_groups()


def _is_click_exception(exc: BaseException) -> bool:
    return hasattr(exc, "format_message") and hasattr(exc, "exit_code") and hasattr(exc, "show")


def _print_error(message: str, hint: str | None = None) -> None:
    sys.stderr.write(f"error: {message}\n")
    if hint:
        sys.stderr.write(f"hint: {hint}\n")
    sys.stderr.flush()


def _check_arguments(args: list[str]) -> None:
    """Arguments are UTF-8 text: an undecodable byte (a lone surrogate after Python's decoding) is bad input."""
    for number, arg in enumerate(args, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as exc:
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")[:60]
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
    command = typer.main.get_command(app)
    try:
        _check_arguments(args)
        env_limit = os.environ.get(ENV_MAX_INPUT_BYTES, "")
        LIMITS.max_input_bytes = parse_limit(env_limit, ENV_MAX_INPUT_BYTES) if env_limit else DEFAULT_MAX_INPUT_BYTES
        result: Any = command.main(args=args, prog_name="dsctl", standalone_mode=False)
        sys.stdout.flush()  # a full device must fail here, inside the error mapping, not at interpreter exit
    except DsctlError as exc:
        if SETTINGS.debug:
            traceback.print_exc()
        _print_error(exc.message, exc.hint)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        _print_error("interrupted")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        if isinstance(exc, OSError) and _output_failed(exc):
            _print_error(f"cannot write the output ({exc.strerror or exc}); is standard output a full device?")
            return int(ExitCode.BAD_INPUT)
        if type(exc).__name__ == "NoArgsIsHelpError":
            # A group given without a subcommand: its help is the answer, not an error. Rich help has
            # already been printed while the exception was built; plain help is the exception's message.
            text = exc.format_message()  # type: ignore[attr-defined]
            if text.strip():
                sys.stdout.write(text + "\n")
            return 0
        if _is_click_exception(exc):
            ctx = getattr(exc, "ctx", None)
            where = f" ({ctx.command_path})" if ctx is not None else ""
            hint = f"run '{ctx.command_path} --help'" if ctx is not None else "run 'dsctl --help'"
            message = exc.format_message().replace("\n", " ")  # type: ignore[attr-defined]
            _print_error(f"{message}{where}", hint)
            return int(getattr(exc, "exit_code", 2)) or int(ExitCode.BAD_INPUT)
        if type(exc).__name__ == "Abort":
            _print_error("aborted")
            return 130
        if SETTINGS.debug:
            traceback.print_exc()
        _print_error(f"internal error: {type(exc).__name__}: {exc}",
                     "this is a bug in dsctl; rerun with --debug for the traceback and report it")
        return int(ExitCode.INTERNAL)
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
