"""The strict fake NVML module and the real adapter over it: API names match the installed pynvml, unknown calls
and keys fail loudly, NVMLError codes become dsctl's small set of Unavailable kinds."""

from __future__ import annotations

import copy
import ctypes
import re
from pathlib import Path
from typing import Any

import pynvml
import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.health.backends.base import LibraryMissing
from dsctl.health.backends.fake import FakeNotImplemented, FakeNvml
from dsctl.health.backends.nvml import NvmlBackend, backend_from_record, fake_module, linux_bus_id
from dsctl.health.model import Unavailable

DATA = Path(__file__).resolve().parents[1] / "data" / "health"


def record(name: str = "hgx_h100_healthy") -> dict[str, Any]:
    data = yaml.safe_load((DATA / f"{name}.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def started(data: dict[str, Any]) -> Any:
    fake = fake_module(data, "test.yaml")
    fake.nvmlInit()
    return fake


def test_every_function_the_fake_implements_exists_in_installed_pynvml() -> None:
    names = FakeNvml.implemented()
    assert len(names) >= 30
    missing = [n for n in names if not hasattr(pynvml, n)]
    assert missing == []


def test_a_misspelled_nvml_call_fails_loudly() -> None:
    fake = started(record())
    with pytest.raises(AttributeError, match="real pynvml has no attribute 'nvmlDeviceGetNvLinkRemotePciInfo_v2'"):
        fake.nvmlDeviceGetNvLinkRemotePciInfo_v2  # noqa: B018
    assert not hasattr(pynvml, "nvmlDeviceGetNvLinkRemotePciInfo_v2")


def test_a_real_but_unimplemented_function_raises_instead_of_returning_a_mock() -> None:
    fake = started(record())
    with pytest.raises(FakeNotImplemented, match="nvmlDeviceGetMemoryInfo"):
        fake.nvmlDeviceGetMemoryInfo  # noqa: B018


def test_constants_structs_and_errors_are_the_real_pynvml_ones() -> None:
    fake = started(record())
    assert fake.NVML_ERROR_NOT_SUPPORTED == pynvml.NVML_ERROR_NOT_SUPPORTED == 3
    assert fake.NVMLError is pynvml.NVMLError
    pci = fake.nvmlDeviceGetPciInfo(fake.nvmlDeviceGetHandleByIndex(0))
    assert isinstance(pci, pynvml.nvmlPciInfo_t)
    assert (pci.domain, pci.bus, pci.device, pci.pciDeviceId) == (0, 0x18, 0, 0x233010DE)
    values = fake.nvmlDeviceGetFieldValues(fake.nvmlDeviceGetHandleByIndex(0), [pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT])
    assert isinstance(values[0], pynvml.c_nvmlFieldValue_t) and values[0].value.uiVal == 18


def test_calls_before_init_raise_uninitialized() -> None:
    fake = fake_module(record(), "test.yaml")
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlDeviceGetCount()


def test_injected_error_raises_the_real_error_subclass() -> None:
    data = record()
    data["gpus"][2]["errors"] = {"nvmlDeviceGetPowerUsage": "NOT_SUPPORTED", "nvmlDeviceGetNvLinkState:4": "UNKNOWN"}
    fake = started(data)
    handle = fake.nvmlDeviceGetHandleByIndex(2)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        fake.nvmlDeviceGetPowerUsage(handle)
    with pytest.raises(pynvml.NVMLError_Unknown):
        fake.nvmlDeviceGetNvLinkState(handle, 4)
    assert fake.nvmlDeviceGetNvLinkState(handle, 3) == pynvml.NVML_FEATURE_ENABLED
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        fake.nvmlDeviceGetNvLinkState(handle, 18)  # past LINK_COUNT


def test_unknown_fixture_key_names_the_file_and_key_path() -> None:
    data = record()
    data["gpus"][1]["pcie"] = {"widht": 8}
    with pytest.raises(InputError, match=r"test\.yaml: unknown key gpus\[1\]\.pcie\.widht"):
        fake_module(data, "test.yaml")
    data = record()
    data["nvlnk"] = {}
    with pytest.raises(InputError, match=r"test\.yaml: unknown key nvlnk"):
        fake_module(data, "test.yaml")


def test_unknown_error_code_or_function_in_errors_is_rejected() -> None:
    data = record()
    data["gpus"][0]["errors"] = {"nvmlDeviceGetPowerUsage": "NOT_SUPORTED"}
    with pytest.raises(InputError, match="unknown NVML error 'NOT_SUPORTED'"):
        fake_module(data, "t.yaml")
    data["gpus"][0]["errors"] = {"nvmlDeviceGetPowerUsageV9": "NOT_SUPPORTED"}
    with pytest.raises(InputError, match="pynvml does not have"):
        fake_module(data, "t.yaml")


def test_missing_value_without_declared_error_is_a_clear_error() -> None:
    data = record()
    del data["gpu_defaults"]["power"]
    backend, _ = backend_from_record(data, "t.yaml")
    backend.start()
    with pytest.raises(InputError, match=r"gpus\[0\] has no power.usage_mw \(needed by nvmlDeviceGetPowerUsage\)"):
        backend.gpu(0)


def test_adapter_translates_errors_into_unavailable_kinds() -> None:
    data = record()
    data["gpus"][1]["errors"] = {"nvmlDeviceGetGpuFabricInfoV": "NOT_SUPPORTED",
                                 "nvmlDeviceGetPersistenceMode": "NO_PERMISSION",
                                 "nvmlDeviceGetFieldValues:230": "NOT_SUPPORTED",
                                 "nvmlDeviceGetCurrentClocksEventReasons": "FUNCTION_NOT_FOUND"}
    data["gpus"][3]["errors"] = {"nvmlDeviceGetHandleByIndex": "UNKNOWN"}
    backend, _ = backend_from_record(data, "t.yaml")
    backend.start()
    gpu = backend.gpu(1)
    assert gpu.fabric == Unavailable("unsupported", "NOT_SUPPORTED", "nvmlDeviceGetGpuFabricInfoV")
    assert gpu.persistence_mode == Unavailable("no_permission", "NO_PERMISSION", "nvmlDeviceGetPersistenceMode")
    assert gpu.recovery_action == Unavailable("unsupported", "NOT_SUPPORTED", "nvmlDeviceGetFieldValues:230")
    assert isinstance(gpu.clocks_event_reasons, Unavailable) and gpu.clocks_event_reasons.kind == "unsupported"
    assert gpu.bus_id == "0000:2a:00.0" and gpu.num_links == 18 and len(gpu.links) == 18
    lost = backend.gpu(3)
    assert lost.lost == Unavailable("gpu_lost", "UNKNOWN", "nvmlDeviceGetHandleByIndex")


def test_inforom_corruption_is_a_value() -> None:
    data = record()
    data["gpus"][0]["errors"] = {"nvmlDeviceValidateInforom": "CORRUPTED_INFOROM"}
    backend, _ = backend_from_record(data, "t.yaml")
    backend.start()
    assert backend.gpu(0).inforom_valid is False
    assert backend.gpu(1).inforom_valid is True


class _NoLibrary:
    """A stand-in module whose nvmlInit fails the way pynvml does on a machine without the driver."""

    NVMLError = pynvml.NVMLError

    def __getattr__(self, name: str) -> Any:
        return getattr(pynvml, name)

    def nvmlInit(self) -> None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)


def test_missing_library_raises_environment_missing_exit_3() -> None:
    with pytest.raises(LibraryMissing, match="LIBRARY_NOT_FOUND") as info:
        NvmlBackend(nvml=_NoLibrary()).start()
    assert info.value.exit_code == 3


def test_linux_bus_id_is_built_from_integer_fields() -> None:
    assert linux_bus_id(0, 0x18, 0) == "0000:18:00.0"
    assert linux_bus_id(0x10000, 0xAB, 0x1F, 1) == "10000:ab:1f.1"


def test_fabric_struct_filled_through_byref() -> None:
    fake = started(record())
    info = pynvml.c_nvmlGpuFabricInfoV_t()
    fake.nvmlDeviceGetGpuFabricInfoV(fake.nvmlDeviceGetHandleByIndex(0), ctypes.byref(info))
    assert (info.state, info.status) == (pynvml.NVML_GPU_FABRIC_STATE_COMPLETED, 0)


def test_fixture_records_are_not_mutated_by_the_fake() -> None:
    data = record()
    before = copy.deepcopy(data)
    fake = started(data)
    fake.nvmlDeviceGetName(fake.nvmlDeviceGetHandleByIndex(0))
    assert data == before


def _nvml_usable() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


@pytest.mark.gpu
@pytest.mark.skipif(not _nvml_usable(), reason="needs a real NVIDIA driver (nvmlInit fails here)")
def test_live_adapter_reads_a_real_gpu() -> None:
    backend = NvmlBackend(nvml=pynvml)
    backend.start()
    try:
        count = backend.device_count()
        assert isinstance(count, int) and count >= 1
        gpu = backend.gpu(0)
        assert gpu.lost is None and isinstance(gpu.name, str) and gpu.name.startswith("NVIDIA")
        assert isinstance(gpu.bus_id, str) and gpu.bus_id.count(":") == 2
    finally:
        backend.stop()


def test_the_deprecated_pynvml_distribution_is_not_installed() -> None:
    """PyPI `pynvml` 13.x installs an import hook that warns on `import pynvml` (breaks -W error runs)."""
    import importlib.metadata

    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.distribution("pynvml")


def test_unsupported_nvlink_counters_are_a_skip_not_a_pass() -> None:
    from dsctl.health import api
    from dsctl.health.expectations import expectations_for, find_sku
    from dsctl.health.sample import sample_node

    data = record()
    data["gpu_defaults"]["errors"] = {"nvmlDeviceGetNvLinkErrorCounter": "NOT_SUPPORTED"}
    backend, fake = backend_from_record(data, "t.yaml")
    snap = sample_node(backend, None, 10.0, lambda _: fake.advance())
    report = api.run_checks(snap, expectations_for(None, find_sku("NVIDIA H100 80GB HBM3", None)),
                            areas=("nvlink",))
    g8 = [f for f in report.findings if f.check == "G8"]
    assert [(f.severity.value, f.subject) for f in g8] == [("SKIP", ", ".join(f"gpu{i}" for i in range(8)))]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["gpu_defaults", "gpu_defaults.pcie", "gpu_defaults.nvlink", "gpu_defaults.fabric"]),
       st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=3, max_size=12))
def test_any_unknown_key_is_reported_with_its_path(where: str, key: str) -> None:
    from dsctl.health.record.format import GPU_KEYS, TOP_KEYS, normalize

    node: Any = TOP_KEYS if where == "gpu_defaults" else GPU_KEYS
    parts = where.split(".")
    for part in parts[1:]:
        node = node[part]
    if where == "gpu_defaults":
        node = GPU_KEYS
    assume(key not in node)
    data = record()
    target = data
    for part in parts:
        target = target[part]
    target[key] = 1
    with pytest.raises(InputError, match=re.escape(f"f.yaml: unknown key {where}.{key}")):
        normalize(data, "f.yaml")
