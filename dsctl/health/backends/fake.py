"""A strict, data-fed fake of the ``pynvml`` *module*, so CI runs the real adapter (:class:`NvmlBackend`).

The fake is built from a fake-node record (see :mod:`dsctl.health.record.format`) and the real ``pynvml`` module, passed
in as ``lib`` by :func:`dsctl.health.backends.nvml.fake_module` (only nvml.py imports pynvml). It returns real pynvml
structs (``nvmlPciInfo_t``, ``c_nvmlFieldValue_t`` arrays, the fabric and SRAM structs filled through ``byref``) and
raises the real ``pynvml.NVMLError(code)``.

Strict: a ``nvml*`` name it does not implement raises :class:`FakeNotImplemented`; a name real pynvml lacks raises
AttributeError saying so; a value the record lacks raises InputError naming the file and key. Errors are injected
per GPU with ``errors: {<function>[:<tag>]: <NVML_ERROR name without prefix>}``; ``"*"`` fails every call for that GPU
(a GPU fallen off the bus). Tags: link index (NVLink calls), field id (FieldValues), ``volatile``/``aggregate``
(MemoryErrorCounter), ``slowdown``/``shutdown`` (TemperatureThreshold), peer index (P2PStatus).
"""

# ruff: noqa: N802  (method names are the real pynvml function names)
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsctl.errors import InputError
from dsctl.health.record.format import normalize, per_link


class FakeNotImplemented(NotImplementedError):
    """The fake NVML module was asked for a real pynvml function it does not implement."""


class FakeHandle:
    """An opaque device handle (a plain record, as in ray's mock)."""

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"FakeHandle({self.index})"


COUNTER_KEYS = {0: "replay", 1: "recovery", 2: "crc_flit", 3: "crc_data"}


class FakeNvml:
    """The fake module. ``advance()`` moves its clock from t0 to t1 (counters switch to their ``*_t1`` values)."""

    def __init__(self, data: Mapping[str, Any], lib: Any, source: str = "fixture") -> None:
        self._lib = lib
        self._source = source
        self._node = normalize(data, source)
        self._gpus: list[dict[str, Any]] = self._node["gpus"]
        self._initialised = 0
        self.phase = "t0"
        valid = {n[len("NVML_ERROR_"):] for n in dir(lib) if n.startswith("NVML_ERROR_")}
        init_error = self._node.get("nvml_init_error")
        if init_error is not None and init_error not in valid:
            raise InputError(f"{source}: nvml_init_error: unknown NVML error {init_error!r}",
                             hint="use a name like NO_PERMISSION or DRIVER_NOT_LOADED")
        for gpu in self._gpus:
            for key, code in (gpu.get("errors") or {}).items():
                fn = str(key).split(":", 1)[0]
                if fn != "*" and not hasattr(lib, fn):
                    raise InputError(f"{source}: gpus[{gpu['index']}].errors names {fn}, which pynvml does not have")
                if code not in valid:
                    raise InputError(f"{source}: gpus[{gpu['index']}].errors.{key}: unknown NVML error {code!r}",
                                     hint="use a name like NOT_SUPPORTED, GPU_IS_LOST, NO_PERMISSION, UNKNOWN")

    # ---- strictness -----------------------------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        lib = self.__dict__.get("_lib")
        if lib is None or name.startswith("__"):
            raise AttributeError(name)
        if not hasattr(lib, name):
            raise AttributeError(f"real pynvml has no attribute {name!r} (misspelled or removed NVML API?)")
        if name.startswith(("nvml", "_nvml")):
            raise FakeNotImplemented(f"the fake NVML module does not implement {name}; add it to "
                                     "dsctl/health/backends/fake.py before the adapter may call it")
        return getattr(lib, name)  # constants, structs, NVMLError classes

    @classmethod
    def implemented(cls) -> list[str]:
        """The nvml* functions this fake provides (a test checks each exists in the installed pynvml)."""
        return sorted(n for n in vars(cls) if n.startswith("nvml"))

    def advance(self) -> None:
        """Move to the second sample: counters read their ``t1`` values from now on."""
        self.phase = "t1"

    # ---- helpers --------------------------------------------------------------------------------------------------
    def _raise(self, code_name: str) -> None:
        raise self._lib.NVMLError(getattr(self._lib, "NVML_ERROR_" + code_name))

    def _require_init(self) -> None:
        if not self._initialised:
            self._raise("UNINITIALIZED")

    def _gpu(self, handle: Any, fn: str, tag: str = "") -> dict[str, Any]:
        self._require_init()
        if not isinstance(handle, FakeHandle):
            self._raise("INVALID_ARGUMENT")
        gpu = self._gpus[handle.index]
        errors = gpu.get("errors") or {}
        code = errors.get("*") or (errors.get(f"{fn}:{tag}") if tag else None) or errors.get(fn)
        if code:
            self._raise(code)
        return gpu

    def _value(self, gpu: Mapping[str, Any], path: str, fn: str) -> Any:
        node: Any = gpu
        for part in path.split("."):
            if not isinstance(node, Mapping) or part not in node:
                raise InputError(f"{self._source}: gpus[{gpu['index']}] has no {path} (needed by {fn})",
                                 hint=f"add {path} or declare errors: {{{fn}: NOT_SUPPORTED}}")
            node = node[part]
        return node

    def _link_value(self, gpu: Mapping[str, Any], key: str, link: int, fn: str) -> Any:
        count = self._value(gpu, "nvlink.num_links", fn)
        if link < 0 or link >= count:
            self._raise("INVALID_ARGUMENT")
        return per_link(self._value(gpu, f"nvlink.{key}", fn), link, f"gpus[{gpu['index']}].nvlink.{key}",
                        self._source)

    def _pci_struct(self, bus_id: str) -> Any:
        try:
            domain, bus, rest = bus_id.split(":")
            device, function = rest.split(".")
            values = int(domain, 16), int(bus, 16), int(device, 16), int(function, 16)
        except ValueError:
            raise InputError(f"{self._source}: PCI address {bus_id!r} is not of the form 0000:18:00.0") from None
        pci = self._lib.nvmlPciInfo_t()
        pci.domain, pci.bus, pci.device = values[0], values[1], values[2]
        pci.busId = f"{values[0]:08X}:{values[1]:02X}:{values[2]:02X}.0".encode()
        pci.busIdLegacy = f"{values[0]:04X}:{values[1]:02X}:{values[2]:02X}.0".encode()
        return pci

    # ---- library --------------------------------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        if self._node.get("nvml_init_error"):
            self._raise(self._node["nvml_init_error"])
        self._initialised += 1

    def nvmlShutdown(self) -> None:
        self._require_init()
        self._initialised -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._require_init()
        return str(self._node["driver_version"])

    def nvmlDeviceGetCount(self) -> int:
        self._require_init()
        return int(self._node["device_count"])

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        self._require_init()
        if index < 0 or index >= self._node["device_count"] or index >= len(self._gpus):
            self._raise("INVALID_ARGUMENT")
        errors = self._gpus[index].get("errors") or {}
        code = errors.get("*") or errors.get("nvmlDeviceGetHandleByIndex")
        if code:
            self._raise(code)
        return FakeHandle(index)

    # ---- identity -------------------------------------------------------------------------------------------------
    def nvmlDeviceGetName(self, handle: Any) -> str:
        return str(self._value(self._gpu(handle, "nvmlDeviceGetName"), "name", "nvmlDeviceGetName"))

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        return str(self._value(self._gpu(handle, "nvmlDeviceGetUUID"), "uuid", "nvmlDeviceGetUUID"))

    def nvmlDeviceGetSerial(self, handle: Any) -> str:
        fn = "nvmlDeviceGetSerial"
        gpu = self._gpu(handle, fn)
        if "serial" not in gpu:  # boards without a serial number answer NotSupported
            self._raise("NOT_SUPPORTED")
        return str(gpu["serial"])

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        fn = "nvmlDeviceGetPciInfo"
        gpu = self._gpu(handle, fn)
        pci = self._pci_struct("{:04x}:{:02x}:{:02x}.0".format(self._value(gpu, "pci.domain", fn),
                                                               self._value(gpu, "pci.bus", fn),
                                                               self._value(gpu, "pci.device", fn)))
        pci.pciDeviceId = self._value(gpu, "pci.device_id", fn)
        return pci

    def nvmlDeviceGetPersistenceMode(self, handle: Any) -> int:
        fn = "nvmlDeviceGetPersistenceMode"
        return int(self._value(self._gpu(handle, fn), "persistence_mode", fn))

    def nvmlDeviceGetFieldValues(self, handle: Any, fieldIds: list[Any]) -> Any:
        fn = "nvmlDeviceGetFieldValues"
        gpu = self._gpu(handle, fn)
        lib = self._lib
        values = (lib.c_nvmlFieldValue_t * len(fieldIds))()
        paths = {lib.NVML_FI_DEV_NVLINK_LINK_COUNT: "nvlink.num_links",
                 lib.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: "recovery_action"}
        errors = gpu.get("errors") or {}
        for i, field in enumerate(fieldIds):
            field_id, scope = (field if isinstance(field, tuple) else (field, 0))
            values[i].fieldId, values[i].scopeId = field_id, scope
            code = errors.get(f"{fn}:{field_id}")
            path = paths.get(field_id)
            if code:
                values[i].nvmlReturn = getattr(lib, "NVML_ERROR_" + code)
            elif path is None:
                raise FakeNotImplemented(f"the fake NVML module does not serve field id {field_id}")
            elif path.startswith("nvlink.") and "nvlink" not in gpu:
                values[i].nvmlReturn = lib.NVML_ERROR_NOT_SUPPORTED
            else:
                values[i].nvmlReturn = lib.NVML_SUCCESS
                values[i].valueType = lib.NVML_VALUE_TYPE_UNSIGNED_INT
                values[i].value.uiVal = int(self._value(gpu, path, fn))
        return values

    # ---- NVLink ---------------------------------------------------------------------------------------------------
    def nvmlDeviceGetNvLinkState(self, device: Any, link: int) -> int:
        fn = "nvmlDeviceGetNvLinkState"
        return int(self._link_value(self._gpu(device, fn, str(link)), "state", link, fn))

    def nvmlDeviceGetNvLinkVersion(self, device: Any, link: int) -> int:
        fn = "nvmlDeviceGetNvLinkVersion"
        return int(self._link_value(self._gpu(device, fn, str(link)), "version", link, fn))

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: Any, link: int) -> int:
        fn = "nvmlDeviceGetNvLinkRemoteDeviceType"
        return int(self._link_value(self._gpu(handle, fn, str(link)), "remote_type", link, fn))

    def nvmlDeviceGetNvLinkRemotePciInfo(self, device: Any, link: int) -> Any:
        fn = "nvmlDeviceGetNvLinkRemotePciInfo"
        return self._pci_struct(str(self._link_value(self._gpu(device, fn, str(link)), "remote_bus_id", link, fn)))

    def nvmlDeviceGetNvLinkErrorCounter(self, device: Any, link: int, counter: int) -> int:
        fn = "nvmlDeviceGetNvLinkErrorCounter"
        gpu = self._gpu(device, fn, str(link))
        key = COUNTER_KEYS.get(counter)
        if key is None:
            self._raise("INVALID_ARGUMENT")
        phase = self.phase if f"errors_{self.phase}" in gpu.get("nvlink", {}) else "t0"
        return int(self._link_value(gpu, f"errors_{phase}.{key}", link, fn))

    def nvmlDeviceGetGpuFabricInfoV(self, device: Any, gpuFabricInfo: Any) -> int:
        fn = "nvmlDeviceGetGpuFabricInfoV"
        gpu = self._gpu(device, fn)
        info = gpuFabricInfo._obj
        info.state = self._value(gpu, "fabric.state", fn)
        info.status = self._value(gpu, "fabric.status", fn)
        info.healthMask = self._value(gpu, "fabric.health_mask", fn)
        return int(self._lib.NVML_SUCCESS)

    def nvmlDeviceGetP2PStatus(self, device1: Any, device2: Any, p2pIndex: int) -> int:
        fn = "nvmlDeviceGetP2PStatus"
        gpu = self._gpu(device1, fn, str(getattr(device2, "index", "")))
        self._gpu(device2, fn)
        status = self._value(gpu, "p2p_nvlink", fn)
        if isinstance(status, Mapping):
            status = status.get(device2.index, status.get(str(device2.index), 0))
        return int(status)

    # ---- PCIe -----------------------------------------------------------------------------------------------------
    def _pcie(self, handle: Any, fn: str, key: str) -> int:
        return int(self._value(self._gpu(handle, fn), f"pcie.{key}", fn))

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: Any) -> int:
        return self._pcie(handle, "nvmlDeviceGetCurrPcieLinkGeneration", "gen")

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: Any) -> int:
        return self._pcie(handle, "nvmlDeviceGetMaxPcieLinkGeneration", "max_gen")

    def nvmlDeviceGetGpuMaxPcieLinkGeneration(self, handle: Any) -> int:
        return self._pcie(handle, "nvmlDeviceGetGpuMaxPcieLinkGeneration", "gpu_max_gen")

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: Any) -> int:
        return self._pcie(handle, "nvmlDeviceGetCurrPcieLinkWidth", "width")

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: Any) -> int:
        return self._pcie(handle, "nvmlDeviceGetMaxPcieLinkWidth", "max_width")

    def nvmlDeviceGetPcieReplayCounter(self, handle: Any) -> int:
        fn = "nvmlDeviceGetPcieReplayCounter"
        gpu = self._gpu(handle, fn)
        replay = self._value(gpu, "pcie_replay", fn)
        return int(replay.get(self.phase, replay["t0"]) if isinstance(replay, Mapping) else replay)

    # ---- memory ---------------------------------------------------------------------------------------------------
    def nvmlDeviceGetEccMode(self, handle: Any) -> list[int]:
        fn = "nvmlDeviceGetEccMode"
        mode = self._value(self._gpu(handle, fn), "ecc_mode", fn)
        return [int(mode[0]), int(mode[1])]

    def nvmlDeviceGetMemoryErrorCounter(self, handle: Any, errorType: int, counterType: int, locationType: int) -> int:
        fn = "nvmlDeviceGetMemoryErrorCounter"
        lib = self._lib
        tag = "volatile" if counterType == lib.NVML_VOLATILE_ECC else "aggregate"
        gpu = self._gpu(handle, fn, tag)
        if errorType != lib.NVML_MEMORY_ERROR_TYPE_UNCORRECTED or locationType != lib.NVML_MEMORY_LOCATION_DRAM:
            raise FakeNotImplemented("the fake serves only uncorrected DRAM counters")
        return int(self._value(gpu, f"ecc.{tag}_dram", fn))

    def nvmlDeviceGetSramEccErrorStatus(self, device: Any, status: Any) -> int:
        fn = "nvmlDeviceGetSramEccErrorStatus"
        gpu = self._gpu(device, fn)
        s = status._obj
        s.volatileUncSecDed = self._value(gpu, "ecc.volatile_sram", fn)
        s.aggregateUncSecDed = self._value(gpu, "ecc.aggregate_sram", fn)
        s.bThresholdExceeded = self._value(gpu, "ecc.sram_threshold_exceeded", fn)
        return int(self._lib.NVML_SUCCESS)

    def nvmlDeviceGetRemappedRows(self, device: Any) -> tuple[int, int, int, int]:
        fn = "nvmlDeviceGetRemappedRows"
        gpu = self._gpu(device, fn)
        return tuple(int(self._value(gpu, f"remapped_rows.{k}", fn))  # type: ignore[return-value]
                     for k in ("correctable", "uncorrectable", "pending", "failure"))

    def nvmlDeviceGetRowRemapperHistogram(self, device: Any) -> Any:
        fn = "nvmlDeviceGetRowRemapperHistogram"
        gpu = self._gpu(device, fn)
        hist = self._lib.c_nvmlRowRemapperHistogramValues()
        for key in ("max", "high", "partial", "low", "none"):
            setattr(hist, key, int(self._value(gpu, f"remap_histogram.{key}", fn)))
        return hist

    def nvmlDeviceGetRetiredPages(self, device: Any, sourceFilter: int) -> list[int]:
        fn = "nvmlDeviceGetRetiredPages"
        lib = self._lib
        causes = {lib.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS: "single_bit",
                  lib.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR: "double_bit"}
        if sourceFilter not in causes:
            self._raise("INVALID_ARGUMENT")
        gpu = self._gpu(device, fn, causes[sourceFilter])
        if "retired_pages" not in gpu:  # Ampere and newer remap rows instead: NotSupported
            self._raise("NOT_SUPPORTED")
        count = int(self._value(gpu, f"retired_pages.{causes[sourceFilter]}", fn))
        return [0x1000 * (i + 1) for i in range(min(count, 4096))]  # page addresses; only the count is used

    def nvmlDeviceGetRetiredPagesPendingStatus(self, device: Any) -> int:
        fn = "nvmlDeviceGetRetiredPagesPendingStatus"
        gpu = self._gpu(device, fn)
        if "retired_pages" not in gpu:
            self._raise("NOT_SUPPORTED")
        return int(self._value(gpu, "retired_pages.pending", fn))

    # ---- thermal, power, clocks, inforom --------------------------------------------------------------------------
    def nvmlDeviceGetTemperatureV(self, handle: Any, sensor: int, version: int = 0) -> int:
        fn = "nvmlDeviceGetTemperatureV"
        return int(self._value(self._gpu(handle, fn), "temperature.gpu", fn))

    def nvmlDeviceGetTemperatureThreshold(self, handle: Any, threshold: int) -> int:
        fn = "nvmlDeviceGetTemperatureThreshold"
        lib = self._lib
        names = {lib.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: "slowdown", lib.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN:
                 "shutdown"}
        if threshold not in names:
            raise FakeNotImplemented(f"the fake serves only slowdown/shutdown thresholds, not {threshold}")
        return int(self._value(self._gpu(handle, fn, names[threshold]), f"temperature.{names[threshold]}", fn))

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        fn = "nvmlDeviceGetPowerUsage"
        return int(self._value(self._gpu(handle, fn), "power.usage_mw", fn))

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        fn = "nvmlDeviceGetEnforcedPowerLimit"
        return int(self._value(self._gpu(handle, fn), "power.limit_mw", fn))

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle: Any) -> int:
        fn = "nvmlDeviceGetPowerManagementDefaultLimit"
        return int(self._value(self._gpu(handle, fn), "power.default_limit_mw", fn))

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        fn = "nvmlDeviceGetCurrentClocksEventReasons"
        return int(self._value(self._gpu(handle, fn), "clocks_event_reasons", fn))

    def nvmlDeviceValidateInforom(self, handle: Any) -> None:
        self._gpu(handle, "nvmlDeviceValidateInforom")
        return None
