"""Site configuration: defaults for command-line options from ``dsctl.toml`` files.

Files, in order (the first file that sets a key wins that key; an option given on the command line wins over all):

1. ``$DSCTL_CONFIG`` (a file; it must exist when the variable is set)
2. ``$XDG_CONFIG_HOME/dsctl/dsctl.toml`` (``~/.config/dsctl/dsctl.toml`` when XDG_CONFIG_HOME is unset)
3. ``/etc/dsctl/dsctl.toml``

Each key is a default for one or more options (``KEYS``); the root command turns the merged values into Click's
``default_map``, so a flag on the command line always wins. Unknown keys and wrong types are an InputError naming
the file and the key (exit 2).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsctl.errors import InputError, one_of
from dsctl.profiles import DEFAULT_MODEL, DEFAULT_NODE_PROFILE, DEFAULT_STORAGE, DEFAULT_SWITCH

ENV_VAR = "DSCTL_CONFIG"
FILE_NAME = "dsctl.toml"
#: the system-wide folder (a module constant so tests can point it elsewhere)
SYSTEM_DIR = Path("/etc/dsctl")
#: a configuration file larger than this is refused (it is a handful of lines)
MAX_FILE_BYTES = 1_000_000


@dataclass(frozen=True)
class Key:
    """One configuration key: its TOML type, the options it is the default of, its built-in value."""

    name: str
    kind: type
    targets: tuple[str, ...]
    builtin: Any
    help: str


def _key(name: str, kind: type, targets: str, builtin: Any, help_: str) -> Key:
    return Key(name, kind, tuple(targets.split()), builtin, help_)


# targets: "command path.param" where the path is the command words joined by '.' and param the option's Python name
KEYS: tuple[Key, ...] = (
    _key("defaults.model", str, "launch.model launch.layout.model model.flops.model model.cost.model "
         "model.memory.model", DEFAULT_MODEL, "model profile of launch and model commands"),
    _key("defaults.node_profile", str, "launch.node_profile launch.layout.node_profile topology.plan.node_profile "
         "storage.size.client_node health.check.node", DEFAULT_NODE_PROFILE,
         "node profile (GPUs, NICs) of launch, topology plan, storage size --client-node, health check --node"),
    _key("defaults.storage", str, "storage.size.storage", DEFAULT_STORAGE, "storage node profile of storage size"),
    _key("defaults.switch", str, "topology.plan.switch topology.compare.switch", DEFAULT_SWITCH,
         "switch profile of topology plan and compare"),
    _key("defaults.profiles_dirs", list, "", [], "extra profile folders (before DSCTL_PROFILES and --profiles-dir; "
         "relative to the file)"),
    _key("launch.backend", str, "launch.backend", None, "job engine: slurm, torchrun or kubernetes"),
    _key("launch.partition", str, "launch.partition", None, "Slurm partition"),
    _key("launch.account", str, "launch.account", None, "Slurm account"),
    _key("launch.qos", str, "launch.qos", None, "Slurm quality of service"),
    _key("launch.reservation", str, "launch.reservation", None, "Slurm reservation"),
    _key("launch.time", str, "launch.time_limit", None, "Slurm time limit, e.g. 2-00:00:00"),
    _key("launch.exclude", str, "launch.exclude", None, "Slurm nodes never to use, e.g. gpu[013,077]"),
    _key("launch.image", str, "launch.image", None, "Kubernetes container image"),
    _key("launch.job_name_prefix", str, "launch.job_name", "", "prefix of the default job name "
         "(dsctl-train); --job-name replaces the whole name"),
    _key("topology.node_name", str, "topology.plan.node_name", None, "node name template, e.g. gpu{n:04d}"),
    _key("topology.nic_name", str, "topology.plan.nic_name", None, "NIC name template, e.g. mlx5_{nic}"),
    _key("topology.leaf_name", str, "topology.plan.leaf_name", None, "leaf switch name template"),
    _key("topology.spine_name", str, "topology.plan.spine_name", None, "spine switch name template"),
    _key("topology.core_name", str, "topology.plan.core_name", None, "core switch name template (ft3)"),
)
KEYS_BY_NAME = {key.name: key for key in KEYS}
#: keys whose value is a profile name
PROFILE_KEYS = ("defaults.model", "defaults.node_profile", "defaults.storage", "defaults.switch")
SECTIONS = sorted({key.name.split(".")[0] for key in KEYS})


@dataclass(frozen=True)
class SearchedFile:
    path: str
    found: bool
    why: str  # "DSCTL_CONFIG", "user" or "system"


@dataclass(frozen=True)
class Setting:
    key: str
    value: Any
    source: str  # a file path, or "built-in" / "unset"
    help: str


@dataclass(frozen=True)
class SiteConfig:
    """The merged configuration: every key's value and where it came from."""

    files: list[SearchedFile] = field(default_factory=list)
    settings: list[Setting] = field(default_factory=list)

    def value(self, name: str) -> Any:
        return next(s.value for s in self.settings if s.key == name)

    def from_files(self) -> list[Setting]:
        return [s for s in self.settings if s.source not in ("built-in", "unset")]

    def profile_dirs(self) -> list[Path]:
        setting = next(s for s in self.settings if s.key == "defaults.profiles_dirs")
        if setting.source in ("built-in", "unset"):
            return []
        base = Path(setting.source).parent
        return [base / Path(p).expanduser() for p in setting.value]

    def profile_dirs_with_origin(self) -> list[tuple[Path, str]]:
        """:meth:`profile_dirs`, each with "FILE: defaults.profiles_dirs" (for messages)."""
        setting = next(s for s in self.settings if s.key == "defaults.profiles_dirs")
        return [(d, f"{setting.source}: {setting.key}") for d in self.profile_dirs()]

    def origins(self) -> dict[str, str]:
        """Profile name -> "FILE: KEY" for every profile key a file sets."""
        return {str(s.value): f"{s.source}: {s.key}" for s in self.from_files() if s.key in PROFILE_KEYS}

    def default_map(self) -> dict[str, Any]:
        """Click's ``default_map`` (nested by command words) for every option a file sets."""
        root: dict[str, Any] = {}
        for setting in self.from_files():
            key = KEYS_BY_NAME[setting.key]
            value = setting.value
            if key.name == "launch.job_name_prefix":
                value = f"{value}dsctl-train"
            for target in key.targets:
                *path, param = target.split(".")
                node = root
                for word in path:
                    node = node.setdefault(word, {})
                node[param] = value
        return root


def search_path(environ: Mapping[str, str]) -> list[tuple[Path, str]]:
    """The files looked at, first wins: ($DSCTL_CONFIG), the user's, the system's."""
    paths: list[tuple[Path, str]] = []
    if environ.get(ENV_VAR):
        paths.append((Path(environ[ENV_VAR]), ENV_VAR))
    config_home = environ.get("XDG_CONFIG_HOME") or str(Path(environ.get("HOME") or Path.home()) / ".config")
    paths.append((Path(config_home) / "dsctl" / FILE_NAME, "user"))
    paths.append((SYSTEM_DIR / FILE_NAME, "system"))
    return paths


def _parse(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib
    from dsctl.inputs import read_bytes

    # the shared input reader: a FIFO or a device (/dev/zero) is refused from stat, before it is opened, and the
    # read stops at the limit, so no file can block a command or grow memory
    if str(path) == "-":
        raise InputError(f"{ENV_VAR}=-: standard input is not a configuration file; give a dsctl.toml path")
    data = read_bytes(path, "configuration file", limit=MAX_FILE_BYTES)
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: not valid TOML: {exc}") from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise InputError(f"{path}: not valid TOML: {str(exc)[:120]}") from None
    except RecursionError:
        raise InputError(f"{path}: not valid TOML: arrays or tables nested too deeply") from None


def _check(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """The file's values by key name; InputError naming the file and key for anything unknown or mistyped."""
    values: dict[str, Any] = {}
    for section, table in data.items():
        if section not in SECTIONS:
            raise InputError(f"{path}: unknown section [{section}]", hint=f"sections: {one_of(SECTIONS)}; "
                             "'dsctl config show' lists every key")
        if not isinstance(table, dict):
            raise InputError(f"{path}: {section} must be a table ([{section}] followed by key = value lines)")
        for name, value in table.items():
            full = f"{section}.{name}"
            key = KEYS_BY_NAME.get(full)
            if key is None:
                known = [k.name.split(".", 1)[1] for k in KEYS if k.name.startswith(section + ".")]
                raise InputError(f"{path}: unknown key {full}", hint=f"keys of [{section}]: {one_of(known)}")
            values[full] = _typed(path, key, value)
    return values


def _typed(path: Path, key: Key, value: Any) -> Any:
    if key.kind is list:
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise InputError(f"{path}: {key.name} must be a list of folder names, e.g. [\"/opt/profiles\"]; "
                             f"got {value!r}")
        return list(value)
    if not isinstance(value, str):
        raise InputError(f"{path}: {key.name} must be a string (in quotes), got {type(value).__name__} {value!r}")
    if key.name != "launch.job_name_prefix" and not value.strip():
        raise InputError(f"{path}: {key.name} is empty; remove the line to use the built-in default")
    if any(c in value for c in "\n\r\0"):
        raise InputError(f"{path}: {key.name} must be one line")
    return value


def load(environ: Mapping[str, str]) -> SiteConfig:
    """Read every configuration file that exists and merge them (first file wins per key)."""
    found: dict[str, tuple[Any, str]] = {}
    searched = []
    for path, why in search_path(environ):
        exists = path.exists()
        searched.append(SearchedFile(str(path), exists, why))
        if not exists:
            if why == ENV_VAR:
                raise InputError(f"{ENV_VAR}={path}: file not found", hint="unset DSCTL_CONFIG or point it at "
                                 "a dsctl.toml")
            continue
        for name, value in _check(path, _parse(path)).items():
            found.setdefault(name, (value, str(path)))
    settings = []
    for key in KEYS:
        unset = (key.builtin, "built-in" if key.builtin not in (None, "", []) else "unset")
        value, source = found.get(key.name, unset)
        settings.append(Setting(key.name, value, source, key.help))
    return SiteConfig(searched, settings)


def current(environ: Mapping[str, str] | None = None) -> SiteConfig:
    """``load(os.environ)``."""
    return load(os.environ if environ is None else environ)
