"""Build profile dataclasses from parsed YAML: every key checked, every problem one ProfileError naming the file
and key path (``loader.py`` finds and parses the files; this module turns one parsed document into a profile).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from dsctl.errors import ProfileError, one_of
from dsctl.profiles.schema import (
    DEPLOYMENT_KINDS,
    AchievedCompute,
    AttentionSpec,
    Deployment,
    ModelProfile,
    MoESpec,
    NodeProfile,
    Profile,
    ProfileKind,
    PublishedFigures,
    StorageProfile,
    SwitchProfile,
)
from dsctl.units import QuantityError, human_bytes, parse_bytes, parse_count, parse_rate_bits

_T = TypeVar("_T")

#: sanity limits: far above any real hardware, low enough to catch unit slips (GiB written as TiB ...)
_MAX_INT = 10**7
_MAX_BYTES = 1024**5  # 1 PiB
_MAX_RATE_BITS = 8e15  # 1 PB/s


class Doc:
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
            self.fail(f"expected a mapping of keys to values, got {describe(data)}")
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
                raise self.error(f"expected a string, got {describe(value)}", key)
            if choices is not None and value not in choices:
                raise self.error(f"{value!r} is not valid; expected {one_of(list(choices))}", key)
            return value

        return self._read(key, default is None, check, default or "", default or "")

    def integer(self, key: str, minimum: int = 0, default: int | None = None, maximum: int = _MAX_INT) -> int:
        def check(value: Any) -> int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.error(f"expected an integer >= {minimum}, got {describe(value)}", key)
            if not minimum <= value <= maximum:
                raise self.error(f"expected an integer from {minimum} to {maximum:,}, got {value:,}", key)
            return int(value)

        fallback = int(default or 0)
        return self._read(key, default is None, check, fallback, max(minimum, 1) if default is None else fallback)

    def number(self, key: str, minimum: float = 0.0, default: float | None = None) -> float:
        def check(value: Any) -> float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise self.error(f"expected a number >= {minimum:g}, got {describe(value)}", key)
            if not minimum <= value < math.inf:  # also rejects NaN
                raise self.error(f"expected a finite number >= {minimum:g}, got {value}", key)
            return float(value)

        fallback = float(default or 0.0)
        return self._read(key, default is None, check, fallback, max(minimum, 1.0) if default is None else fallback)

    def count(self, key: str, default: float = 0.0) -> float:
        def check(value: Any) -> float:
            if not isinstance(value, (str, int, float)):
                raise self.error(f"expected a count like 671B or 14.8T, got {describe(value)}", key)
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
                raise self.error(f"expected true or false, got {describe(value)}", key)
            return bool(value)

        return self._read(key, False, check, default, default)

    def _quantity(self, key: str, parse: Callable[[Any], _T], maximum: float, what: str, example: str,
                  placeholder: _T) -> _T:
        """A required quantity with units, ``0 < value <= maximum``."""
        def check(value: Any) -> _T:
            if not isinstance(value, (str, int, float)):
                raise self.error(f"expected a quantity like {example!r}, got {describe(value)}", key)
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
                raise self.error(f"expected a list of names like [{example}], got {describe(value)}", key)
            if len(set(value)) != len(value):
                raise self.error("lists a name twice", key)
            return tuple(value)

        return self._read(key, False, check, (), ())

    def _child(self, key: str, required: bool) -> Doc | None:
        path = ".".join(p for p in (self.keypath, key) if p)
        try:
            value = self._get(key, required)
        except ProfileError as exc:
            self.report(exc, key)
            return Doc({}, self.file, path, self.errors, quiet=True)
        if value is None and not required:
            return None
        child = Doc(value, self.file, path, self.errors, quiet=self.quiet)
        if child.quiet:
            self.invalid.add(key)
        return child

    def section(self, key: str) -> Doc:
        return cast(Doc, self._child(key, True))  # a required key never gives None

    def optional_section(self, key: str) -> Doc | None:
        return self._child(key, False)

    def finish(self) -> None:
        for unknown in [str(k) for k in self.data if k not in self.used]:
            close = difflib.get_close_matches(unknown, sorted(self.used), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"valid keys here: {', '.join(sorted(self.used))}"
            self.fail("unknown key", unknown, hint=hint)


def short(value: str, limit: int = 60) -> str:
    """``repr`` of a user-supplied name, cut so that a huge value never floods the error line."""
    return repr(value) if len(value) <= limit else repr(value[:limit]) + f"... ({len(value):,} characters)"


def describe(value: Any) -> str:
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


def _build_model(doc: Doc, name: str) -> ModelProfile:
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

    deployments = _deployments(doc, moe)

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
        deployments=deployments,
        training_precision=doc.text("training_precision", default="bf16", choices=("bf16", "fp8")),
    )


def _deployments(doc: Doc, moe: MoESpec | None) -> tuple[Deployment, ...]:
    """``deployments: {prefill: {num_gpus, num_nodes, num_redundant_experts, source}, decode: ...}`` (MoE only):
    GPUs a multiple of nodes, slots (routed + redundant experts) a multiple of GPUs."""
    section = doc.optional_section("deployments")
    if section is None:
        return ()
    if moe is None:
        doc.fail("a dense model has no expert-parallel deployment: remove it, or add a moe section", "deployments")
        return ()
    out = []
    for kind in [str(k) for k in section.data]:
        if kind not in DEPLOYMENT_KINDS:
            continue  # reported by finish() as an unknown key
        dep = section.section(kind)
        gpus = dep.integer("num_gpus", 1)
        nodes = dep.integer("num_nodes", 1)
        redundant = dep.integer("num_redundant_experts", 0)
        source = dep.text("source", default="")
        if dep.valid("num_gpus", "num_nodes") and gpus % nodes:
            dep.fail(f"num_gpus {gpus} is not a multiple of num_nodes {nodes} (equal GPUs per node)", "num_gpus")
        slots = moe.num_routed_experts + redundant
        if dep.valid("num_gpus", "num_redundant_experts") and slots % gpus:
            dep.fail(f"{moe.num_routed_experts} routed + {redundant} redundant = {slots} slots do not split evenly "
                     f"over num_gpus {gpus}", "num_redundant_experts")
        dep.finish()
        out.append(Deployment(kind, gpus, nodes, redundant, source))
    for kind in DEPLOYMENT_KINDS:
        section.used.add(kind)
    section.finish()
    return tuple(out)


def _build_node(doc: Doc, name: str) -> NodeProfile:
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
        hbm_bytes_per_s=gpu.rate_bits("hbm_bandwidth") / 8 if "hbm_bandwidth" in gpu.data else 0.0,
        num_sms=gpu.integer("sms", 0, default=0, maximum=100_000),
        num_comm_sms=gpu.integer("comm_sms", 0, default=0, maximum=100_000),
        achieved=_achieved(gpu),
    )
    if gpu.valid("sms", "comm_sms") and profile.num_comm_sms and profile.num_comm_sms >= profile.num_sms:
        gpu.fail(f"comm_sms {profile.num_comm_sms} must be below sms {profile.num_sms} (the rest compute)",
                 "comm_sms")
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


def _achieved(gpu: Doc) -> AchievedCompute:
    """``gpu: achieved:`` fractions of peak per op class, each in (0, 1]; absent keys keep the defaults."""
    section = gpu.optional_section("achieved")
    defaults = AchievedCompute()
    if section is None:
        return defaults
    values = {}
    for key in AchievedCompute.__dataclass_fields__:
        value = section.number(key, 0.0, default=getattr(defaults, key))
        if section.valid(key) and not 0.0 < value <= 1.0:
            section.fail(f"expected a fraction of peak in (0, 1], got {value:g}", key)
            value = getattr(defaults, key)
        values[key] = value
    section.finish()
    return AchievedCompute(**values)


def _build_switch(doc: Doc, name: str) -> SwitchProfile:
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


def _build_storage(doc: Doc, name: str) -> StorageProfile:
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


BUILDERS: dict[ProfileKind, Callable[[Doc, str], Profile]] = {
    ProfileKind.MODEL: _build_model,
    ProfileKind.NODE: _build_node,
    ProfileKind.SWITCH: _build_switch,
    ProfileKind.STORAGE: _build_storage,
}
