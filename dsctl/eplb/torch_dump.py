"""Reading ``torch.save`` files without torch: SGLang's expert-distribution recorder dumps (``logical_count``).

Format (torch >= 1.6 "zip" serialization): a zip archive (stored, not compressed) with ``<prefix>/data.pkl`` (a
protocol-2 pickle of the saved object), ``<prefix>/data/<key>`` (raw bytes of each tensor storage) and
``<prefix>/byteorder`` ("little" or "big"). A tensor pickles as ``torch._utils._rebuild_tensor_v2(storage, offset,
size, stride, requires_grad, backward_hooks[, metadata])`` with ``backward_hooks`` an empty
``collections.OrderedDict`` and ``storage`` a persistent id ``("storage", torch.<Type>Storage, key, location,
numel)``.

Pickle is code: a pickle may name any importable callable and call it. This reader never unpickles: it runs the
pickle in :class:`dsctl.eplb.pickle_vm.PickleVM`, a bounded interpreter of the data-building opcodes, with an
allow-list of exactly the globals above, each mapped to a stand-in of its own (no torch, nothing imported from the
pickle); any other global refuses the file before anything is called. A storage is a 1-D array of the dtype its
class names, ``numel`` elements of its archive member. A tensor's extent (``offset + sum((size - 1) * stride) + 1``
elements, strides and sizes non-negative) is checked against its storage and its element count against the
caller's ``max_values`` (summed over every tensor in the file) before any element is read; elements are then
gathered by index (no strided view of unchecked memory). Archive members are read only when named, within
:data:`MAX_PICKLE_BYTES` and :data:`MAX_STORAGE_BYTES`; a corrupt, encrypted or compressed-otherwise member is an
input error naming the file and member.
SGLang's dump (``ExpertDistributionRecorder`` ``dump_record``): a dict with ``logical_count`` int [steps, layers,
experts] (file ``expert_distribution_recorder_<time>[_<rank>].pt``); ``sglang_logical_count`` sums the steps.
"""

from __future__ import annotations

import io
import math
import re
import struct
import zipfile
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from dsctl.eplb.pickle_vm import PickleVM
from dsctl.errors import InputError
from dsctl.names import shown, terminal_text

#: storage class name -> numpy dtype (little-endian; byteorder applied when reading)
STORAGE_DTYPES = {
    "LongStorage": "i8", "IntStorage": "i4", "ShortStorage": "i2", "CharStorage": "i1", "ByteStorage": "u1",
    "BoolStorage": "?", "DoubleStorage": "f8", "FloatStorage": "f4", "HalfStorage": "f2",
}
#: most bytes of the archive's data.pkl (an SGLang dump's is ~400 bytes): bounds the interpreter's time
MAX_PICKLE_BYTES = 4 * 1024**2
#: most bytes read from the storages a pickle names, in all (1,000,000 int64 counts are 8 MB)
MAX_STORAGE_BYTES = 64 * 1024**2
#: most members an archive may list (torch writes ~8 plus one per storage): bounds the central directory's parse
MAX_MEMBERS = 10_000
#: most dimensions of a tensor
MAX_TENSOR_DIMS = 16
_FEWER_STEPS = "; save fewer steps per file, or their sum: logical_count.sum(0, keepdim=True)"
_ZIP_MEMBER = b"PK\x01\x02"  # the signature every central-directory entry starts with
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_./-]{1,100}")
#: errors the zipfile and zlib modules raise on a corrupt member (CRC, truncation, bad deflate stream; a header
#: offset beyond 2^63 makes the seek raise OverflowError)
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError, ValueError,
               NotImplementedError, RuntimeError, OverflowError, struct.error)


def _one_line(text: str) -> str:
    """An exception's message for one error line: control characters escaped, line breaks shown as ``\\n``."""
    return terminal_text(text.replace("\r", "\\r").replace("\n", "\\n"))[:200]


def _display(text: str) -> str:
    """A name from the pickle fit for a one-line message: as is when plain, else quoted with escapes."""
    return text if _PLAIN_NAME.fullmatch(text) else terminal_text(shown(text, 80))


@dataclass(frozen=True)
class _StorageType:
    name: str


@dataclass(frozen=True)
class _Storage:
    data: np.ndarray  # 1-D, the storage's elements (the file's byte order)


class _Global:
    """A stand-in for one allowed callable (``torch._utils._rebuild_tensor_v2`` or ``collections.OrderedDict``)."""

    def __init__(self, name: str) -> None:
        self.name = name


_REBUILD = _Global("_rebuild_tensor_v2")
_ORDERED_DICT = _Global("OrderedDict")


class _Archive:
    """The members of one torch.save zip archive, read on demand within the byte limits."""

    def __init__(self, name: str, content: bytes) -> None:
        self.name = name
        if content.count(_ZIP_MEMBER) > MAX_MEMBERS:
            raise InputError(f"{name}: the archive lists more than {MAX_MEMBERS:,} members; a torch.save file has "
                             "one per tensor storage plus a few")
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(content))
            infos = self.zip.infolist()
        except _ZIP_ERRORS as exc:
            raise InputError(f"{name}: not a torch.save zip archive ({_one_line(str(exc))}); legacy "
                             "(pre-1.6) torch files are not read") from None
        self.members = {info.filename: info for info in infos}
        self.storage_bytes = 0

    def read(self, member: str, limit: int) -> bytes:
        """The bytes of ``member`` (at most ``limit``); InputError naming file and member when it is unreadable."""
        info = self.members[member]
        where = f"{self.name}: archive member {_display(member)}"
        if info.flag_bits & 0x1:
            raise InputError(f"{where} is encrypted; torch.save members are stored in the clear")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise InputError(f"{where} uses compression method {info.compress_type}; torch.save stores members "
                             "uncompressed (method 0)")
        if info.file_size > limit:
            raise InputError(f"{where} holds {info.file_size:,} bytes, more than the {limit:,} allowed")
        try:
            with self.zip.open(info) as stream:
                return stream.read(limit + 1)[:limit]
        except _ZIP_ERRORS as exc:
            raise InputError(f"{where} is corrupt ({type(exc).__name__}: {_one_line(str(exc))})") from None


class _TorchPickle:
    """The allow-list and stand-ins one pickle runs with: storages read from ``archive``, tensors gathered."""

    def __init__(self, archive: _Archive, prefix: str, byteorder: str, max_values: int) -> None:
        self._archive, self._prefix, self._max_values = archive, prefix, max_values
        self._order: Literal["<", ">"] = "<" if byteorder == "little" else ">"
        self._raw: dict[str, bytes] = {}
        self._values = 0
        self.vm: PickleVM | None = None

    def _fail(self, what: str) -> InputError:
        return self.vm.fail(what) if self.vm is not None else InputError(f"{self._archive.name}: {what}")

    def resolve(self, module: str, name: str) -> Any:
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return _REBUILD
        if module == "collections" and name == "OrderedDict":
            return _ORDERED_DICT
        if module == "torch" and name in STORAGE_DTYPES:
            return _StorageType(name)
        raise self._fail(f"the pickle names {_display(module + '.' + name)}, which is not a tensor rebuild function "
                         "(a pickle can run any code it names; only tensors are accepted)")

    def call(self, func: Any, args: tuple[Any, ...]) -> Any:
        if func is _REBUILD:
            return self._rebuild_tensor(*args) if 4 <= len(args) <= 7 else self._bad_call(func, args)
        if func is _ORDERED_DICT:
            if args:
                raise self._fail("backward hooks are not empty (refused: they would be code)")
            return OrderedDict()
        return self._bad_call(func, args)

    def _bad_call(self, func: Any, args: tuple[Any, ...]) -> Any:
        what = func.name if isinstance(func, _Global) else type(func).__name__
        raise self._fail(f"the pickle calls {what} with {len(args)} arguments (only tensor rebuilds are run)")

    def persistent_load(self, pid: Any) -> _Storage:
        if not (type(pid) is tuple and len(pid) == 5 and pid[0] == "storage" and isinstance(pid[1], _StorageType)
                and type(pid[2]) is str and type(pid[4]) is int and pid[4] >= 0):
            raise self._fail("unexpected persistent id in the pickle (a storage reference is "
                             "('storage', <Type>Storage, key, location, numel))")
        key, numel = pid[2], pid[4]
        dtype = np.dtype(STORAGE_DTYPES[pid[1].name]).newbyteorder(self._order)
        member = f"{self._prefix}data/{key}"
        if member not in self._archive.members:
            raise self._fail(f"the pickle refers to storage {_display(key)}, which the archive lacks")
        if key not in self._raw:
            left = MAX_STORAGE_BYTES - self._archive.storage_bytes
            if self._archive.members[member].file_size > left:
                raise self._fail(f"the storages the pickle names hold more than {MAX_STORAGE_BYTES:,} bytes in all")
            self._raw[key] = self._archive.read(member, left)
            self._archive.storage_bytes += len(self._raw[key])
        raw = self._raw[key]
        if len(raw) < numel * dtype.itemsize:
            raise self._fail(f"storage {_display(key)} holds {len(raw):,} bytes, fewer than its {numel:,} elements "
                             f"need")
        return _Storage(np.frombuffer(raw, dtype=dtype, count=numel))

    def _rebuild_tensor(self, storage: Any, offset: Any, size: Any, stride: Any, *rest: Any) -> np.ndarray:
        """Stand-in for torch._utils._rebuild_tensor_v2: the tensor's elements gathered by index, after checking
        its extent against its storage and its count against ``max_values``."""
        if not isinstance(storage, _Storage):
            raise self._fail("a tensor's storage is not a storage reference")
        if type(size) is not tuple or type(stride) is not tuple or len(size) != len(stride):
            raise self._fail("a tensor's size and stride are not tuples of one length")
        if len(size) > MAX_TENSOR_DIMS:
            raise self._fail(f"a tensor has {len(size)} dimensions (at most {MAX_TENSOR_DIMS})")
        if not all(type(v) is int and v >= 0 for v in (offset, *size, *stride)):
            raise self._fail("a tensor's offset, size or stride is not a non-negative integer")
        if len(rest) >= 2 and not (isinstance(rest[1], dict) and not rest[1]):
            raise self._fail("a tensor's backward hooks are not an empty OrderedDict (refused: they would be code)")
        if any(n > self._max_values for n in size):
            raise self._fail(f"a tensor of size {_display_size(size)} holds more than {self._max_values:,} values "
                             f"(the statistics limit{_FEWER_STEPS})")
        count = math.prod(size)
        self._values += count
        if self._values > self._max_values:
            raise self._fail(f"the tensors hold more than {self._max_values:,} values in all (the statistics "
                             f"limit; this one is {_display_size(size)}{_FEWER_STEPS})")
        data = storage.data
        if count == 0:
            return np.zeros(size, dtype=data.dtype.newbyteorder("="))
        extent = offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True)) + 1
        if extent > data.size:
            raise self._fail(f"a tensor reads past its storage ({extent:,} > {data.size:,} elements)")
        index = np.array([offset], dtype=np.int64)
        for n, s in zip(size, stride, strict=True):
            index = (index[:, None] + np.arange(n, dtype=np.int64) * s).reshape(-1)
        return data[index].astype(data.dtype.newbyteorder("=")).reshape(size)


def _display_size(size: tuple[int, ...]) -> str:
    return " x ".join(f"{n:,}" for n in size) or "a scalar"


def load_torch_file(name: str, content: bytes, max_values: int) -> Any:
    """The object a ``torch.save`` zip file holds, tensors as numpy arrays (at most ``max_values`` elements in
    all); InputError naming the file for anything else."""
    archive = _Archive(name, content)
    pickles = [m for m in archive.members if m.endswith("/data.pkl") and m.count("/") == 1]
    if len(pickles) != 1:
        raise InputError(f"{name}: expected one <name>/data.pkl in the archive, found {len(pickles)}")
    prefix = pickles[0][: -len("data.pkl")]
    byteorder = "little"
    if prefix + "byteorder" in archive.members:
        byteorder = archive.read(prefix + "byteorder", 16).decode("ascii", "replace").strip()
    if byteorder not in ("little", "big"):
        raise InputError(f"{name}: byteorder {_display(byteorder)} is not little or big")
    torch_pickle = _TorchPickle(archive, prefix, byteorder, max_values)
    torch_pickle.vm = PickleVM(archive.read(pickles[0], MAX_PICKLE_BYTES), name, torch_pickle.resolve,
                               torch_pickle.call, torch_pickle.persistent_load)
    return torch_pickle.vm.run()


def sglang_logical_count(name: str, content: bytes, max_values: int) -> np.ndarray:
    """Summed loads float64 [layers, experts] from an SGLang expert-distribution dump (``logical_count`` [steps,
    layers, experts], or [layers, experts]); the file's tensors may hold at most ``max_values`` elements."""
    data = load_torch_file(name, content, max_values)
    if not isinstance(data, dict) or "logical_count" not in data:
        keys = ", ".join(sorted(_display(str(k)) for k in data)) if isinstance(data, dict) else type(data).__name__
        keys = keys if len(keys) <= 200 else f"{keys[:200]}..."
        raise InputError(f"{name}: no \"logical_count\" in the torch file (found: {keys or 'nothing'}); expected "
                         "an SGLang expert-distribution recorder dump")
    counts = data["logical_count"]
    if not isinstance(counts, np.ndarray) or counts.ndim not in (2, 3) or counts.dtype.kind not in "iuf":
        raise InputError(f"{name}: \"logical_count\" must be an integer or float tensor of steps x layers x experts")
    if counts.shape[-1] == 0 or counts.shape[-2] == 0:
        raise InputError(f"{name}: \"logical_count\" of shape {counts.shape} has no layer or no expert")
    weight = counts.astype(np.float64)
    if weight.ndim == 3:
        weight = weight.sum(axis=0)
    if not np.all(np.isfinite(weight)) or (weight < 0).any():
        raise InputError(f"{name}: \"logical_count\" holds negative or non-finite counts")
    return weight
