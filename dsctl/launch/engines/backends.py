"""Which job engine each launch option belongs to: one table, read by the option check and by the site
configuration filter (a ``dsctl.toml`` default for another backend's option is left out, not an error)."""

from __future__ import annotations

from collections.abc import Iterable

from dsctl.errors import InputError

#: backend aliases users may type
ALIASES = {"k8s": "kubernetes"}

#: launch options that belong to one backend: parameter name -> (flag, backend)
OPTION_BACKEND: dict[str, tuple[str, str]] = {
    "hosts": ("--hosts", "torchrun"), "image": ("--image", "kubernetes"), "partition": ("--partition", "slurm"),
    "time_limit": ("--time", "slurm"), "cpus_per_task": ("--cpus-per-task", "slurm"),
    "account": ("--account", "slurm"), "qos": ("--qos", "slurm"), "reservation": ("--reservation", "slurm"),
    "exclude": ("--exclude", "slurm"), "nodelist": ("--nodelist", "slurm"), "exclusive": ("--exclusive", "slurm"),
    "sbatch_arg": ("--sbatch-arg", "slurm"),
}


def normal_backend(name: str) -> str:
    """The backend's own name (``k8s`` is an alias of ``kubernetes``)."""
    return ALIASES.get(name, name)


def other_backend_options(backend: str | None, names: Iterable[str]) -> set[str]:
    """The parameter names among ``names`` that belong to a backend other than ``backend``."""
    return {name for name in names if name in OPTION_BACKEND and OPTION_BACKEND[name][1] != backend}


def check_option_backend(backend: str | None, given: dict[str, bool]) -> None:
    """Reject an engine option given (``given[flag]`` True) for another backend, or none, instead of ignoring it."""
    for flag, owner in OPTION_BACKEND.values():
        if given.get(flag) and backend != owner:
            raise InputError(f"{flag} applies to --backend {owner}" + (f", not {backend}" if backend else ""),
                             hint=f"add --backend {owner}, or drop {flag}")
