"""Old option spellings, kept for one release as hidden aliases with a one-line deprecation note on stderr.

One name per concept (issue 22): Slurm's ``-N/--nodes`` is a node count and ``-w/--nodelist`` a hostlist;
``--node-profile`` names a node profile and ``-m/--model`` a model profile in every command. The spellings that
meant something else are rewritten here, before Click parses the command line, so that no command declares a
second parameter for them and ``--help`` shows only the new names. One bandwidth suffix too: a byte rate is
``_bytes_per_s`` (``--bandwidth-gbytes`` in GB/s became ``--bandwidth-bytes-per-s``; its value is rescaled here).
One vocabulary (issue 30): ``--out`` is a file and ``--out-dir`` a folder, seconds end in ``-s``, and no option
name or short flag means two things in two commands (docs/options.md; tests/cli/test_cli_surface.py holds it).
docs/output.md lists the table.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dsctl.errors import InputError
from dsctl.names import ascii_digits


def _is_count(value: str) -> bool:
    return ascii_digits(value.strip().lstrip("+"))


@dataclass(frozen=True)
class Alias:
    """``old`` is rewritten to ``new``. ``refuse`` (a test of the value) names values the old spelling no longer
    takes here, with ``refuse_hint`` as the error's hint. ``scale``: the new option's units per old unit (1e9
    for GB/s -> bytes/s); a numeric value is multiplied by it, anything else is passed on for Click to refuse.
    ``note`` ends the deprecation line (e.g. the unit change)."""

    old: str
    new: str
    refuse: Callable[[str], bool] | None = None
    refuse_hint: str = ""
    scale: float = 1.0
    note: str = ""

    def value(self, text: str) -> str:
        """``text`` in the new option's unit."""
        if self.scale == 1.0:
            return text
        try:
            return repr(float(text) * self.scale)
        except ValueError:
            return text


PROFILE = Alias("--node", "--node-profile")
COUNT = Alias("-n", "--nodes")
#: health fleet and trace --slurm took a hostlist as --nodes; --nodes is a count everywhere now
HOSTLIST = Alias("--nodes", "--nodelist", refuse=_is_count,
                 refuse_hint="--nodes is a node count; give the nodes to run on as a Slurm hostlist: "
                             "-w/--nodelist 'node[001-256]'")

def _renamed(*pairs: str) -> tuple[Alias, ...]:
    """``_renamed("--old", "--new", ...)``: plain renames (issue 30 item 5: one vocabulary, docs/options.md)."""
    return tuple(Alias(old, new) for old, new in zip(pairs[::2], pairs[1::2], strict=True))


#: a folder is ``--out-dir`` (``--out`` is a file, ``-o`` is ``--out``'s short form only)
OUT_DIR = _renamed("--out", "--out-dir", "-o", "--out-dir")
#: seconds end in ``-s`` (like ``--step-time-s``)
INTERVAL_S = Alias("--interval", "--interval-s")

#: command path (as ``ctx.command_path`` without ``dsctl``) -> its deprecated spellings
ALIASES: dict[str, tuple[Alias, ...]] = {
    "health check": (PROFILE, INTERVAL_S, Alias("--slurm", "--slurm-healthcheck")),
    "health record": (INTERVAL_S,),
    "health topo": (PROFILE,),
    "health fleet": (PROFILE, HOSTLIST, INTERVAL_S,
                     *_renamed("--timeout", "--timeout-s", "--launch-timeout", "--launch-timeout-s")),
    "health burn-in": (*OUT_DIR, *_renamed("--backend", "--transport", "--timeout", "--timeout-s")),
    "trace overlap": (HOSTLIST, Alias("--node-timeout", "--node-timeout-s")),
    "trace timeline": _renamed("--from", "--from-us", "--to", "--to-us"),
    "launch": (COUNT, Alias("--out", "--out-dir"), Alias("--wait-timeout", "--wait-timeout-s")),
    "launch layout": (COUNT, Alias("--out", "--out-dir")),
    "launch schedule": _renamed("--f", "--f-cost", "--b", "--b-cost", "--w", "--w-cost", "--fb", "--fb-cost"),
    "eplb rebalance": (COUNT,),
    "eplb replay": (Alias("--interval", "--interval-windows"),),
    "storage size": (COUNT, Alias("--checkpoint-seconds", "--checkpoint-time-s")),
    "storage chains": (COUNT, *OUT_DIR, Alias("-r", "--targets-per-ssd")),
    "storage expand": OUT_DIR,
    "topology plan": (COUNT, *OUT_DIR),
    "topology simulate": (COUNT, Alias("-w", "--workload"),
                          *_renamed("--jobs", "--jobs-file", "--tokens", "--tokens-per-gpu")),
    "model ep-speed-limit": (Alias("--bandwidth-gbytes", "--bandwidth-bytes-per-s", scale=1e9,
                                   note="in bytes/s: 900 GB/s is 900e9"),),
}


def warn_deprecated(old: str, new: str, note: str = "") -> None:
    sys.stderr.write(f"warning: {old} is deprecated; use {new}{f' ({note})' if note else ''}\n")
    sys.stderr.flush()


def _value_options(command: Any) -> set[str]:
    """Option strings of ``command`` that take a value (the next argument is that value, never an option)."""
    names: set[str] = set()
    for param in getattr(command, "params", []):
        if getattr(param, "param_type_name", "") == "option" and not getattr(param, "is_flag", False) \
                and not getattr(param, "count", False):
            names.update(param.opts)
    return names


def rewrite(args: Sequence[str], aliases: Sequence[Alias], value_options: set[str],
            stop_at: set[str] | frozenset[str] = frozenset(), *, quiet: bool = False) -> list[str]:
    """``args`` with every deprecated spelling of ``aliases`` replaced (and noted on stderr).

    Scanning ends at ``--`` and at the first of ``stop_at`` (a subcommand name: its own arguments follow); the
    value of an option in ``value_options`` is never taken for an option. ``--old=value`` and, for a short
    option, ``-oVALUE`` are understood. ``quiet`` (shell completion) notes nothing.
    """
    by_old = {a.old: a for a in aliases}
    out = list(args)
    i = 0
    while i < len(out):
        token = out[i]
        if token == "--" or token in stop_at:
            break
        name, sep, attached = token.partition("=") if token.startswith("--") else (token, "", "")
        if not name.startswith("--") and len(name) > 2 and name[:2] in by_old:  # -n4
            name, sep, attached = name[:2], "=", name[2:]
        alias = by_old.get(name)
        if alias is not None:
            value = attached if sep else (out[i + 1] if i + 1 < len(out) else "")
            if alias.refuse is not None and alias.refuse(value):
                raise InputError(f"{alias.old} {value}: this command takes {alias.new}", hint=alias.refuse_hint)
            if not quiet:
                warn_deprecated(alias.old, alias.new, alias.note)
            out[i] = f"{alias.new}={alias.value(attached)}" if sep else alias.new
            if not sep and i + 1 < len(out):
                out[i + 1] = alias.value(out[i + 1])
            name = alias.new
        if not sep and name in value_options:
            i += 1  # skip the option's value
        i += 1
    return out


def add_deprecated_aliases(command: Any, path: str) -> None:
    """Let ``command`` (a Click command or group named ``path``) and its subcommands accept the spellings of
    ``ALIASES``."""
    aliases = ALIASES.get(path)
    if aliases:
        original = command.parse_args
        subcommands = frozenset(getattr(command, "commands", {}) or ())

        def parse_args(ctx: Any, args: list[str], _original: Any = original) -> Any:
            quiet = bool(getattr(ctx, "resilient_parsing", False))  # completing: hidden aliases stay silent
            return _original(ctx, rewrite(args, aliases, _value_options(command), subcommands, quiet=quiet))

        command.parse_args = parse_args
    for name, sub in (getattr(command, "commands", {}) or {}).items():
        add_deprecated_aliases(sub, f"{path} {name}")
