"""Slurm submission options beyond the layout (account, QOS, node lists, raw ``#SBATCH`` lines) and the extra
environment of a job (``NCCL_IB_HCA`` from the node profile, ``--nccl-env``). Pure: checks and rendering."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from dsctl.cluster import hostlist
from dsctl.errors import InputError
from dsctl.launch.request import MAX_NODES
from dsctl.names import HOSTLIST, SLURM_NAME, comment_text, shown

_SBATCH_ARG = re.compile(r"--([a-z][a-z0-9-]{0,63})(=(.{1,4096}))?")
_NCCL_ENV = re.compile(r"(NCCL_[A-Z0-9_]{1,64})=(.{0,4096})")
#: #SBATCH options dsctl writes itself from the plan: a --sbatch-arg may not change them
RESERVED_SBATCH = {
    "job-name": "--job-name", "nodes": "--nodes", "ntasks-per-node": "the layout (one torchrun agent per node)",
    "gpus-per-node": "the node profile", "cpus-per-task": "--cpus-per-task", "output": "--out-dir",
    "partition": "--partition", "time": "--time", "account": "--account", "qos": "--qos",
    "reservation": "--reservation", "exclude": "--exclude", "nodelist": "--nodelist", "exclusive": "--exclusive",
}


def reserved_prefix(name: str, reserved: Iterable[str]) -> str | None:
    """The reserved long option ``name`` stands for, or None. sbatch and srun (getopt_long) accept any
    unambiguous prefix of a long option (``--outpu`` is ``--output``), so a prefix of a reserved name is
    refused too (an ambiguous one would be refused by Slurm anyway)."""
    for option in sorted(reserved):
        if option == name:
            return option
    return next((option for option in sorted(reserved) if option.startswith(name)), None)


@dataclass(frozen=True)
class SlurmOptions:
    """``#SBATCH`` options from the command line or the site configuration (None / empty: not written)."""

    account: str | None = None
    qos: str | None = None
    reservation: str | None = None
    exclude: str | None = None
    nodelist: str | None = None
    exclusive: bool = False
    sbatch_args: tuple[str, ...] = ()


def check_slurm_options(options: SlurmOptions) -> None:
    """InputError naming the field for any value that is not a Slurm name, hostlist or ``--name[=value]``."""
    for name, value in (("account", options.account), ("qos", options.qos), ("reservation", options.reservation)):
        if value is not None and not SLURM_NAME.fullmatch(value):
            raise InputError(f"{value!r} is not a valid Slurm name: use 1-63 letters, digits, '.', '_' or "
                             "'-', starting with a letter or digit", field=name)
    for name, flag, value in (("exclude", "--exclude", options.exclude),
                              ("nodelist", "--nodelist", options.nodelist)):
        if value is not None and not HOSTLIST.fullmatch(value):
            raise InputError(f"{shown(value)} is not a Slurm node list: use names, commas and bracket "
                             "ranges, e.g. gpu[001-004],gpu017", field=name)
        if value is not None:  # the one hostlist grammar (dsctl.cluster.hostlist), bounded like every run's
            hostlist.count(value, option=flag, max_names=MAX_NODES)
    for arg in options.sbatch_args:
        match = _SBATCH_ARG.fullmatch(arg)
        if match is None or any(c in arg for c in "\n\r\0"):
            raise InputError(f"{arg!r} is not one sbatch option: use --name or --name=value on one "
                             "line, e.g. {sbatch_args}=--mail-type=END", field="sbatch_args",
                             mentions=("sbatch_args",))
        reserved = reserved_prefix(match.group(1), RESERVED_SBATCH)
        if reserved is not None:
            same = "" if reserved == match.group(1) else " (a prefix of it, which sbatch may read as it)"
            raise InputError(f"{arg!r}: dsctl writes --{reserved} itself{same}; use "
                             f"{RESERVED_SBATCH[reserved]}", field="sbatch_args")


def directive_value(value: str) -> str:
    """``value`` as sbatch reads it from an ``#SBATCH`` line: double-quoted when it holds whitespace.

    sbatch splits ``#SBATCH`` lines at whitespace and honours double quotes and backslash escapes, so a log path
    such as ``/home/me/my runs/job-%j.out`` must be quoted or it is cut at the space.
    """
    if comment_text(value) != value:  # a line break would end the #SBATCH line and start a script line
        raise InputError(f"Slurm log path {shown(value)} holds a line break or control character",
                         hint="choose an --out-dir folder whose path has none")
    if not any(c.isspace() or c in '"\\' for c in value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def slurm_directives(options: SlurmOptions) -> list[str]:
    """The extra ``#SBATCH`` option texts (without ``#SBATCH``), in a fixed order, values quoted for sbatch."""
    lines = [f"--{name}={value}" for name, value in (("account", options.account), ("qos", options.qos),
                                                     ("reservation", options.reservation),
                                                     ("exclude", options.exclude), ("nodelist", options.nodelist))
             if value is not None]
    if options.exclusive:
        lines.append("--exclusive")
    for arg in options.sbatch_args:
        name, sep, value = arg.partition("=")
        lines.append(f"{name}={directive_value(value)}" if sep else name)
    return lines


def job_environment(ib_devices: tuple[str, ...], nccl_env: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Extra job variables: ``NCCL_IB_HCA`` limited to the compute NICs (exact names, ``=`` prefix) when the node
    profile names them, then every ``--nccl-env NAME=VALUE`` (a later one of the same name wins)."""
    env: dict[str, str] = {}
    if ib_devices:
        env["NCCL_IB_HCA"] = "=" + ",".join(ib_devices)
    for item in nccl_env:
        match = _NCCL_ENV.fullmatch(item)
        if match is None or any(c in item for c in "\n\r\0"):
            raise InputError(f"{item!r} is not NCCL_NAME=VALUE (one line, an NCCL_ variable)", field="nccl_env",
                             hint="e.g. --nccl-env NCCL_IB_TIMEOUT=22")
        env[match.group(1)] = match.group(2)
    return tuple(env.items())
