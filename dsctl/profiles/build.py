"""Build profile dataclasses from parsed YAML: every key checked, every problem one ProfileError naming the file
and key path (``loader.py`` finds and parses the files; this module turns one parsed document into a profile).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from dsctl.profiles.doc import Doc
from dsctl.profiles.schema import (
    ACTIVATION_RECIPES,
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
        activation_recipe=doc.text("activation_recipe", default="selective", choices=ACTIVATION_RECIPES),
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
        nic_efficiency=nics.number("efficiency", 0.0, default=1.0),
        nvlink_achievable_bytes_per_s=(nvlink.optional_rate_bits("achievable_per_direction") or 0.0) / 8,
        hbm_bytes_per_s=gpu.rate_bits("hbm_bandwidth") / 8 if "hbm_bandwidth" in gpu.data else 0.0,
        num_sms=gpu.integer("sms", 0, default=0, maximum=100_000),
        num_comm_sms=gpu.integer("comm_sms", 0, default=0, maximum=100_000),
        achieved=_achieved(gpu),
        hbm_usable_bytes=gpu.size_bytes("hbm_usable") if "hbm_usable" in gpu.data else 0,
    )
    if gpu.valid("hbm", "hbm_usable") and profile.hbm_usable_bytes > profile.hbm_bytes:
        gpu.fail(f"hbm_usable {profile.hbm_usable_bytes:,} B exceeds hbm {profile.hbm_bytes:,} B", "hbm_usable",
                 hint="hbm_usable is the part of hbm a program can allocate (nvidia-smi's total)")
    if gpu.valid("sms", "comm_sms") and profile.num_comm_sms and profile.num_comm_sms >= profile.num_sms:
        gpu.fail(f"comm_sms {profile.num_comm_sms} must be below sms {profile.num_sms} (the rest compute)",
                 "comm_sms")
    for section in (gpu, nvlink, nics, storage):
        section.finish()
    if nics.valid("efficiency") and not 0 < profile.nic_efficiency <= 1:
        nics.fail(f"expected a fraction of the line rate, 0 < efficiency <= 1, got {profile.nic_efficiency:g}",
                  "efficiency", hint="e.g. 0.88: DeepEP's RDMA payload reaches ~88% of a 400 Gb/s CX7")
    half = profile.nvlink_bytes_per_s / 2
    if nvlink.valid("achievable_per_direction", "bandwidth") and profile.nvlink_achievable_bytes_per_s > half:
        nvlink.fail(f"{profile.nvlink_achievable_bytes_per_s / 1e9:g} GB/s per direction exceeds half of the "
                    f"bandwidth ({half / 1e9:g} GB/s per direction)", "achievable_per_direction",
                    hint="bandwidth counts both directions; achievable_per_direction one")
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
