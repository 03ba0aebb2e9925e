"""Find, read and validate YAML profiles.

Search order (later wins for equal names): the built-in profiles shipped with dsctl, then each user
directory from ``DSCTL_PROFILES`` (``os.pathsep``-separated), then ``--profiles-dir``. A directory holds
``models/``, ``nodes/``, ``switches/`` and ``storage/`` sub-folders of ``*.yaml`` files; a YAML file placed
directly in the directory names its kind with a top-level ``kind:`` key.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar, cast

from dsctl.errors import ProfileError
from dsctl.inputs import read_bytes
from dsctl.names import NAME, shown
from dsctl.profiles.build import BUILDERS
from dsctl.profiles.doc import Doc, describe, short
from dsctl.profiles.schema import (
    ModelProfile,
    NodeProfile,
    Profile,
    ProfileKind,
    StorageProfile,
    SwitchProfile,
)
from dsctl.profiles.textyaml import load_yaml

ENV_VAR = "DSCTL_PROFILES"
_T = TypeVar("_T")
_SINGULAR = {
    ProfileKind.MODEL: "model", ProfileKind.NODE: "node", ProfileKind.SWITCH: "switch", ProfileKind.STORAGE: "storage",
}
_KIND_ALIASES = {
    "model": ProfileKind.MODEL, "models": ProfileKind.MODEL,
    "node": ProfileKind.NODE, "nodes": ProfileKind.NODE,
    "switch": ProfileKind.SWITCH, "switches": ProfileKind.SWITCH,
    "storage": ProfileKind.STORAGE,
}


def builtin_profiles_dir() -> Path:
    """The shipped profiles: ``dsctl/_profile_data`` in an installed wheel, the repo's ``profiles/`` otherwise."""
    packaged = Path(str(resources.files("dsctl"))) / "_profile_data"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "profiles"


@dataclass(frozen=True)
class ProfileEntry:
    """Where a named profile comes from."""

    name: str
    kind: ProfileKind
    path: Path
    builtin: bool




def read_yaml(path: Path) -> Any:
    """Parse one YAML file (bounded size, duplicate keys refused); errors name the file, line and column."""
    data = read_bytes(path, "profile", error=ProfileError)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProfileError(f"{path}: cannot read: not UTF-8 text (byte {exc.start})") from None
    return load_yaml(text, str(path), ProfileError)


def _kind_of(path: Path, data: Any) -> ProfileKind:
    declared = data.get("kind") if isinstance(data, Mapping) else None
    if declared is not None:
        kind = _KIND_ALIASES.get(str(declared))
        if kind is None:
            raise ProfileError(
                f"{path}: kind: {declared!r} is not valid; expected model, node, switch or storage"
            )
        return kind
    folder = _KIND_ALIASES.get(path.parent.name)
    if folder is None:
        raise ProfileError(
            f"{path}: cannot tell the profile kind",
            hint="put the file under models/, nodes/, switches/ or storage/, "
            "or add 'kind: model' (node, switch, storage)",
        )
    return folder


def load_file(path: Path, kind: ProfileKind | None = None) -> Profile:
    """Read and validate one profile file. Raises ``ProfileError`` naming the file and key path (the first
    invalid key)."""
    return _load(path, kind, None)


def check_file(path: Path, kind: ProfileKind | None = None) -> tuple[Profile | None, list[ProfileError]]:
    """Validate one profile file, reporting every invalid key: ``(profile, [])`` when valid, else ``(None,
    errors)`` in the order the keys are checked. A file that cannot be read as a mapping gives one error."""
    errors: list[ProfileError] = []
    try:
        profile = _load(path, kind, errors)
    except ProfileError as exc:  # unreadable, bad YAML, bad file name or kind: nothing more to check
        return None, [*errors, exc]
    return (None, errors) if errors else (profile, [])


def _load(path: Path, kind: ProfileKind | None, errors: list[ProfileError] | None) -> Profile:
    data = read_yaml(path)
    if data is None:
        raise ProfileError(f"{path}: the file is empty")
    if not NAME.fullmatch(path.stem):
        raise ProfileError(f"{path}: {shown(path.stem)} is not a valid profile name (the file name without .yaml): "
                           "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
                           hint="profile names reach generated job scripts; rename the file")
    kind = kind or _kind_of(path, data)
    if not isinstance(data, Mapping):
        raise ProfileError(f"{path}: expected a mapping of keys to values, got {describe(data)}")
    doc = Doc(data, path, "", errors)
    doc.used.add("kind")
    name = doc.text("name", default=path.stem)
    if name != path.stem:
        doc.fail(f"{name!r} differs from the file name {path.stem!r}", "name",
                 hint=f"rename the file to {name}.yaml or drop the name key")
    profile: Profile = BUILDERS[kind](doc, name)
    doc.finish()
    return profile


class ProfileStore:
    """Every profile visible to this invocation, by kind and name."""

    def __init__(self, user_dirs: Sequence[Path] = ()) -> None:
        self.dirs: list[tuple[Path, bool]] = [(builtin_profiles_dir(), True)]
        for directory in user_dirs:
            if not directory.is_dir():
                raise ProfileError(f"profiles directory {directory} does not exist or is not a directory")
            self.dirs.append((directory, False))
        self._entries: dict[ProfileKind, dict[str, ProfileEntry]] = {k: {} for k in ProfileKind}
        for directory, builtin in self.dirs:
            for path, kind in _scan(directory):
                self._entries[kind][path.stem] = ProfileEntry(path.stem, kind, path, builtin)
        self._cache: dict[tuple[ProfileKind, str], Profile] = {}
        #: profile name -> where a configuration file set it ("FILE: KEY"), named when the name is unknown
        self.origins: dict[str, str] = {}

    @classmethod
    def from_environment(cls, environ: Mapping[str, str], profiles_dir: Path | None = None) -> ProfileStore:
        dirs = [Path(p) for p in environ.get(ENV_VAR, "").split(os.pathsep) if p]
        if profiles_dir is not None:
            dirs.append(profiles_dir)
        return cls(dirs)

    def entries(self, kind: ProfileKind | None = None) -> list[ProfileEntry]:
        kinds = [kind] if kind else list(ProfileKind)
        return [e for k in kinds for _, e in sorted(self._entries[k].items())]

    def names(self, kind: ProfileKind) -> list[str]:
        return sorted(self._entries[kind])

    def kind_of(self, name: str) -> ProfileKind | None:
        """The kind of profile ``name`` is (first match in model, node, switch, storage order), or None."""
        return next((kind for kind in ProfileKind if name in self._entries[kind]), None)

    def get(self, kind: ProfileKind, name: str) -> Profile:
        entry = self._entries[kind].get(name)
        if entry is None:
            names = self.names(kind)
            wanted = _SINGULAR[kind]
            other = self.kind_of(name)
            if other is not None:
                raise ProfileError(
                    f"{name!r} is a {_SINGULAR[other]} profile, not a {wanted} profile; "
                    f"{wanted} profiles: {', '.join(names) or '(none)'}",
                    hint="list every profile with: dsctl profiles list",
                )
            close = difflib.get_close_matches(name, names, n=1)
            origin = f" (set by {self.origins[name]})" if name in self.origins else ""
            raise ProfileError(
                f"unknown {wanted} profile {short(name)}{origin}; available: {', '.join(names) or '(none)'}",
                hint=(f"did you mean {close[0]!r}? " if close else "")
                + "add your own with --profiles-dir DIR or DSCTL_PROFILES",
            )
        key = (kind, name)
        if key not in self._cache:
            self._cache[key] = load_file(entry.path, kind)
        return self._cache[key]

    def find(self, name: str) -> Profile:
        """Look a name up in every kind (for ``dsctl profiles show NAME``)."""
        for kind in ProfileKind:
            if name in self._entries[kind]:
                return self.get(kind, name)
        every = sorted({n for k in ProfileKind for n in self._entries[k]})
        close = difflib.get_close_matches(name, every, n=1)
        raise ProfileError(
            f"unknown profile {short(name)}; available: {', '.join(every)}",
            hint=(f"did you mean {close[0]!r}? " if close else "") + "list them with: dsctl profiles list",
        )

    def model(self, name: str) -> ModelProfile:
        return cast(ModelProfile, self.get(ProfileKind.MODEL, name))

    def node(self, name: str) -> NodeProfile:
        return cast(NodeProfile, self.get(ProfileKind.NODE, name))

    def switch(self, name: str) -> SwitchProfile:
        return cast(SwitchProfile, self.get(ProfileKind.SWITCH, name))

    def storage(self, name: str) -> StorageProfile:
        return cast(StorageProfile, self.get(ProfileKind.STORAGE, name))


def _profile_files(directory: Path) -> Iterator[tuple[Path, ProfileKind | None]]:
    """Profile files under ``directory``: its kind sub-folders, then loose files (kind None: read from the file)."""
    for kind in ProfileKind:
        sub = directory / kind.value
        if sub.is_dir():
            for path in sorted(sub.glob("*.yaml")) + sorted(sub.glob("*.yml")):
                yield path, kind
    for path in sorted(directory.glob("*.yaml")) + sorted(directory.glob("*.yml")):
        yield path, None


def _scan(directory: Path) -> Iterator[tuple[Path, ProfileKind]]:
    for path, kind in _profile_files(directory):
        yield path, kind if kind is not None else _kind_of(path, read_yaml(path))


def validate_path(path: Path) -> list[Profile]:
    """Validate one profile file, or every profile under a directory. Raises the first invalid file's first
    error."""
    profiles, errors = validate_each(path)
    if errors:
        raise errors[0][0]
    return profiles


def validate_each(path: Path) -> tuple[list[Profile], list[list[ProfileError]]]:
    """Validate one profile file, or every profile under a directory: the valid profiles, and for each invalid
    file every error found in it (every key of every file is checked)."""
    if not path.exists():
        raise ProfileError(f"{path}: no such file or directory")
    found = [(path, None)] if not path.is_dir() else list(_profile_files(path))
    if not found:
        raise ProfileError(f"{path}: no *.yaml profiles found",
                           hint="profiles live in models/, nodes/, switches/ or storage/ sub-folders")
    profiles, errors = [], []
    for file, kind in found:
        profile, problems = check_file(file, kind)
        if profile is not None:
            profiles.append(profile)
        else:
            errors.append(problems)
    return profiles, errors
