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
from typing import Any, TypeVar, cast

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


#: sanity limits: far above any real hardware, low enough to catch unit slips (GiB written as TiB ...)
_MAX_INT = 10**7
_MAX_BYTES = 1024**5  # 1 PiB
_MAX_RATE_BITS = 8e15  # 1 PB/s


class _Doc:
    """A mapping being validated, with its file and key path for error messages.

    With ``errors=None`` the first invalid key raises ``ProfileError`` (loading a profile for a command). With a
    list, every invalid key is appended to it and a placeholder value stands in, so that the rest of the file is
    still checked (``profiles validate``); the profile built that way is thrown away. A section that is missing
    or not a mapping is reported once and then read silently (its keys are not reported again as missing), and
    a check across keys runs only when the keys it reads are valid (see :meth:`valid`).
    """

    def __init__(self, data: Any, file: Path, keypath: str, errors: list[ProfileError] | None = None,
                 quiet: bool = False) -> None:
        self.file = file
        self.keypath = keypath
        self.errors = errors
        self.quiet = quiet
        self.invalid: set[str] = set()
        self.used: set[str] = set()
        self.data: Mapping[str, Any] = {}
        if isinstance(data, Mapping):
            self.data = data
        elif not quiet:
            self.fail(f"expected a mapping of keys to values, got {_describe(data)}")
            self.quiet = True

    def where(self, key: str | None = None) -> str:
        path = ".".join(p for p in (self.keypath, key) if p)
        return f"{self.file}: {path}" if path else str(self.file)

    def error(self, message: str, key: str | None = None, hint: str | None = None) -> ProfileError:
        return ProfileError(f"{self.where(key)}: {message}", hint=hint)

    def fail(self, message: str, key: str | None = None, hint: str | None = None) -> None:
        """Report an invalid key: raised at once, or recorded when collecting every error."""
        self.report(self.error(message, key, hint), key)

    def report(self, error: ProfileError, key: str | None) -> None:
        if self.errors is None:
            raise error
        if key is not None:
            self.invalid.add(key)
        if not self.quiet:
            self.errors.append(error)

    def valid(self, *keys: str) -> bool:
        """True when none of ``keys`` was reported invalid (always True when the first error raises)."""
        return not self.quiet and not self.invalid.intersection(keys)

    def _get(self, key: str, required: bool) -> Any:
        self.used.add(key)
        if key not in self.data:
            if required:
                close = difflib.get_close_matches(key, [str(k) for k in self.data], n=1)
                hint = f"found {close[0]!r}: did you mean {key!r}?" if close else None
                raise self.error("required key is missing", key, hint=hint)
            return None
        return self.data[key]

    def _read(self, key: str, required: bool, check: Callable[[Any], _T], absent: _T, placeholder: _T,
              parse_null: bool = False) -> _T:
        """``check(value)`` of ``key``, ``absent`` when the key is missing or null (``parse_null``: null is checked
        too); on an invalid value the error is raised or recorded (then ``placeholder`` stands in)."""
        try:
            value = self._get(key, required)
            return absent if value is None and not (parse_null and key in self.data) else check(value)
        except ProfileError as exc:
            self.report(exc, key)
            return placeholder

    def text(self, key: str, default: str | None = None, choices: Sequence[str] | None = None) -> str:
        def check(value: Any) -> str:
            if not isinstance(value, str):
                raise self.error(f"expected a string, got {_describe(value)}", key)
            if choices is not None and value not in choices:
                raise self.error(f"{value!r} is not valid; expected {one_of(list(choices))}", key)
            return value

        return self._read(key, default is None, check, default or "", default or "")

    def integer(self, key: str, minimum: int = 0, default: int | None = None, maximum: int = _MAX_INT) -> int:
        def check(value: Any) -> int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.error(f"expected an integer >= {minimum}, got {_describe(value)}", key)
            if not minimum <= value <= maximum:
                raise self.error(f"expected an integer from {minimum} to {maximum:,}, got {value:,}", key)
            return int(value)

        fallback = int(default or 0)
        return self._read(key, default is None, check, fallback, max(minimum, 1) if default is None else fallback)

    def number(self, key: str, minimum: float = 0.0, default: float | None = None) -> float:
        def check(value: Any) -> float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise self.error(f"expected a number >= {minimum:g}, got {_describe(value)}", key)
            if not minimum <= value < math.inf:  # also rejects NaN
                raise self.error(f"expected a finite number >= {minimum:g}, got {value}", key)
            return float(value)

        fallback = float(default or 0.0)
        return self._read(key, default is None, check, fallback, max(minimum, 1.0) if default is None else fallback)

    def count(self, key: str, default: float = 0.0) -> float:
        def check(value: Any) -> float:
            if not isinstance(value, (str, int, float)):
                raise self.error(f"expected a count like 671B or 14.8T, got {_describe(value)}", key)
            try:
                result = parse_count(value)
            except QuantityError as exc:
                raise self.error(f"{exc}", key) from None
            if result < 0:
                raise self.error(f"expected a count >= 0, got {value!r}", key)
            return result

        return self._read(key, False, check, default, default)

    def flag(self, key: str, default: bool) -> bool:
        def check(value: Any) -> bool:
            if not isinstance(value, bool):
                raise self.error(f"expected true or false, got {_describe(value)}", key)
            return bool(value)

        return self._read(key, False, check, default, default)

    def _quantity(self, key: str, parse: Callable[[Any], _T], maximum: float, what: str, example: str,
                  placeholder: _T) -> _T:
        """A required quantity with units, ``0 < value <= maximum``."""
        def check(value: Any) -> _T:
            if not isinstance(value, (str, int, float)):
                raise self.error(f"expected a quantity like {example!r}, got {_describe(value)}", key)
            try:
                result = parse(value)
            except QuantityError as exc:
                raise self.error(str(exc), key) from None
            if not 0 < cast(float, result) <= maximum:
                raise self.error(f"expected a {what}, got {value!r}", key)
            return result

        return self._read(key, True, check, placeholder, placeholder, parse_null=True)

    def size_bytes(self, key: str, maximum: int = _MAX_BYTES) -> int:
        return self._quantity(key, parse_bytes, maximum, f"size > 0 and <= {human_bytes(maximum)}", "80 GiB", 1)

    def rate_bits(self, key: str, maximum_bits: float = _MAX_RATE_BITS) -> float:
        return self._quantity(key, parse_rate_bits, maximum_bits, f"rate > 0 and <= {maximum_bits / 8e12:g} TB/s",
                              "400 Gb/s", 1.0)

    def names(self, key: str, pattern: str, example: str) -> tuple[str, ...]:
        """An optional list of names, each a full match of ``pattern``; () when the key is absent."""
        def check(value: Any) -> tuple[str, ...]:
            if not isinstance(value, list) or not all(isinstance(v, str) and re.fullmatch(pattern, v)
                                                      for v in value):
                raise self.error(f"expected a list of names like [{example}], got {_describe(value)}", key)
            if len(set(value)) != len(value):
                raise self.error("lists a name twice", key)
            return tuple(value)

        return self._read(key, False, check, (), ())

    def _child(self, key: str, required: bool) -> _Doc | None:
        path = ".".join(p for p in (self.keypath, key) if p)
        try:
            value = self._get(key, required)
        except ProfileError as exc:
            self.report(exc, key)
            return _Doc({}, self.file, path, self.errors, quiet=True)
        if value is None and not required:
            return None
        child = _Doc(value, self.file, path, self.errors, quiet=self.quiet)
        if child.quiet:
            self.invalid.add(key)
        return child

    def section(self, key: str) -> _Doc:
        return cast(_Doc, self._child(key, True))  # a required key never gives None

    def optional_section(self, key: str) -> _Doc | None:
        return self._child(key, False)

    def finish(self) -> None:
        for unknown in [str(k) for k in self.data if k not in self.used]:
            close = difflib.get_close_matches(unknown, sorted(self.used), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"valid keys here: {', '.join(sorted(self.used))}"
            self.fail("unknown key", unknown, hint=hint)


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
    if not att.valid("kind"):
        att.quiet = True  # which keys belong here depends on the kind: the rest of the section cannot be judged
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
        if att.valid("num_heads", "num_kv_heads") and num_heads % num_kv_heads:
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
        if moe_doc.valid("num_routed_experts", "num_expert_groups") and \
                moe.num_routed_experts % moe.num_expert_groups:
            moe_doc.fail(f"num_routed_experts {moe.num_routed_experts} is not divisible by num_expert_groups "
                         f"{moe.num_expert_groups}", "num_expert_groups")
        if moe_doc.valid("num_experts_per_token", "num_routed_experts") and \
                moe.num_experts_per_token > moe.num_routed_experts:
            moe_doc.fail("cannot exceed num_routed_experts", "num_experts_per_token")
        if moe_doc.valid("num_limited_groups", "num_expert_groups") and \
                moe.num_limited_groups > moe.num_expert_groups:
            moe_doc.fail("cannot exceed num_expert_groups", "num_limited_groups")
        moe_doc.finish()

    num_layers = doc.integer("num_layers", 1)
    num_dense_layers = doc.integer("num_dense_layers", 0, default=num_layers if moe is None else 0)
    layers_valid = doc.valid("num_layers", "num_dense_layers")
    if layers_valid and num_dense_layers > num_layers:
        doc.fail(f"{num_dense_layers} exceeds num_layers {num_layers}", "num_dense_layers")
    elif layers_valid and moe is None and num_dense_layers != num_layers:
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
    if nics.valid("devices", "count") and profile.compute_nic_devices and \
            len(profile.compute_nic_devices) != nic_count:
        nics.fail(f"names {len(profile.compute_nic_devices)} devices for count {nic_count}: give one name per "
                  "compute NIC, in GPU order", "devices")
    if nics.valid("count") and gpu.valid("count") and nic_count and \
            not (gpus % nic_count == 0 or nic_count % gpus == 0):
        nics.fail(f"{nic_count} compute NICs do not pair with {gpus} GPUs: one count must divide the other "
                  "(NIC i serves GPU i, or each NIC serves a fixed group of GPUs)", "count")
    return profile


def _build_switch(doc: _Doc, name: str) -> SwitchProfile:
    cost = doc.section("cost")
    num_ports = doc.integer("ports", 4)
    if doc.valid("ports") and num_ports % 2:
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
        link=doc.text("link", default=""),
    )
    if profile.link and not _IB_LINK.fullmatch(profile.link):
        doc.fail(f"link must be <width>x<speed> as ibnetdiscover prints it (e.g. 4xNDR, 2xNDR), got "
                 f"{profile.link!r}", "link")
    cost.finish()
    return profile


_IB_LINK = re.compile(r"(1|2|4|8|12)x(SDR|DDR|QDR|FDR10|FDR|EDR|HDR|NDR|XDR)")


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
        raise ProfileError(f"{path}: expected a mapping of keys to values, got {_describe(data)}")
    doc = _Doc(data, path, "", errors)
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
