"""Find, read and validate YAML profiles.

Search order (later wins for equal names): the built-in profiles shipped with dsctl, then each user
directory from ``DSCTL_PROFILES`` (``os.pathsep``-separated), then ``--profiles-dir``. A directory holds
``models/``, ``nodes/``, ``switches/`` and ``storage/`` sub-folders of ``*.yaml`` files; a YAML file placed
directly in the directory names its kind with a top-level ``kind:`` key.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, cast

from dsctl.errors import ProfileError, one_of
from dsctl.inputs import read_bytes
from dsctl.names import NAME, shown
from dsctl.profiles.schema import (
    AttentionSpec,
    ModelProfile,
    MoESpec,
    NodeProfile,
    Profile,
    ProfileKind,
    PublishedFigures,
    StorageProfile,
    SwitchProfile,
)
from dsctl.profiles.textyaml import load_yaml
from dsctl.units import QuantityError, human_bytes, parse_bytes, parse_count, parse_rate_bits

ENV_VAR = "DSCTL_PROFILES"
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


#: sanity limits: far above any real hardware, low enough to catch unit slips (GiB written as TiB ...)
_MAX_INT = 10**7
_MAX_BYTES = 1024**5  # 1 PiB
_MAX_RATE_BITS = 8e15  # 1 PB/s


class _Doc:
    """A mapping being validated, with its file and key path for error messages."""

    def __init__(self, data: Any, file: Path, keypath: str) -> None:
        self.file = file
        self.keypath = keypath
        if not isinstance(data, Mapping):
            self.fail(f"expected a mapping of keys to values, got {_describe(data)}")
        self.data: Mapping[str, Any] = data
        self.used: set[str] = set()

    def where(self, key: str | None = None) -> str:
        path = ".".join(p for p in (self.keypath, key) if p)
        return f"{self.file}: {path}" if path else str(self.file)

    def fail(self, message: str, key: str | None = None, hint: str | None = None) -> None:
        raise ProfileError(f"{self.where(key)}: {message}", hint=hint)

    def _get(self, key: str, required: bool) -> Any:
        self.used.add(key)
        if key not in self.data:
            if required:
                close = difflib.get_close_matches(key, [str(k) for k in self.data], n=1)
                hint = f"found {close[0]!r}: did you mean {key!r}?" if close else None
                self.fail("required key is missing", key, hint=hint)
            return None
        return self.data[key]

    def text(self, key: str, default: str | None = None, choices: Sequence[str] | None = None) -> str:
        value = self._get(key, default is None)
        if value is None:
            return default or ""
        if not isinstance(value, str):
            self.fail(f"expected a string, got {_describe(value)}", key)
        if choices is not None and value not in choices:
            self.fail(f"{value!r} is not valid; expected {one_of(list(choices))}", key)
        return value

    def integer(self, key: str, minimum: int = 0, default: int | None = None, maximum: int = _MAX_INT) -> int:
        value = self._get(key, default is None)
        if value is None:
            return int(default or 0)
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(f"expected an integer >= {minimum}, got {_describe(value)}", key)
        if not minimum <= value <= maximum:
            self.fail(f"expected an integer from {minimum} to {maximum:,}, got {value:,}", key)
        return int(value)

    def number(self, key: str, minimum: float = 0.0, default: float | None = None) -> float:
        value = self._get(key, default is None)
        if value is None:
            return float(default or 0.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(f"expected a number >= {minimum:g}, got {_describe(value)}", key)
        if not minimum <= value < math.inf:  # also rejects NaN
            self.fail(f"expected a finite number >= {minimum:g}, got {value}", key)
        return float(value)

    def count(self, key: str, default: float = 0.0) -> float:
        value = self._get(key, False)
        if value is None:
            return default
        try:
            result = parse_count(value)
        except QuantityError as exc:
            self.fail(f"{exc}", key)
        if result < 0:
            self.fail(f"expected a count >= 0, got {value!r}", key)
        return result

    def flag(self, key: str, default: bool) -> bool:
        value = self._get(key, False)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(f"expected true or false, got {_describe(value)}", key)
        return bool(value)

    def size_bytes(self, key: str, maximum: int = _MAX_BYTES) -> int:
        value = self._get(key, True)
        try:
            result = parse_bytes(value)
        except QuantityError as exc:
            self.fail(str(exc), key)
        if not 0 < result <= maximum:
            self.fail(f"expected a size > 0 and <= {human_bytes(maximum)}, got {value!r}", key)
        return result

    def rate_bits(self, key: str, maximum_bits: float = _MAX_RATE_BITS) -> float:
        value = self._get(key, True)
        try:
            result = parse_rate_bits(value)
        except QuantityError as exc:
            self.fail(str(exc), key)
        if not 0 < result <= maximum_bits:
            self.fail(f"expected a rate > 0 and <= {maximum_bits / 8e12:g} TB/s, got {value!r}", key)
        return result

    def names(self, key: str, pattern: str, example: str) -> tuple[str, ...]:
        """An optional list of names, each a full match of ``pattern``; () when the key is absent."""
        value = self._get(key, False)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) and re.fullmatch(pattern, v) for v in value):
            self.fail(f"expected a list of names like [{example}], got {_describe(value)}", key)
        if len(set(value)) != len(value):
            self.fail("lists a name twice", key)
        return tuple(value)

    def section(self, key: str) -> _Doc:
        return _Doc(self._get(key, True), self.file, ".".join(p for p in (self.keypath, key) if p))

    def optional_section(self, key: str) -> _Doc | None:
        value = self._get(key, False)
        if value is None:
            return None
        return _Doc(value, self.file, ".".join(p for p in (self.keypath, key) if p))

    def finish(self) -> None:
        unknown = [k for k in self.data if k not in self.used]
        if unknown:
            key = str(unknown[0])
            close = difflib.get_close_matches(key, sorted(self.used), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"valid keys here: {', '.join(sorted(self.used))}"
            self.fail("unknown key", key, hint=hint)


def _short(value: str, limit: int = 60) -> str:
    """``repr`` of a user-supplied name, cut so that a huge value never floods the error line."""
    return repr(value) if len(value) <= limit else repr(value[:limit]) + f"... ({len(value):,} characters)"


def _describe(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, (int, float)):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__


def _build_model(doc: _Doc, name: str) -> ModelProfile:
    att = doc.section("attention")
    kind = att.text("kind", choices=("mla", "gqa", "mha"))
    num_heads = att.integer("num_heads", 1)
    if kind == "mla":
        attention = AttentionSpec(
            kind=kind,
            num_heads=num_heads,
            num_kv_heads=num_heads,
            head_dim=att.integer("qk_nope_head_dim", 1) + att.integer("qk_rope_head_dim", 1),
            q_lora_rank=att.integer("q_lora_rank", 0, default=0),
            kv_lora_rank=att.integer("kv_lora_rank", 1),
            qk_nope_head_dim=att.integer("qk_nope_head_dim", 1),
            qk_rope_head_dim=att.integer("qk_rope_head_dim", 1),
            v_head_dim=att.integer("v_head_dim", 1),
        )
    else:
        num_kv_heads = att.integer("num_kv_heads", 1, default=num_heads)
        if num_heads % num_kv_heads:
            att.fail(f"num_heads {num_heads} is not a multiple of num_kv_heads {num_kv_heads}", "num_kv_heads")
        attention = AttentionSpec(
            kind=kind, num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=att.integer("head_dim", 1)
        )
    att.finish()

    moe = None
    moe_doc = doc.optional_section("moe")
    if moe_doc is not None:
        moe = MoESpec(
            num_routed_experts=moe_doc.integer("num_routed_experts", 1),
            num_shared_experts=moe_doc.integer("num_shared_experts", 0, default=0),
            num_experts_per_token=moe_doc.integer("num_experts_per_token", 1),
            moe_intermediate_size=moe_doc.integer("moe_intermediate_size", 1),
            num_expert_groups=moe_doc.integer("num_expert_groups", 1, default=1),
            num_limited_groups=moe_doc.integer("num_limited_groups", 1, default=1),
        )
        if moe.num_routed_experts % moe.num_expert_groups:
            moe_doc.fail(f"num_routed_experts {moe.num_routed_experts} is not divisible by num_expert_groups "
                         f"{moe.num_expert_groups}", "num_expert_groups")
        if moe.num_experts_per_token > moe.num_routed_experts:
            moe_doc.fail("cannot exceed num_routed_experts", "num_experts_per_token")
        if moe.num_limited_groups > moe.num_expert_groups:
            moe_doc.fail("cannot exceed num_expert_groups", "num_limited_groups")
        moe_doc.finish()

    num_layers = doc.integer("num_layers", 1)
    num_dense_layers = doc.integer("num_dense_layers", 0, default=num_layers if moe is None else 0)
    if num_dense_layers > num_layers:
        doc.fail(f"{num_dense_layers} exceeds num_layers {num_layers}", "num_dense_layers")
    if moe is None and num_dense_layers != num_layers:
        doc.fail("a model without a moe section is dense: num_dense_layers must equal num_layers", "num_dense_layers")

    published = PublishedFigures()
    pub = doc.optional_section("published")
    if pub is not None:
        published = PublishedFigures(
            total_params=pub.count("total_params"),
            active_params=pub.count("active_params"),
            training_gflops_per_token=pub.number("training_gflops_per_token", 0.0, default=0.0),
            training_gpu_hours_per_trillion_tokens=pub.count("training_gpu_hours_per_trillion_tokens"),
            training_source=pub.text("training_source", default=""),
        )
        pub.finish()

    return ModelProfile(
        name=name,
        description=doc.text("description", default=""),
        source=doc.text("source", default=""),
        num_layers=num_layers,
        num_dense_layers=num_dense_layers,
        hidden_size=doc.integer("hidden_size", 1),
        vocab_size=doc.integer("vocab_size", 1),
        dense_intermediate_size=doc.integer("dense_intermediate_size", 1),
        attention=attention,
        moe=moe,
        num_mtp_modules=doc.integer("num_mtp_modules", 0, default=0),
        tie_word_embeddings=doc.flag("tie_word_embeddings", False),
        published=published,
        path=str(doc.file),
    )


def _build_node(doc: _Doc, name: str) -> NodeProfile:
    gpu = doc.section("gpu")
    nvlink = doc.section("nvlink")
    nics = doc.section("compute_nics")
    storage = doc.section("storage_nics")
    profile = NodeProfile(
        name=name,
        description=doc.text("description", default=""),
        gpu_model=gpu.text("model"),
        num_gpus=gpu.integer("count", 1, maximum=64),
        hbm_bytes=gpu.size_bytes("hbm"),
        bf16_tflops=gpu.number("bf16_dense_tflops", 1.0),
        fp8_tflops=gpu.number("fp8_dense_tflops", 0.0, default=0.0),
        nvlink_bytes_per_s=nvlink.rate_bits("bandwidth") / 8,
        num_nvlinks_per_gpu=nvlink.integer("links_per_gpu", 0),
        num_compute_nics=nics.integer("count", 0),
        compute_nic_model=nics.text("model", default=""),
        compute_nic_gbps=nics.rate_bits("rate") / 1e9,
        compute_link_layer=nics.text("link_layer", choices=("infiniband", "ethernet")),
        num_storage_nics=storage.integer("count", 0),
        storage_nic_gbps=storage.rate_bits("rate") / 1e9,
        storage_link_layer=storage.text("link_layer", choices=("infiniband", "ethernet")),
        path=str(doc.file),
        compute_nic_devices=nics.names("devices", r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}", "mlx5_0, mlx5_1"),
    )
    for section in (gpu, nvlink, nics, storage):
        section.finish()
    gpus, nic_count = profile.num_gpus, profile.num_compute_nics
    if profile.compute_nic_devices and len(profile.compute_nic_devices) != nic_count:
        nics.fail(f"names {len(profile.compute_nic_devices)} devices for count {nic_count}: give one name per "
                  "compute NIC, in GPU order", "devices")
    if nic_count and not (gpus % nic_count == 0 or nic_count % gpus == 0):
        nics.fail(f"{nic_count} compute NICs do not pair with {gpus} GPUs: one count must divide the other "
                  "(NIC i serves GPU i, or each NIC serves a fixed group of GPUs)", "count")
    return profile


def _build_switch(doc: _Doc, name: str) -> SwitchProfile:
    cost = doc.section("cost")
    num_ports = doc.integer("ports", 4)
    if num_ports % 2:
        doc.fail(f"a fat-tree switch needs an even port count, got {num_ports}", "ports")
    profile = SwitchProfile(
        name=name,
        description=doc.text("description", default=""),
        model=doc.text("model", default=""),
        num_ports=num_ports,
        port_gbps=doc.rate_bits("port_rate") / 1e9,
        link_layer=doc.text("link_layer", choices=("infiniband", "ethernet")),
        cost_usd=cost.number("switch_usd"),
        link_cost_usd=cost.number("link_usd"),
        endpoint_link_cost_usd=cost.number("endpoint_link_usd"),
        path=str(doc.file),
    )
    cost.finish()
    return profile


def _build_storage(doc: _Doc, name: str) -> StorageProfile:
    ssd = doc.section("ssd")
    nics = doc.section("nics")
    profile = StorageProfile(
        name=name,
        description=doc.text("description", default=""),
        num_ssds=ssd.integer("count", 1),
        ssd_capacity_bytes=ssd.size_bytes("capacity"),
        ssd_read_bytes_per_s=ssd.rate_bits("read") / 8,
        ssd_write_bytes_per_s=ssd.rate_bits("write") / 8,
        num_nics=nics.integer("count", 1),
        nic_gbps=nics.rate_bits("rate") / 1e9,
        link_layer=nics.text("link_layer", choices=("infiniband", "ethernet")),
        path=str(doc.file),
    )
    ssd.finish()
    nics.finish()
    return profile


_BUILDERS: dict[ProfileKind, Callable[[_Doc, str], Profile]] = {
    ProfileKind.MODEL: _build_model,
    ProfileKind.NODE: _build_node,
    ProfileKind.SWITCH: _build_switch,
    ProfileKind.STORAGE: _build_storage,
}


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
    """Read and validate one profile file. Raises ``ProfileError`` naming the file and key path."""
    data = read_yaml(path)
    if data is None:
        raise ProfileError(f"{path}: the file is empty")
    if not NAME.fullmatch(path.stem):
        raise ProfileError(f"{path}: {shown(path.stem)} is not a valid profile name (the file name without .yaml): "
                           "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
                           hint="profile names reach generated job scripts; rename the file")
    kind = kind or _kind_of(path, data)
    doc = _Doc(data, path, "")
    doc.used.add("kind")
    name = doc.text("name", default=path.stem)
    if name != path.stem:
        doc.fail(f"{name!r} differs from the file name {path.stem!r}", "name",
                 hint=f"rename the file to {name}.yaml or drop the name key")
    profile: Profile = _BUILDERS[kind](doc, name)
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
            raise ProfileError(
                f"unknown {wanted} profile {_short(name)}; available: {', '.join(names) or '(none)'}",
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
            f"unknown profile {_short(name)}; available: {', '.join(every)}",
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
    """Validate one profile file, or every profile under a directory. Raises the first invalid file's error."""
    profiles, errors = validate_each(path)
    if errors:
        raise errors[0]
    return profiles


def validate_each(path: Path) -> tuple[list[Profile], list[ProfileError]]:
    """Validate one profile file, or every profile under a directory: the valid profiles and one error per
    invalid file (every file is checked; a single file's error is raised)."""
    if not path.exists():
        raise ProfileError(f"{path}: no such file or directory")
    if not path.is_dir():
        return [load_file(path)], []
    found = list(_profile_files(path))
    if not found:
        raise ProfileError(f"{path}: no *.yaml profiles found",
                           hint="profiles live in models/, nodes/, switches/ or storage/ sub-folders")
    profiles, errors = [], []
    for file, kind in found:
        try:
            profiles.append(load_file(file, kind))
        except ProfileError as exc:
            errors.append(exc)
    return profiles, errors
