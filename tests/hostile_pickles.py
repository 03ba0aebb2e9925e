"""Hostile ``torch.save``-style files for the ``.pt`` reader (issue 33), written opcode by opcode.

``HOSTILE`` maps a case name to (what it is, a builder returning the file's bytes). Used by
tests/unit/test_eplb_torch_dump_hostile.py, tests/cli/test_hardening_round4_eplb.py, tests/reliability_cases.py and
``python -m benchmarks.memory_peaks --only pt`` (peak memory and time of each, in a fresh process).
"""

from __future__ import annotations

import io
import struct
import zipfile
from collections.abc import Callable

import numpy as np

PROTO = b"\x80\x02"
STOP = b"."


def text(value: str) -> bytes:
    """BINUNICODE ``value``."""
    raw = value.encode("utf-8", "surrogatepass")
    return b"X" + struct.pack("<I", len(raw)) + raw


def integer(value: int) -> bytes:
    """BININT ``value`` (32-bit), or LONG1 for larger ones."""
    if -2**31 <= value < 2**31:
        return b"J" + struct.pack("<i", value)
    raw = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw


def int_tuple(values: tuple[int, ...]) -> bytes:
    return b"(" + b"".join(integer(v) for v in values) + b"t"


def storage(key: str, numel: int, kind: str = "LongStorage") -> bytes:
    """A BINPERSID storage reference ("storage", torch.<kind>, key, "cpu", numel)."""
    return (b"(" + text("storage") + f"ctorch\n{kind}\n".encode() + text(key) + text("cpu") + integer(numel)
            + b"tQ")


def tensor(storage_ref: bytes, offset: int, size: tuple[int, ...], stride: tuple[int, ...]) -> bytes:
    """``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())``."""
    return (b"ctorch._utils\n_rebuild_tensor_v2\n(" + storage_ref + integer(offset) + int_tuple(size)
            + int_tuple(stride) + b"\x89" + b"ccollections\nOrderedDict\n)R" + b"tR")


def counts_dict(value: bytes) -> bytes:
    """A pickle of ``{"logical_count": <value>}``."""
    return PROTO + b"}(" + text("logical_count") + value + b"u" + STOP


def archive(pickle_bytes: bytes, storages: dict[str, bytes] | None = None,
            compression: int = zipfile.ZIP_STORED) -> bytes:
    """A torch.save-shaped zip: archive/data.pkl, archive/byteorder, archive/data/<key>."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        zf.writestr("archive/data.pkl", pickle_bytes)
        zf.writestr("archive/byteorder", "little")
        for key, raw in (storages or {}).items():
            zf.writestr(f"archive/data/{key}", raw)
    return buf.getvalue()


def good_dump() -> bytes:
    """A valid dump: logical_count int64 [1 step, 2 layers, 3 experts] = 0..5."""
    return archive(counts_dict(tensor(storage("0", 6), 0, (1, 2, 3), (6, 3, 1))),
                   {"0": np.arange(6, dtype="<i8").tobytes()})


def build_on_storage() -> bytes:
    """BUILD gives the storage stand-in an 8 x 8 array; a tensor at offset 7 of 57 elements passed the old extent
    check (63 < 64 elements) but its view started at row 7: 49 elements past the buffer (issue 33: process memory
    in the loads)."""
    zeros = {"0": bytes(8 * 64)}
    two_d = tensor(storage("0", 64), 0, (8, 8), (8, 1))
    body = (storage("0", 64) + b"q\x00" + b"}(" + text("data") + two_d + b"ub" + b"0"
            + tensor(b"h\x00", 7, (1, 57), (57, 1)))
    return archive(counts_dict(body), zeros)


def past_storage() -> bytes:
    """A tensor whose extent (offset 5 + (2-1)*3 + (3-1)*1 + 1 = 11) passes its 6-element storage."""
    return archive(counts_dict(tensor(storage("0", 6), 5, (2, 3), (3, 1))), {"0": bytes(48)})


def tuple_chain_key(depth: int = 2_000_000) -> bytes:
    """A dict key that is a chain of ``depth`` 1-tuples (hashing it segfaulted: exit 139)."""
    return archive(PROTO + b"}" + b"N" + b"\x85" * depth + b"N" + b"s" + STOP)


def doubling_tuple_key(levels: int = 400) -> bytes:
    """A key t = (t, t) ``levels`` times (2 KB; hashing it takes 2^levels steps)."""
    return archive(PROTO + b"}" + b"Nq\x00" + b"h\x00h\x00\x86q\x00" * levels + b"N" + b"s" + STOP)


def memo_index() -> bytes:
    """LONG_BINPUT 2^27 (the C unpickler sized its memo to it: 2.1 GB from 257 bytes)."""
    return archive(PROTO + b"N" + b"r" + struct.pack("<I", 2**27) + STOP)


def stride_zero() -> bytes:
    """One stored element seen as 1,000 x 1,000 x 1,000 (stride 0): 5.2 GB before the statistics limit."""
    return archive(counts_dict(tensor(storage("0", 1), 0, (1000, 1000, 1000), (0, 0, 0))), {"0": bytes(8)})


def open_lists(size_bytes: int = 60 * 1024**2) -> bytes:
    """``size_bytes`` of EMPTY_LIST (each one a new list on the stack: 4.6 GB for 60 MiB)."""
    return archive(PROTO + b"]" * size_bytes + STOP)


def deep_key_message(depth: int = 5_000) -> bytes:
    """A dict without logical_count whose key is ``depth`` nested tuples (printing it in the message raised)."""
    return archive(PROTO + b"}" + b"N" + b"\x85" * depth + b"K\x01" + b"s" + STOP)


def newline_global() -> bytes:
    """STACK_GLOBAL of a name holding a newline and a forged ``error:`` line."""
    return archive(PROTO + text("os\nerror: all nodes drained") + text("system\x1b[2J") + b"\x93" + STOP)


def newline_key() -> bytes:
    """A dict whose keys hold newlines (they are listed in the "no logical_count" message)."""
    return archive(PROTO + b"}(" + text("rank\nerror: forged") + b"K\x01" + b"u" + STOP)


def _patch(content: bytes, member: str, change: Callable[[bytearray, int, int], None]) -> bytes:
    """Apply ``change(buf, local_header_offset, central_header_offset)`` to ``member``'s two headers."""
    buf = bytearray(content)
    with zipfile.ZipFile(io.BytesIO(content)) as zf:
        info = zf.getinfo(member)
    central = buf.find(b"PK\x01\x02")
    while central >= 0 and buf[central + 46:central + 46 + len(member)] != member.encode():
        central = buf.find(b"PK\x01\x02", central + 4)
    change(buf, info.header_offset, central)
    return bytes(buf)


def corrupt_crc() -> bytes:
    """data.pkl's bytes changed after its CRC was written."""
    content = good_dump()
    at = content.find(b"logical_count")
    return content[:at] + b"L" + content[at + 1:]


def encrypted_member() -> bytes:
    """data.pkl flagged as encrypted (general purpose flag bit 0)."""
    def change(buf: bytearray, local: int, central: int) -> None:
        buf[local + 6] |= 1
        buf[central + 8] |= 1
    return _patch(good_dump(), "archive/data.pkl", change)


def unknown_method() -> bytes:
    """data.pkl compressed with method 99 (not one zipfile knows)."""
    def change(buf: bytearray, local: int, central: int) -> None:
        buf[local + 8:local + 10] = struct.pack("<H", 99)
        buf[central + 10:central + 12] = struct.pack("<H", 99)
    return _patch(good_dump(), "archive/data.pkl", change)


def bad_deflate() -> bytes:
    """data.pkl deflated, its compressed stream overwritten with bytes that are not deflate."""
    content = archive(counts_dict(tensor(storage("0", 6), 0, (1, 2, 3), (6, 3, 1))),
                      {"0": np.arange(6, dtype="<i8").tobytes()}, zipfile.ZIP_DEFLATED)
    with zipfile.ZipFile(io.BytesIO(content)) as zf:
        info = zf.getinfo("archive/data.pkl")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    buf = bytearray(content)
    buf[start:start + 8] = b"\xff" * 8  # block type 3: reserved, a deflate error
    return bytes(buf)


HOSTILE: dict[str, tuple[str, Callable[[], bytes]]] = {
    "build_on_storage": ("BUILD of a 2-D array into a storage, then a tensor at offset 7", build_on_storage),
    "past_storage": ("a tensor reading 11 elements of a 6-element storage", past_storage),
    "tuple_chain_key": ("a 2,000,000-deep chain of 1-tuples as a dict key", tuple_chain_key),
    "doubling_tuple_key": ("a 2 KB doubling nested tuple key (t = (t, t) x 400)", doubling_tuple_key),
    "memo_index": ("a memo index of 2^27 in 257 bytes", memo_index),
    "stride_zero": ("a stride-0 tensor of 1,000^3 values over one element", stride_zero),
    "open_lists_60mib": ("60 MiB of EMPTY_LIST (`]`)", open_lists),
    "open_lists_4mib": ("4 MiB - 64 bytes of EMPTY_LIST (within the pickle size limit)",
                        lambda: open_lists(4 * 1024**2 - 64)),
    "corrupt_crc": ("a zip member whose CRC does not match", corrupt_crc),
    "encrypted_member": ("a zip member flagged encrypted", encrypted_member),
    "unknown_method": ("a zip member of compression method 99", unknown_method),
    "bad_deflate": ("a deflated zip member with a broken stream", bad_deflate),
    "deep_key_message": ("a 5,000-deep key in a dict without logical_count", deep_key_message),
    "newline_global": ("a global named 'os\\nerror: ...' (STACK_GLOBAL)", newline_global),
    "newline_key": ("a key 'rank\\nerror: forged'", newline_key),
}
