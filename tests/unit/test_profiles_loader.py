from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsctl.errors import ProfileError
from dsctl.profiles.loader import ProfileStore, builtin_profiles_dir, load_file, validate_path
from dsctl.profiles.schema import ModelProfile, NodeProfile, ProfileKind
from dsctl.units import GIB, QuantityError, parse_bytes, parse_count, parse_rate_bits

EXPECTED = {
    ProfileKind.MODEL: {"deepseek-v3", "deepseek-v2", "deepseek-v2-lite", "qwen2.5-72b", "llama3.1-405b"},
    ProfileKind.NODE: {"h800-hgx", "h100-hgx", "h200-hgx", "b200-hgx"},
    ProfileKind.SWITCH: {"ib-ndr-64"},
    ProfileKind.STORAGE: {"3fs-reference"},
}


def test_every_required_builtin_profile_ships_and_validates() -> None:
    store = ProfileStore()
    for kind, names in EXPECTED.items():
        assert names <= set(store.names(kind))
        for name in store.names(kind):
            assert store.get(kind, name).name == name


def test_deepseek_v3_shapes_match_the_published_config() -> None:
    v3 = ProfileStore().model("deepseek-v3")
    assert (v3.num_layers, v3.num_dense_layers, v3.hidden_size, v3.vocab_size) == (61, 3, 7168, 129280)
    assert v3.dense_intermediate_size == 18432
    att = v3.attention
    assert (att.kind, att.num_heads, att.kv_lora_rank, att.qk_rope_head_dim) == ("mla", 128, 512, 64)
    assert (att.q_lora_rank, att.qk_nope_head_dim, att.v_head_dim) == (1536, 128, 128)
    assert v3.moe is not None
    moe = v3.moe
    assert (moe.num_routed_experts, moe.num_shared_experts, moe.num_experts_per_token) == (256, 1, 8)
    assert (moe.num_expert_groups, moe.num_limited_groups, moe.moe_intermediate_size) == (8, 4, 2048)
    assert v3.num_mtp_modules == 1 and v3.num_moe_layers == 58
    assert (v3.published.total_params, v3.published.active_params) == (671e9, 36.7e9)


def test_node_profiles_carry_the_paper_hardware() -> None:
    store = ProfileStore()
    h800 = store.node("h800-hgx")
    assert (h800.num_gpus, h800.hbm_bytes, h800.num_compute_nics, h800.compute_nic_gbps) == (8, 80 * GIB, 8, 400)
    assert h800.nvlink_bytes_per_s == 400e9 and h800.compute_nic_model == "ConnectX-7"
    assert (h800.num_storage_nics, h800.storage_nic_gbps, h800.storage_link_layer) == (1, 400, "ethernet")
    h100 = store.node("h100-hgx")
    assert (h100.nvlink_bytes_per_s, h100.num_nvlinks_per_gpu) == (900e9, 18)
    assert store.node("h200-hgx").hbm_bytes == 141e9
    switch = store.switch("ib-ndr-64")
    assert (switch.num_ports, switch.port_gbps) == (64, 400)
    storage = store.storage("3fs-reference")
    assert (storage.num_ssds, storage.ssd_capacity_bytes) == (16, 14 * 1024**4)
    assert (storage.num_nics, storage.nic_gbps) == (2, 200)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_user_profiles_override_builtins_of_the_same_name(tmp_path: Path) -> None:
    source = (builtin_profiles_dir() / "nodes" / "h800-hgx.yaml").read_text()
    _write(tmp_path / "nodes" / "h800-hgx.yaml", source.replace("hbm: 80 GiB", "hbm: 96 GiB"))
    store = ProfileStore([tmp_path])
    assert store.node("h800-hgx").hbm_bytes == 96 * GIB
    entry = next(e for e in store.entries(ProfileKind.NODE) if e.name == "h800-hgx")
    assert not entry.builtin


def test_a_flat_user_folder_needs_a_kind_key(tmp_path: Path) -> None:
    source = (builtin_profiles_dir() / "models" / "qwen2.5-72b.yaml").read_text()
    _write(tmp_path / "my-model.yaml", "kind: model\n" + source.replace("name: qwen2.5-72b", "name: my-model"))
    assert isinstance(ProfileStore([tmp_path]).model("my-model"), ModelProfile)


def test_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "nodes" / "bad.yaml", "name: bad\ngpu:\n  count: 8\n  hbm: [80 GiB\n")
    with pytest.raises(ProfileError) as err:
        load_file(path)
    assert "bad.yaml: line 5" in str(err.value) or "bad.yaml: line 4" in str(err.value)
    assert "YAML syntax error" in str(err.value)


def test_wrong_type_names_the_key_path(tmp_path: Path) -> None:
    source = (builtin_profiles_dir() / "models" / "deepseek-v3.yaml").read_text()
    path = _write(tmp_path / "models" / "deepseek-v3.yaml", source.replace("num_heads: 128", "num_heads: many"))
    expected = r"deepseek-v3.yaml: attention.num_heads: expected an integer >= 1, got a string"
    with pytest.raises(ProfileError, match=expected):
        load_file(path)


def test_missing_unit_and_unknown_key_are_reported(tmp_path: Path) -> None:
    source = (builtin_profiles_dir() / "nodes" / "h100-hgx.yaml").read_text()
    path = _write(tmp_path / "nodes" / "h100-hgx.yaml", source.replace("hbm: 80 GiB", "hbm: 80"))
    with pytest.raises(ProfileError, match=r"gpu.hbm: 80 has no unit"):
        load_file(path)
    path.write_text(source.replace("links_per_gpu: 18", "link_per_gpu: 18"))
    with pytest.raises(ProfileError) as err:
        load_file(path)
    assert "nvlink.links_per_gpu: required key is missing" in str(err.value)
    assert "'link_per_gpu': did you mean 'links_per_gpu'" in (err.value.hint or "")
    path.write_text(source.replace("links_per_gpu: 18", "links_per_gpu: 18\n  lanes: 4"))
    with pytest.raises(ProfileError, match=r"nvlink.lanes: unknown key"):
        load_file(path)


def test_ranges_are_checked(tmp_path: Path) -> None:
    source = (builtin_profiles_dir() / "switches" / "ib-ndr-64.yaml").read_text()
    odd = source.replace("name: ib-ndr-64", "name: odd").replace("ports: 64", "ports: 63")
    path = _write(tmp_path / "switches" / "odd.yaml", odd)
    with pytest.raises(ProfileError, match="even port count"):
        load_file(path)


def test_unknown_profile_lists_the_available_names() -> None:
    with pytest.raises(ProfileError) as err:
        ProfileStore().model("deepseek-v4")
    assert "deepseek-v3" in str(err.value) and "llama3.1-405b" in str(err.value)
    assert "did you mean 'deepseek-v3'" in (err.value.hint or "")


def test_validate_a_whole_folder() -> None:
    names = {p.name for p in validate_path(builtin_profiles_dir())}
    assert set().union(*EXPECTED.values()) <= names


def test_missing_profiles_dir_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="does not exist"):
        ProfileStore([tmp_path / "nope"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [("80 GiB", 80 * 1024**3), ("141 GB", 141 * 10**9), ("14 TiB", 14 * 1024**4), ("512 B", 512), ("1.5 KiB", 1536)],
)
def test_parse_bytes(text: str, expected: int) -> None:
    assert parse_bytes(text) == expected


@pytest.mark.parametrize(("text", "bits"), [("400 Gb/s", 400e9), ("900 GB/s", 7200e9), ("200 Gbit/s", 200e9)])
def test_parse_rate(text: str, bits: float) -> None:
    assert parse_rate_bits(text) == bits


@pytest.mark.parametrize(("text", "value"), [("14.8T", 14.8e12), ("180K", 180e3), ("37B", 37e9), ("2048", 2048.0)])
def test_parse_count(text: str, value: float) -> None:
    assert parse_count(text) == pytest.approx(value)


@given(st.text(max_size=12))
def test_quantity_parsers_never_raise_anything_but_quantity_error(text: str) -> None:
    for parser in (parse_bytes, parse_rate_bits, parse_count):
        with contextlib.suppress(QuantityError):
            parser(text)


@given(st.integers(min_value=1, max_value=10**6), st.sampled_from(["B", "KiB", "MiB", "GiB", "TiB", "KB", "GB"]))
def test_parse_bytes_round_trips_integers(value: int, unit: str) -> None:
    factor = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4, "KB": 1000, "GB": 10**9}[unit]
    assert parse_bytes(f"{value} {unit}") == value * factor


def test_node_profile_type() -> None:
    assert isinstance(ProfileStore().get(ProfileKind.NODE, "h800-hgx"), NodeProfile)


def test_a_name_of_another_kind_is_named() -> None:
    expected = "'h800-hgx' is a node profile, not a switch profile; switch profiles: ib-ndr-128-split, ib-ndr-64"
    with pytest.raises(ProfileError, match=expected):
        ProfileStore().switch("h800-hgx")
    assert ProfileStore().kind_of("ib-ndr-64") is ProfileKind.SWITCH and ProfileStore().kind_of("nope") is None


def test_upper_bounds_and_nic_pairing(tmp_path: Path) -> None:
    source = (builtin_profiles_dir() / "nodes" / "h800-hgx.yaml").read_text()
    path = _write(tmp_path / "nodes" / "h800-hgx.yaml", source.replace("hbm: 80 GiB", "hbm: 1e30 GiB"))
    with pytest.raises(ProfileError, match=r"gpu.hbm: expected a size > 0 and <= 1.0 PiB"):
        load_file(path)
    path.write_text(source.replace("count: 8\n  hbm", "count: 6\n  hbm"))
    with pytest.raises(ProfileError, match=r"compute_nics\.count: 8 compute NICs do not pair with 6 GPUs"):
        load_file(path)
    path.write_text(source.replace("bf16_dense_tflops: 989", "bf16_dense_tflops: .inf"))
    with pytest.raises(ProfileError, match="expected a finite number"):
        load_file(path)


def test_check_file_reports_every_key_without_knock_on_errors(tmp_path: Path) -> None:
    from dsctl.profiles.loader import check_file

    text = (builtin_profiles_dir() / "models" / "qwen2.5-72b.yaml").read_text().replace("name: qwen2.5-72b", "")
    bad = tmp_path / "models" / "m.yaml"
    bad.parent.mkdir()
    bad.write_text(text.replace("num_heads: 64", "num_heads: -64").replace("num_layers: 80", "num_layers: many")
                   + "extra: 1\n")
    profile, errors = check_file(bad)
    assert profile is None
    assert [e.message.split(": ", 1)[1] for e in errors] == [
        "attention.num_heads: expected an integer from 1 to 10,000,000, got -64",
        "num_layers: expected an integer >= 1, got a string ('many')",
        "extra: unknown key",
    ]
    with pytest.raises(ProfileError, match=r"attention\.num_heads"):
        load_file(bad)
    bad.write_text(text.replace("kind: gqa", "kind: mqa"))
    assert [e.message.split(": ", 1)[1] for e in check_file(bad)[1]] == [
        "attention.kind: 'mqa' is not valid; expected mla, gqa or mha"]
    bad.write_text("attention: 3\nnum_layers: 2\n")
    assert [e.message.split(": ", 1)[1] for e in check_file(bad)[1]] == [
        "attention: expected a mapping of keys to values, got a number (3)",
        "hidden_size: required key is missing", "vocab_size: required key is missing",
        "dense_intermediate_size: required key is missing"]
    assert check_file(builtin_profiles_dir() / "models" / "deepseek-v3.yaml")[1] == []


_NODE_LEAVES = ["description", "gpu.model", "gpu.count", "gpu.hbm", "gpu.bf16_dense_tflops", "gpu.fp8_dense_tflops",
                "nvlink.bandwidth", "nvlink.links_per_gpu", "compute_nics.count", "compute_nics.model",
                "compute_nics.rate", "compute_nics.link_layer", "storage_nics.count", "storage_nics.rate",
                "storage_nics.link_layer"]


@given(broken=st.sets(st.sampled_from(_NODE_LEAVES), min_size=1), unknown=st.booleans())
def test_every_broken_key_is_reported_once(broken: set[str], unknown: bool) -> None:
    import json
    import tempfile

    from dsctl.profiles.loader import check_file

    data = {"name": "n", "description": "d",
            "gpu": {"model": "G", "count": 8, "hbm": "80 GiB", "bf16_dense_tflops": 989, "fp8_dense_tflops": 1979},
            "nvlink": {"bandwidth": "400 GB/s", "links_per_gpu": 8},
            "compute_nics": {"count": 8, "model": "CX7", "rate": "400 Gb/s", "link_layer": "infiniband"},
            "storage_nics": {"count": 1, "rate": "400 Gb/s", "link_layer": "ethernet"}}
    for leaf in broken:
        section, _, key = leaf.rpartition(".")
        (data[section] if section else data)[key] = [1]  # type: ignore[index]
    if unknown:
        data["nvlink"]["lanes"] = 3  # type: ignore[index]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "nodes" / "n.yaml"
        path.parent.mkdir()
        path.write_text(json.dumps(data))  # JSON is YAML
        profile, errors = check_file(path)
    reported = [e.message.split(": ")[1] for e in errors]
    assert profile is None
    assert sorted(reported) == sorted(broken | ({"nvlink.lanes"} if unknown else set()))


def test_a_list_or_null_where_a_quantity_belongs_is_bad_input(tmp_path: Path) -> None:
    text = (builtin_profiles_dir() / "nodes" / "h800-hgx.yaml").read_text().replace("name: h800-hgx", "name: n")
    path = tmp_path / "nodes" / "n.yaml"
    path.parent.mkdir()
    for value, described in (("[1]", "a list"), ("", r"nothing \(null\)")):
        path.write_text(text.replace("hbm: 80 GiB", f"hbm: {value}"))
        with pytest.raises(ProfileError, match=rf"gpu\.hbm: expected a quantity like '80 GiB', got {described}"):
            load_file(path)
    model = (builtin_profiles_dir() / "models" / "deepseek-v3.yaml").read_text().replace("name: deepseek-v3", "")
    path = tmp_path / "models" / "m.yaml"
    path.parent.mkdir()
    path.write_text(model.replace("total_params: 671B", "total_params: [671]"))
    with pytest.raises(ProfileError, match=r"published\.total_params: expected a count like 671B"):
        load_file(path)


def test_deepseek_v3_deployments_come_from_the_profile(tmp_path: Path) -> None:
    from dsctl.profiles.loader import check_file

    v3 = ProfileStore().model("deepseek-v3")
    got = {d.kind: (d.num_gpus, d.num_nodes, d.num_redundant_experts) for d in v3.deployments}
    assert got == {"prefill": (32, 4, 32), "decode": (320, 40, 64)}
    prefill = v3.deployment("prefill")
    assert prefill is not None and prefill.source == "DeepSeek-V3 tech report (arXiv 2412.19437) section 3.4.1"
    assert ProfileStore().model("qwen2.5-72b").deployments == () and v3.deployment("train") is None
    source = (builtin_profiles_dir() / "models" / "deepseek-v3.yaml").read_text()
    bad = tmp_path / "models" / "deepseek-v3.yaml"
    bad.parent.mkdir()
    cases = {
        "num_nodes: 4": ("num_nodes: 5", "deployments.prefill.num_gpus: num_gpus 32 is not a multiple of num_nodes 5"),
        "num_redundant_experts: 32": ("num_redundant_experts: 30", "deployments.prefill.num_redundant_experts: 256 "
                                      "routed + 30 redundant = 286 slots do not split evenly over num_gpus 32"),
        "  decode:": ("  train:", "deployments.train: unknown key"),
        "num_gpus: 320": ("num_gpus: 0", "deployments.decode.num_gpus: expected an integer from 1"),
    }
    for old, (new, message) in cases.items():
        bad.write_text(source.replace(old, new, 1))
        errors = [e.message.split(": ", 1)[1] for e in check_file(bad)[1]]
        assert len(errors) == 1 and errors[0].startswith(message), errors
    dense = (builtin_profiles_dir() / "models" / "qwen2.5-72b.yaml").read_text()
    bad = tmp_path / "models" / "qwen2.5-72b.yaml"
    bad.write_text(dense + "deployments:\n  prefill: {num_gpus: 8, num_nodes: 1, num_redundant_experts: 0}\n")
    assert [e.message.split(": ", 1)[1] for e in check_file(bad)[1]] == [
        "deployments: a dense model has no expert-parallel deployment: remove it, or add a moe section"]


def test_node_profiles_carry_the_calibrated_fabric() -> None:
    """The paper's ~160 of 200 GB/s NVLink per direction on H800; RDMA payload at 88% of a CX7's line rate."""
    store = ProfileStore()
    h800 = store.node("h800-hgx")
    assert (h800.nic_efficiency, h800.nvlink_achievable_bytes_per_s) == (0.88, 160e9)
    for name in ("h100-hgx", "h200-hgx"):
        node = store.node(name)
        assert (node.nic_efficiency, node.nvlink_achievable_bytes_per_s) == (0.88, 360e9)
        assert node.nvlink_achievable_bytes_per_s < node.nvlink_bytes_per_s / 2


@pytest.mark.parametrize(("old", "new", "needle"), [
    ("efficiency: 0.88", "efficiency: 1.5", r"compute_nics.efficiency: expected a fraction of the line rate"),
    ("efficiency: 0.88", "efficiency: 0", r"compute_nics.efficiency: expected a fraction"),
    ("efficiency: 0.88", "efficiency: high", r"compute_nics.efficiency: expected a number"),
    ("achievable_per_direction: 160 GB/s", "achievable_per_direction: 250 GB/s",
     r"nvlink.achievable_per_direction: 250 GB/s per direction exceeds half of the bandwidth \(200 GB/s"),
    ("achievable_per_direction: 160 GB/s", "achievable_per_direction: 0 GB/s",
     r"nvlink.achievable_per_direction: expected a rate > 0"),
])
def test_calibration_fields_are_range_checked(tmp_path: Path, old: str, new: str, needle: str) -> None:
    source = (builtin_profiles_dir() / "nodes" / "h800-hgx.yaml").read_text()
    assert old in source
    path = _write(tmp_path / "nodes" / "h800-hgx.yaml", source.replace(old, new))
    with pytest.raises(ProfileError, match=needle):
        load_file(path)


def test_absent_calibration_means_the_uncalibrated_peak(tmp_path: Path) -> None:
    source = (builtin_profiles_dir() / "nodes" / "h800-hgx.yaml").read_text()
    lines = [line for line in source.splitlines()
             if "achievable_per_direction" not in line and "efficiency" not in line and "EP32/EP64" not in line]
    node = load_file(_write(tmp_path / "nodes" / "h800-hgx.yaml", "\n".join(lines) + "\n"))
    assert isinstance(node, NodeProfile)
    assert (node.nic_efficiency, node.nvlink_achievable_bytes_per_s) == (1.0, 200e9)
