"""Shell completion of profile names for the options that take one (``--model``, ``--node``, ``--storage`` ...)."""

from __future__ import annotations

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


def profile_names(kind: str, incomplete: str) -> list[str]:
    """Names of the ``kind`` profiles visible to this invocation that start with ``incomplete``.

    Completion must never fail loudly: an unreadable profiles folder completes nothing.
    """
    from dsctl import siteconfig
    from dsctl.commands._common import profile_store
    from dsctl.errors import DsctlError
    from dsctl.profiles.schema import ProfileKind

    try:  # the root command's callback (which reads dsctl.toml) does not run while completing
        site_dirs = [d for d in siteconfig.current().profile_dirs() if d.is_dir()]
    except DsctlError:
        site_dirs = []
    try:
        names = profile_store(site_dirs).names(ProfileKind(kind))
    except (DsctlError, OSError, ValueError):
        return []
    return [name for name in names if name.startswith(incomplete)]


def _completer(kind: str) -> Any:
    def complete(ctx: Any, param: Any, incomplete: str) -> list[Any]:
        from typer._click.shell_completion import CompletionItem

        return [CompletionItem(name) for name in profile_names(kind, incomplete)]

    return complete


def add_profile_completion(command: Any) -> None:
    """Give every profile-name option of ``command`` and its subcommands a profile-name completer."""
    for param in getattr(command, "params", []):
        kinds = {PROFILE_OPTIONS[opt] for opt in getattr(param, "opts", []) if opt in PROFILE_OPTIONS}
        if len(kinds) == 1 and getattr(param, "_custom_shell_complete", None) is None:
            param._custom_shell_complete = _completer(kinds.pop())
    for sub in getattr(command, "commands", {}).values():
        add_profile_completion(sub)
