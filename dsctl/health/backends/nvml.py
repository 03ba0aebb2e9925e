"""The NVML adapter: the only module that imports ``pynvml`` (NVIDIA's ``nvidia-ml-py``), and only lazily.

``NvmlBackend(nvml=module)`` takes the NVML module as an argument: the real ``pynvml`` on a GPU node, or the
strict data-fed fake of :mod:`dsctl.health.backends.fake` in CI. Every NVMLError becomes an
:class:`~dsctl.health.model.Unavailable` value (unsupported / no_permission / gpu_lost / library_missing / error);
only a missing library at init raises (:class:`LibraryMissing`, exit 3).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from dsctl.health.backends.base import LibraryMissing, NvmlNoPermission
from dsctl.health.model import (
    NVLINK_COUNTERS,
    Ecc,
    Gpu,
    GpuFabricInfo,
    NvLink,
    Pcie,
    Power,
    Reading,
    RemappedRows,
    RetiredPages,
    Thermal,
    Unavailable,
    ok,
)

ERROR_NAMES = (
    "UNINITIALIZED", "INVALID_ARGUMENT", "NOT_SUPPORTED", "NO_PERMISSION", "ALREADY_INITIALIZED", "NOT_FOUND",
    "INSUFFICIENT_SIZE", "INSUFFICIENT_POWER", "DRIVER_NOT_LOADED", "TIMEOUT", "IRQ_ISSUE", "LIBRARY_NOT_FOUND",
    "FUNCTION_NOT_FOUND", "CORRUPTED_INFOROM", "GPU_IS_LOST", "RESET_REQUIRED", "OPERATING_SYSTEM",
    "LIB_RM_VERSION_MISMATCH", "IN_USE", "MEMORY", "NO_DATA", "NOT_READY", "GPU_NOT_FOUND", "INVALID_STATE",
    "UNKNOWN",
)
#: our small error set (reference sheet section 4.2)
KIND_BY_ERROR = {
    "NOT_SUPPORTED": "unsupported", "FUNCTION_NOT_FOUND": "unsupported", "INVALID_ARGUMENT": "unsupported",
    "NO_PERMISSION": "no_permission",
    "GPU_IS_LOST": "gpu_lost", "UNKNOWN": "gpu_lost", "RESET_REQUIRED": "gpu_lost",
    "LIBRARY_NOT_FOUND": "library_missing", "DRIVER_NOT_LOADED": "library_missing",
    "LIB_RM_VERSION_MISMATCH": "library_missing",
}
COUNTER_IDS = {"replay": "NVML_NVLINK_ERROR_DL_REPLAY", "recovery": "NVML_NVLINK_ERROR_DL_RECOVERY",
               "crc_flit": "NVML_NVLINK_ERROR_DL_CRC_FLIT", "crc_data": "NVML_NVLINK_ERROR_DL_CRC_DATA"}


def linux_bus_id(domain: int, bus: int, device: int, function: int = 0) -> str:
    """sysfs form ``0000:18:00.0`` built from the integer fields (never by slicing NVML's 8-digit busId)."""
    return f"{domain:04x}:{bus:02x}:{device:02x}.{function:x}"


class NvmlBackend:
    """GpuBackend (see :mod:`dsctl.health.backends.base`) over an NVML module: real ``pynvml`` or the fake."""

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        self._handles: dict[int, Any] = {}
        self._codes = {getattr(nvml, "NVML_ERROR_" + name): name for name in ERROR_NAMES}

    # ---- error translation -------------------------------------------------------------------------------------
    def _unavailable(self, exc: Exception, source: str) -> Unavailable:
        code = self._codes.get(getattr(exc, "value", None), f"CODE_{getattr(exc, 'value', '?')}")
        return Unavailable(KIND_BY_ERROR.get(code, "error"), code, source)

    def _code_unavailable(self, value: int, source: str) -> Unavailable:
        code = self._codes.get(value, f"CODE_{value}")
        return Unavailable(KIND_BY_ERROR.get(code, "error"), code, source)

    def _try(self, name: str, *args: Any, tag: str = "") -> Any:
        """Call ``nvml.<name>(*args)``; an NVMLError becomes Unavailable with source ``name`` (``name:tag``)."""
        fn = getattr(self._nvml, name)
        try:
            return fn(*args)
        except self._nvml.NVMLError as exc:
            return self._unavailable(exc, f"{name}:{tag}" if tag else name)

    # ---- lifecycle ------------------------------------------------------------------------------------------------
    def start(self) -> None:
        try:
            self._nvml.nvmlInit()
        except self._nvml.NVMLError as exc:
            why = self._unavailable(exc, "nvmlInit")
            if why.kind == "no_permission":
                raise NvmlNoPermission(why) from None
            if why.kind == "library_missing":
                raise LibraryMissing(
                    f"NVML is not usable on this machine (nvmlInit: {why.code}): no NVIDIA driver/libnvidia-ml.so.1",
                    hint="run on a GPU node with the NVIDIA driver loaded, or replay a node with --from-record FILE",
                ) from None
            raise LibraryMissing(f"nvmlInit failed: {why.code}",
                                 hint="check the driver (nvidia-smi) and that you may open /dev/nvidia*") from None

    def stop(self) -> None:
        with contextlib.suppress(self._nvml.NVMLError):
            self._nvml.nvmlShutdown()

    def driver_version(self) -> Reading[str]:
        return self._try("nvmlSystemGetDriverVersion")

    def device_count(self) -> Reading[int]:
        return self._try("nvmlDeviceGetCount")

    # ---- one GPU --------------------------------------------------------------------------------------------------
    def _field(self, handle: Any, field_id: int) -> Reading[int]:
        values = self._try("nvmlDeviceGetFieldValues", handle, [field_id], tag=str(field_id))
        if isinstance(values, Unavailable):
            return values
        fv = values[0]
        if fv.nvmlReturn != self._nvml.NVML_SUCCESS:
            return self._code_unavailable(fv.nvmlReturn, f"nvmlDeviceGetFieldValues:{field_id}")
        readers: dict[int, Callable[[Any], Any]] = {
            self._nvml.NVML_VALUE_TYPE_DOUBLE: lambda v: v.dVal,
            self._nvml.NVML_VALUE_TYPE_UNSIGNED_INT: lambda v: v.uiVal,
            self._nvml.NVML_VALUE_TYPE_UNSIGNED_LONG: lambda v: v.ulVal,
            self._nvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: lambda v: v.ullVal,
            self._nvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: lambda v: v.sllVal,
            self._nvml.NVML_VALUE_TYPE_SIGNED_INT: lambda v: v.siVal,
            self._nvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: lambda v: v.usVal,
        }
        read = readers.get(fv.valueType)
        if read is None:
            return Unavailable("error", f"VALUE_TYPE_{fv.valueType}", f"nvmlDeviceGetFieldValues:{field_id}")
        return int(read(fv.value))

    def gpu(self, index: int) -> Gpu:
        nv = self._nvml
        handle = self._try("nvmlDeviceGetHandleByIndex", index)
        if isinstance(handle, Unavailable):
            return Gpu(index=index, lost=handle)
        self._handles[index] = handle
        name = self._try("nvmlDeviceGetName", handle)
        pci = self._try("nvmlDeviceGetPciInfo", handle)
        bus_id: Reading[str] = pci if isinstance(pci, Unavailable) else linux_bus_id(pci.domain, pci.bus, pci.device)
        device_id: Reading[int] = pci if isinstance(pci, Unavailable) else int(pci.pciDeviceId)
        num_links = self._field(handle, nv.NVML_FI_DEV_NVLINK_LINK_COUNT)
        links = tuple(self._link(handle, link) for link in range(num_links if ok(num_links) else 0))  # type: ignore[arg-type]
        replay = self._try("nvmlDeviceGetPcieReplayCounter", handle)
        inforom = self._try("nvmlDeviceValidateInforom", handle)
        return Gpu(
            index=index,
            name=name,
            uuid=self._try("nvmlDeviceGetUUID", handle),
            serial=self._try("nvmlDeviceGetSerial", handle),
            bus_id=bus_id,
            pci_device_id=device_id,
            persistence_mode=self._try("nvmlDeviceGetPersistenceMode", handle),
            num_links=num_links,
            links=links,
            fabric=self._fabric(handle),
            pcie=Pcie(
                gen=self._try("nvmlDeviceGetCurrPcieLinkGeneration", handle),
                max_gen=self._try("nvmlDeviceGetMaxPcieLinkGeneration", handle),
                gpu_max_gen=self._try("nvmlDeviceGetGpuMaxPcieLinkGeneration", handle),
                width=self._try("nvmlDeviceGetCurrPcieLinkWidth", handle),
                max_width=self._try("nvmlDeviceGetMaxPcieLinkWidth", handle),
            ),
            pcie_replay_t0=replay,
            pcie_replay_t1=replay,
            ecc=self._ecc(handle),
            remapped_rows=self._remapped(handle),
            retired_pages=self._retired(handle),
            thermal=Thermal(
                gpu_c=self._try("nvmlDeviceGetTemperatureV", handle, nv.NVML_TEMPERATURE_GPU),
                slowdown_c=self._try("nvmlDeviceGetTemperatureThreshold", handle,
                                     nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, tag="slowdown"),
                shutdown_c=self._try("nvmlDeviceGetTemperatureThreshold", handle,
                                     nv.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, tag="shutdown"),
            ),
            power=Power(
                usage_mw=self._try("nvmlDeviceGetPowerUsage", handle),
                limit_mw=self._try("nvmlDeviceGetEnforcedPowerLimit", handle),
                default_limit_mw=self._try("nvmlDeviceGetPowerManagementDefaultLimit", handle),
            ),
            clocks_event_reasons=self._try("nvmlDeviceGetCurrentClocksEventReasons", handle),
            recovery_action=self._field(handle, nv.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION),
            inforom_valid=inforom if isinstance(inforom, Unavailable) and inforom.code != "CORRUPTED_INFOROM"
            else not isinstance(inforom, Unavailable),
        )

    def _link(self, handle: Any, link: int) -> NvLink:
        nv = self._nvml
        tag = str(link)
        state = self._try("nvmlDeviceGetNvLinkState", handle, link, tag=tag)
        remote = self._try("nvmlDeviceGetNvLinkRemotePciInfo", handle, link, tag=tag)
        errors = self._link_errors(handle, link)
        return NvLink(
            link=link,
            active=state if isinstance(state, Unavailable) else state == nv.NVML_FEATURE_ENABLED,
            version=self._try("nvmlDeviceGetNvLinkVersion", handle, link, tag=tag),
            remote_type=self._try("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link, tag=tag),
            remote_bus_id=remote if isinstance(remote, Unavailable)
            else linux_bus_id(remote.domain, remote.bus, remote.device),
            errors_t0=errors,
            errors_t1=errors,
        )

    def _link_errors(self, handle: Any, link: int) -> Reading[dict[str, int]]:
        out: dict[str, int] = {}
        for key in NVLINK_COUNTERS:
            value = self._try("nvmlDeviceGetNvLinkErrorCounter", handle, link, getattr(self._nvml, COUNTER_IDS[key]),
                              tag=str(link))
            if isinstance(value, Unavailable):
                return value
            out[key] = int(value)
        return out

    def _fabric(self, handle: Any) -> Reading[GpuFabricInfo]:
        info = self._nvml.c_nvmlGpuFabricInfoV_t()
        result = self._try("nvmlDeviceGetGpuFabricInfoV", handle, ctypes.byref(info))
        if isinstance(result, Unavailable):
            return result
        return GpuFabricInfo(state=int(info.state), status=int(info.status), health_mask=int(info.healthMask))

    def _ecc(self, handle: Any) -> Ecc:
        nv = self._nvml
        mode = self._try("nvmlDeviceGetEccMode", handle)
        unc, dram = nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_MEMORY_LOCATION_DRAM
        sram = nv.c_nvmlEccSramErrorStatus_v1_t()
        sram_result = self._try("nvmlDeviceGetSramEccErrorStatus", handle, ctypes.byref(sram))

        def sram_value(value: int) -> Reading[int]:
            return sram_result if isinstance(sram_result, Unavailable) else int(value)

        return Ecc(
            mode_current=mode if isinstance(mode, Unavailable) else int(mode[0]),
            mode_pending=mode if isinstance(mode, Unavailable) else int(mode[1]),
            volatile_dram=self._try("nvmlDeviceGetMemoryErrorCounter", handle, unc, nv.NVML_VOLATILE_ECC, dram,
                                    tag="volatile"),
            aggregate_dram=self._try("nvmlDeviceGetMemoryErrorCounter", handle, unc, nv.NVML_AGGREGATE_ECC, dram,
                                     tag="aggregate"),
            volatile_sram=sram_value(sram.volatileUncParity + sram.volatileUncSecDed),
            aggregate_sram=sram_value(sram.aggregateUncParity + sram.aggregateUncSecDed),
            sram_threshold_exceeded=sram_value(sram.bThresholdExceeded),
        )

    def _remapped(self, handle: Any) -> Reading[RemappedRows]:
        rows = self._try("nvmlDeviceGetRemappedRows", handle)
        if isinstance(rows, Unavailable):
            return rows
        hist = self._try("nvmlDeviceGetRowRemapperHistogram", handle)
        histogram: Reading[dict[str, int]] = hist if isinstance(hist, Unavailable) else {
            "max": int(hist.max), "high": int(hist.high), "partial": int(hist.partial), "low": int(hist.low),
            "none": int(hist.none)}
        corr, unc, pending, failure = (int(v) for v in rows)
        return RemappedRows(corr, unc, pending, failure, histogram)

    def _retired(self, handle: Any) -> Reading[RetiredPages]:
        """Pre-Ampere page retirement; NotSupported on Ampere and newer (they remap rows instead)."""
        nv = self._nvml
        sbe = self._try("nvmlDeviceGetRetiredPages", handle,
                        nv.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, tag="single_bit")
        if isinstance(sbe, Unavailable):
            return sbe
        dbe = self._try("nvmlDeviceGetRetiredPages", handle, nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
                        tag="double_bit")
        if isinstance(dbe, Unavailable):
            return dbe
        pending = self._try("nvmlDeviceGetRetiredPagesPendingStatus", handle)
        return RetiredPages(len(sbe), len(dbe), pending if isinstance(pending, Unavailable) else int(pending))

    # ---- second sample and pairs ----------------------------------------------------------------------------------
    def counters(self, index: int, links: tuple[NvLink, ...]) -> tuple[tuple[NvLink, ...], Reading[int]]:
        handle = self._handles.get(index)
        if handle is None:
            return links, Unavailable("gpu_lost", "GPU_IS_LOST", "nvmlDeviceGetHandleByIndex")
        again = tuple(dataclasses.replace(link, errors_t1=self._link_errors(handle, link.link)) for link in links)
        return again, self._try("nvmlDeviceGetPcieReplayCounter", handle)

    def p2p_nvlink(self, index: int, peer: int) -> Reading[int]:
        a, b = self._handles.get(index), self._handles.get(peer)
        if a is None or b is None:
            return Unavailable("gpu_lost", "GPU_IS_LOST", "nvmlDeviceGetHandleByIndex")
        return self._try("nvmlDeviceGetP2PStatus", a, b, self._nvml.NVML_P2P_CAPS_INDEX_NVLINK,
                         tag=str(peer))


def load_pynvml() -> ModuleType:
    """Import NVIDIA's ``pynvml`` (package ``nvidia-ml-py``); a missing package is a missing environment piece."""
    try:
        import pynvml
    except ImportError:
        raise LibraryMissing("the Python package nvidia-ml-py (module pynvml) is not installed",
                             hint="pip install 'nvidia-ml-py>=12.570.86,<14' (not the deprecated 'pynvml')") from None
    return pynvml


def live_backend() -> NvmlBackend:
    """The adapter over the real NVML library of this machine (not yet started)."""
    return NvmlBackend(nvml=load_pynvml())


def fake_module(data: Mapping[str, Any], source: str = "fixture") -> Any:
    """A strict fake NVML module fed by a fake-node record, using the real pynvml constants, structs and errors."""
    from dsctl.health.backends.fake import FakeNvml

    return FakeNvml(data, lib=load_pynvml(), source=source)


def backend_from_record(data: Mapping[str, Any], source: str = "fixture") -> tuple[NvmlBackend, Any]:
    """The real adapter over a fake NVML module built from ``data``; returns (backend, fake) so callers can advance
    the fake's clock from t0 to t1."""
    fake = fake_module(data, source)
    return NvmlBackend(nvml=fake), fake
