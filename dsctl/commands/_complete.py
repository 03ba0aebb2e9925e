"""Shell completion: profile names for the options that take one (``--model``, ``--node``, ``--storage`` ...) and
the values of plain-choice options (``--kind``, ``--routing``, ``--workload`` ...) from the tuples the domain
code validates them against (one home per fact)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

#: option -> profile kind (the sub-folder name under profiles/) whose names complete it
PROFILE_OPTIONS: dict[str, str] = {
    "--model": "models",
    "--node": "nodes",
    "--node-profile": "nodes",
    "--client-node": "nodes",
    "--storage": "storage",
    "--switch": "switches",
}

#: (command path, option) -> "module:ATTRIBUTE" holding the valid values (a tuple, or a dict's keys)
CHOICE_OPTIONS: dict[tuple[str, str], str] = {
    ("topology plan", "--kind"): "dsctl.topology.plan:KINDS",
    ("topology simulate", "--workload"): "dsctl.topology.sim.api:WORKLOADS",
    ("topology simulate", "--routing"): "dsctl.topology.sim.routing:ROUTINGS",
    ("launch schedule", "--schedule"): "dsctl.launch.schedule.params:SCHEDULES",
    ("eplb rebalance", "--policy"): "dsctl.eplb.checks:POLICIES",
    ("eplb budget", "--policy"): "dsctl.eplb.checks:POLICIES",
    ("eplb rebalance", "--deployment"): "dsctl.profiles.schema:DEPLOYMENT_KINDS",
    ("eplb replay", "--deployment"): "dsctl.profiles.schema:DEPLOYMENT_KINDS",
    ("eplb budget", "--deployment"): "dsctl.profiles.schema:DEPLOYMENT_KINDS",
    ("eplb rebalance", "--algorithm"): "dsctl.eplb.migration:ALGORITHMS",
    ("eplb replay", "--algorithm"): "dsctl.eplb.migration:ALGORITHMS",
    ("eplb budget", "--algorithm"): "dsctl.eplb.migration:ALGORITHMS",
    ("health check", "--fail-on"): "dsctl.health.api:FAIL_ON",
    ("health burn-in", "--transport"): "dsctl.health.burnin.request:TRANSPORTS",
    ("launch schedule", "--comm-model"): "dsctl.launch.schedule.api:COMM_MODELS",
    ("model kv-cache", "--dtype"): "dsctl.model.dtypes:DTYPE_BYTES",
    ("model memory", "--dtype"): "dsctl.model.dtypes:DTYPE_BYTES",
}


def choice_values(source: str) -> list[str]:
    """The values ``"module:ATTRIBUTE"`` names, in their own order."""
    module, attribute = source.split(":")
    return [str(v) for v in getattr(importlib.import_module(module), attribute)]


def _profiles_dir_given(ctx: Any) -> Path | None:
    """``--profiles-dir`` from the command line being completed (the root callback does not run while
    completing, so its value is read from the root context's parsed parameters)."""
    while ctx is not None:
        value = getattr(ctx, "params", {}).get("profiles_dir")
        if value:
            return Path(value)
        ctx = ctx.parent
    return None


def profile_names(kind: str, incomplete: str, profiles_dir: Path | None = None) -> list[str]:
    """Names of the ``kind`` profiles visible to this invocation that start with ``incomplete``.

    Completion must never fail loudly: an unreadable profiles folder completes nothing.
    """
    from dsctl import siteconfig
    from dsctl.commands._common import SETTINGS, profile_store
    from dsctl.errors import DsctlError
    from dsctl.profiles.schema import ProfileKind

    try:  # the root command's callback (which reads dsctl.toml) does not run while completing
        site_dirs = [d for d in siteconfig.current().profile_dirs() if d.is_dir()]
    except DsctlError:
        site_dirs = []
    saved = SETTINGS.profiles_dir
    try:
        if profiles_dir is not None:
            SETTINGS.profiles_dir = profiles_dir
        names = profile_store(site_dirs).names(ProfileKind(kind))
    except (DsctlError, OSError, ValueError):
        return []
    finally:
        SETTINGS.profiles_dir = saved
    return [name for name in names if name.startswith(incomplete)]


def _completer(kind: str) -> Any:
    def complete(ctx: Any, param: Any, incomplete: str) -> list[Any]:
        from typer._click.shell_completion import CompletionItem

        return [CompletionItem(name) for name in profile_names(kind, incomplete, _profiles_dir_given(ctx))]

    return complete


def _choice_completer(source: str) -> Any:
    def complete(ctx: Any, param: Any, incomplete: str) -> list[Any]:
        from typer._click.shell_completion import CompletionItem

        return [CompletionItem(v) for v in choice_values(source) if v.startswith(incomplete)]

    return complete


def add_profile_completion(command: Any, path: str | None = None) -> None:
    """Give every profile-name option of ``command`` and its subcommands a profile-name completer, and every
    plain-choice option in :data:`CHOICE_OPTIONS` its values."""
    path = getattr(command, "name", "") if path is None else path
    for param in getattr(command, "params", []):
        if getattr(param, "_custom_shell_complete", None) is not None:
            continue
        opts = getattr(param, "opts", [])
        kinds = {PROFILE_OPTIONS[opt] for opt in opts if opt in PROFILE_OPTIONS}
        choices = [CHOICE_OPTIONS[(path, opt)] for opt in opts if (path, opt) in CHOICE_OPTIONS]
        if len(kinds) == 1:
            param._custom_shell_complete = _completer(kinds.pop())
        elif choices:
            param._custom_shell_complete = _choice_completer(choices[0])
    for name, sub in getattr(command, "commands", {}).items():
        add_profile_completion(sub, f"{path} {name}".strip())
