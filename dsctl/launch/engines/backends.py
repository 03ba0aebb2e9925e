"""Which job engine each launch option belongs to: one table, read by the option check and by the site
configuration filter (a ``dsctl.toml`` default for another backend's option is left out, not an error)."""

from __future__ import annotations

from collections.abc import Iterable

#: backend aliases users may type
ALIASES = {"k8s": "kubernetes"}

#: launch request fields that belong to one backend: field -> backend (``LaunchRequest.check`` refuses one given
#: for another backend; the command layer spells each field as its flag)
OPTION_BACKEND: dict[str, str] = {
    "hosts": "torchrun", "image": "kubernetes", "partition": "slurm", "time_limit": "slurm",
    "cpus_per_task": "slurm", "account": "slurm", "qos": "slurm", "reservation": "slurm", "exclude": "slurm",
    "nodelist": "slurm", "exclusive": "slurm", "sbatch_args": "slurm",
}


def normal_backend(name: str) -> str:
    """The backend's own name (``k8s`` is an alias of ``kubernetes``)."""
    return ALIASES.get(name, name)


def other_backend_options(backend: str | None, names: Iterable[str]) -> set[str]:
    """The parameter names among ``names`` that belong to a backend other than ``backend``."""
    return {name for name in names if name in OPTION_BACKEND and OPTION_BACKEND[name] != backend}
