"""Reading ``torch.save`` files without torch: SGLang's expert-distribution recorder dumps (``logical_count``).

Format (torch >= 1.6 "zip" serialization): a zip archive (stored, not compressed) with ``<prefix>/data.pkl`` (a
protocol-2 pickle of the saved object), ``<prefix>/data/<key>`` (raw bytes of each tensor storage) and
``<prefix>/byteorder`` ("little" or "big"). A tensor pickles as ``torch._utils._rebuild_tensor_v2(storage, offset,
size, stride, requires_grad, backward_hooks[, metadata])`` with ``backward_hooks`` an empty
``collections.OrderedDict`` and ``storage`` a persistent id ``("storage", torch.<Type>Storage, key, location,
numel)``.

Pickle is code: a pickle may name any importable callable and call it. This reader unpickles with an allow-list
of exactly the globals above, each mapped to a stand-in of its own (no torch, nothing imported from the pickle);
any other global refuses the file before anything is called. Tensors become numpy arrays (a strided view copied).
SGLang's dump (``ExpertDistributionRecorder`` ``dump_record``): a dict with ``logical_count`` int [steps, layers,
experts] (file ``expert_distribution_recorder_<time>[_<rank>].pt``); ``sglang_logical_count`` sums the steps.
"""

from __future__ import annotations

import io
import pickle
import zipfile
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from dsctl.errors import InputError

#: storage class name -> numpy dtype (little-endian; byteorder applied when reading)
STORAGE_DTYPES = {
    "LongStorage": "i8", "IntStorage": "i4", "ShortStorage": "i2", "CharStorage": "i1", "ByteStorage": "u1",
    "BoolStorage": "?", "DoubleStorage": "f8", "FloatStorage": "f4", "HalfStorage": "f2",
}
#: most bytes all archive members may expand to (the input reader bounds the file; this bounds the members)
MAX_ARCHIVE_BYTES = 2 * 1024**3


@dataclass(frozen=True)
class _StorageType:
    name: str


@dataclass(frozen=True)
class _Storage:
    data: np.ndarray  # 1-D, the storage's elements


def _rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any, *rest: Any) -> np.ndarray:
    """Stand-in for torch._utils._rebuild_tensor_v2: a numpy copy of the strided view."""
    if not isinstance(storage, _Storage) or not isinstance(offset, int):
        raise InputError("torch file: a tensor's storage is not a storage reference")
    if not isinstance(size, tuple) or not isinstance(stride, tuple) or len(size) != len(stride):
        raise InputError("torch file: a tensor's size and stride do not match")
    if not all(isinstance(v, int) and v >= 0 for v in (*size, *stride)):
        raise InputError("torch file: a tensor's size or stride is not a list of non-negative integers")
    data = storage.data
    last = offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True) if n > 0)
    if any(n == 0 for n in size):
        return np.zeros(size, dtype=data.dtype)
    if offset < 0 or last >= data.size:
        raise InputError(f"torch file: a tensor reads past its storage ({last + 1} > {data.size} elements)")
    view = np.lib.stride_tricks.as_strided(data[offset:], shape=size,
                                           strides=tuple(s * data.itemsize for s in stride), writeable=False)
    return np.array(view)


def _ordered_dict(*args: Any) -> OrderedDict[Any, Any]:
    if args:
        raise InputError("torch file: backward hooks are not empty (refused: they would be code)")
    return OrderedDict()


class _RestrictedUnpickler(pickle.Unpickler):
    """Unpickler resolving only the tensor-rebuild globals, to stand-ins; everything else is refused."""

    def __init__(self, data: bytes, storages: dict[str, bytes], byteorder: str, name: str) -> None:
        super().__init__(io.BytesIO(data))
        self._storages, self._byteorder, self._name = storages, byteorder, name

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return _rebuild_tensor
        if module == "collections" and name == "OrderedDict":
            return _ordered_dict
        if module == "torch" and name in STORAGE_DTYPES:
            return _StorageType(name)
        raise InputError(f"{self._name}: refused to load: the pickle names {module}.{name}, which is not a tensor "
                         "rebuild function (a pickle can run any code it names; only tensors are accepted)")

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType) and isinstance(pid[2], str) and isinstance(pid[4], int)):
            raise InputError(f"{self._name}: refused to load: unexpected persistent id in the pickle")
        key = pid[2]
        if key not in self._storages:
            raise InputError(f"{self._name}: the pickle refers to storage {key!r}, which the archive lacks")
        dtype = np.dtype(STORAGE_DTYPES[pid[1].name]).newbyteorder("<" if self._byteorder == "little" else ">")
        raw = self._storages[key]
        if len(raw) < pid[4] * dtype.itemsize:
            raise InputError(f"{self._name}: storage {key} holds {len(raw)} bytes, fewer than its "
                             f"{pid[4]} elements need")
        return _Storage(np.frombuffer(raw, dtype=dtype, count=pid[4]).astype(dtype.newbyteorder("=")))


def load_torch_file(name: str, content: bytes) -> Any:
    """The object a ``torch.save`` zip file holds, tensors as numpy arrays; InputError for anything else."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(content))
    except zipfile.BadZipFile as exc:
        raise InputError(f"{name}: not a torch.save zip archive ({exc}); legacy (pre-1.6) torch files are not "
                         "read") from None
    infos = archive.infolist()
    if sum(i.file_size for i in infos) > MAX_ARCHIVE_BYTES:
        raise InputError(f"{name}: archive members expand beyond {MAX_ARCHIVE_BYTES:,} bytes")
    pickles = [i.filename for i in infos if i.filename.endswith("/data.pkl") and i.filename.count("/") == 1]
    if len(pickles) != 1:
        raise InputError(f"{name}: expected one <name>/data.pkl in the archive, found {len(pickles)}")
    prefix = pickles[0][: -len("data.pkl")]
    names = {i.filename for i in infos}
    byteorder = archive.read(prefix + "byteorder").decode("ascii", "replace").strip() \
        if prefix + "byteorder" in names else "little"
    if byteorder not in ("little", "big"):
        raise InputError(f"{name}: byteorder {byteorder!r} is not little or big")
    storages = {i.filename[len(prefix) + len("data/"):]: archive.read(i.filename) for i in infos
                if i.filename.startswith(prefix + "data/")}
    try:
        return _RestrictedUnpickler(archive.read(pickles[0]), storages, byteorder, name).load()
    except InputError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError,
            AttributeError, RecursionError) as exc:
        raise InputError(f"{name}: broken pickle in the torch file ({type(exc).__name__}: {exc})") from None


def sglang_logical_count(name: str, content: bytes) -> np.ndarray:
    """Summed loads float64 [layers, experts] from an SGLang expert-distribution dump (``logical_count`` [steps,
    layers, experts], or [layers, experts])."""
    data = load_torch_file(name, content)
    if not isinstance(data, dict) or "logical_count" not in data:
        keys = ", ".join(sorted(map(str, data))) if isinstance(data, dict) else type(data).__name__
        raise InputError(f"{name}: no \"logical_count\" in the torch file (found: {keys or 'nothing'}); expected "
                         "an SGLang expert-distribution recorder dump")
    counts = data["logical_count"]
    if not isinstance(counts, np.ndarray) or counts.ndim not in (2, 3):
        raise InputError(f"{name}: \"logical_count\" must be a tensor of steps x layers x experts")
    if counts.ndim == 3:
        counts = counts.sum(axis=0)
    weight = counts.astype(np.float64)
    if not np.all(np.isfinite(weight)) or (weight < 0).any():
        raise InputError(f"{name}: \"logical_count\" holds negative or non-finite counts")
    return weight
