"""Issue 33: the ``.pt`` reader is a bounded interpreter. Each hostile file of tests/hostile_pickles.py is refused
with one InputError naming the file (before: garbage loads from process memory, a segfault, GBs, exit 4)."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from dsctl.eplb import pickle_vm
from dsctl.eplb.stats import MAX_STATS_VALUES, parse_stats
from dsctl.eplb.torch_dump import MAX_MEMBERS, MAX_PICKLE_BYTES, load_torch_file
from dsctl.errors import InputError
from tests import hostile_pickles as hp

#: the message each hostile file gives (a fragment): the bound or rule that refused it
REFUSALS = {
    "build_on_storage": "pickle opcode BUILD is not one torch.save writes",
    "past_storage": r"a tensor reads past its storage \(11 > 6 elements\)",
    "tuple_chain_key": "containers nest deeper than 64 levels",
    "doubling_tuple_key": "containers nest deeper than 64 levels",
    "memo_index": "memo index 134,217,728 is not below 200,000",
    "stride_zero": "the tensors hold more than 1,000,000 values in all",
    "open_lists_60mib": r"archive member archive/data.pkl holds 62,914,563 bytes, more than the 4,194,304",
    "open_lists_4mib": "the pickle's stack grows beyond 100,000 items",
    "corrupt_crc": r"archive member archive/data.pkl is corrupt \(BadZipFile: Bad CRC-32",
    "encrypted_member": "archive member archive/data.pkl is encrypted",
    "unknown_method": "archive member archive/data.pkl uses compression method 99",
    "bad_deflate": r"archive member archive/data.pkl is corrupt \(error: Error -3",
    "deep_key_message": "containers nest deeper than 64 levels",
    "newline_global": r"the pickle names 'os\\nerror: all nodes drained.system\\x1b\[2J'",
    "newline_key": r"found: 'rank\\nerror: forged'",
}


def test_every_hostile_case_has_its_refusal() -> None:
    assert set(REFUSALS) == set(hp.HOSTILE)


@pytest.mark.parametrize("case", sorted(hp.HOSTILE))
def test_hostile_dump_is_one_line_input_error(case: str) -> None:
    with pytest.raises(InputError, match=REFUSALS[case]) as caught:
        parse_stats(f"{case}.pt", hp.HOSTILE[case][1]())
    message = str(caught.value)
    assert message.startswith(f"{case}.pt: ") and "\n" not in message and "\x1b" not in message


def test_the_good_dump_of_the_builders_reads() -> None:
    """The builders write what torch writes: the same opcodes read back as the intended table."""
    assert parse_stats("good.pt", hp.good_dump()).tolist() == [[0, 1, 2], [3, 4, 5]]


def test_build_exploit_read_process_memory_before() -> None:
    """The exploit's arithmetic: the old extent check passed (63 < 64 elements) although the view began 7 rows (56
    elements) into the 8 x 8 array; the new check sees the tensor within its 64-element storage only because BUILD
    is refused first. Without BUILD the same tensor reads the storage's last 57 elements, all zero."""
    offset, count = 7, 57
    assert offset + (count - 1) < 64 and 7 * 8 + count > 64  # passed the old check, read 49 elements past the end
    body = hp.tensor(hp.storage("0", 64), offset, (1, count), (count, 1))
    loads = parse_stats("ok.pt", hp.archive(hp.counts_dict(body), {"0": bytes(8 * 64)}))
    assert loads.shape == (1, count) and not loads.any()


@pytest.mark.parametrize(("size", "stride", "offset", "needle"), [
    ((2, 3), (3, 1), 1, r"reads past its storage \(7 > 6 elements\)"),
    ((2, 3), (-3, 1), 0, "not a non-negative integer"),
    ((2, -3), (3, 1), 0, "not a non-negative integer"),
    ((2, 3), (3, 1), -1, "not a non-negative integer"),
    ((1,) * 17, (1,) * 17, 0, "a tensor has 17 dimensions"),
    ((2, 3), (3,), 0, "size and stride are not tuples of one length"),
    ((1_000_001, 0), (1, 1), 0, "holds more than 1,000,000 values"),
])
def test_tensor_extent_is_checked_before_any_element_is_read(size: tuple[int, ...], stride: tuple[int, ...],
                                                            offset: int, needle: str) -> None:
    body = hp.tensor(hp.storage("0", 6), offset, size, stride)
    with pytest.raises(InputError, match=needle):
        parse_stats("t.pt", hp.archive(hp.counts_dict(body), {"0": bytes(48)}))


def test_extent_exactly_at_the_storage_end_reads_and_strides_are_honoured() -> None:
    body = hp.tensor(hp.storage("0", 8), 2, (2, 3), (3, 1))  # last element 2 + 3 + 2 = 7: the storage's last
    loads = parse_stats("t.pt", hp.archive(hp.counts_dict(body), {"0": np.arange(8, dtype="<i8").tobytes()}))
    assert loads.tolist() == [[2, 3, 4], [5, 6, 7]]
    body = hp.tensor(hp.storage("0", 2, "IntStorage"), 0, (2, 3), (0, 1 - 1))  # stride 0: one value repeated
    loads = parse_stats("t.pt", hp.archive(hp.counts_dict(body), {"0": np.array([9, 1], "<i4").tobytes()}))
    assert loads.tolist() == [[9, 9, 9], [9, 9, 9]]


def test_statistics_limit_counts_every_tensor_of_the_file() -> None:
    half = MAX_STATS_VALUES // 2 + 1
    one = hp.tensor(hp.storage("0", 1), 0, (1, half), (0, 0))
    pickle_bytes = hp.PROTO + b"}(" + hp.text("a") + one + hp.text("logical_count") + one + b"u" + hp.STOP
    with pytest.raises(InputError, match="the tensors hold more than 1,000,000 values in all"):
        parse_stats("t.pt", hp.archive(pickle_bytes, {"0": bytes(8)}))
    exactly = hp.tensor(hp.storage("0", 1), 0, (1000, 1000), (0, 0))
    assert parse_stats("t.pt", hp.archive(hp.counts_dict(exactly), {"0": bytes(8)})).shape == (1000, 1000)


@pytest.mark.parametrize(("pickle_bytes", "needle"), [
    (hp.PROTO + b"]" + b"]a" * 100 + b"0" + hp.STOP, "opcode POP"),
    (hp.PROTO + b"}" + b"]" + b"N" + b"s" + hp.STOP, "a dict key is a list"),
    (hp.PROTO + b"}" + b"(" + b"K\x01" * 17 + b"t" + b"N" + b"s" + hp.STOP, "a dict key is a tuple"),
    (hp.PROTO + b"}" + b"(K\x01\x85t" + b"N" + b"s" + hp.STOP, "a dict key is a tuple"),
    (hp.PROTO + b"]q\x00]h\x00aq\x01h\x00N" + b"a" + hp.STOP, "already inside another container"),
    (hp.PROTO + b"]q\x00h\x00a" + hp.STOP, "placed inside itself"),
    (hp.PROTO + b")N" + b"a" + hp.STOP, "APPEND into a tuple"),
    (hp.PROTO + b"\x8a\x09" + b"\x01" * 9 + hp.STOP, "an integer of 9 bytes"),
    (hp.PROTO + b"h\x05" + hp.STOP, "memo index 5 was never put"),
    (hp.PROTO + b"X\xff\xff\xff\x7fab" + hp.STOP, "the pickle ends inside BINUNICODE"),
    (hp.PROTO + b"X\x01\x00\x00\x00\xff" + hp.STOP, "BINUNICODE holds text that is not UTF-8"),
    (hp.PROTO + b"cos\n" + b"s" * 300 + b"\n" + hp.STOP, "longer than 200 characters"),
    (hp.PROTO + b"(" * 100_001 + hp.STOP, "stack grows beyond 100,000"),
    (hp.PROTO + b"N" + hp.integer(2**40)[:3], "the pickle ends inside LONG1"),
    (hp.PROTO + b"N(" + hp.STOP, "STOP finds the stack empty"),
    (hp.PROTO + b"ccollections\nOrderedDict\n(K\x01tR" + hp.STOP, "backward hooks are not empty"),
    (hp.PROTO + b"ctorch._utils\n_rebuild_tensor_v2\n)R" + hp.STOP, "calls _rebuild_tensor_v2 with 0 arguments"),
    (hp.PROTO + b"ctorch\nLongStorage\n)R" + hp.STOP, "calls _StorageType"),
    (hp.PROTO + b"N" + b"q\x00" * (pickle_vm.MAX_OPCODES + 1) + hp.STOP, "runs more than 1,000,000 opcodes"),
])
def test_interpreter_bounds_and_rules(pickle_bytes: bytes, needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        load_torch_file("p.pt", hp.archive(pickle_bytes), MAX_STATS_VALUES)


def test_values_and_nesting_at_their_bounds_load() -> None:
    nested = hp.PROTO + b"N" + b"\x85" * pickle_vm.MAX_NESTING + hp.STOP
    value = load_torch_file("p.pt", hp.archive(nested), 10)
    for _ in range(pickle_vm.MAX_NESTING):
        value = value[0]
    assert value is None
    with pytest.raises(InputError, match="nest deeper than 64"):
        load_torch_file("p.pt", hp.archive(hp.PROTO + b"N" + b"\x85" * 65 + hp.STOP), 10)
    many = hp.PROTO + b"]" + (b"(" + b"K\x01" * 999 + b"e") * 200 + hp.STOP  # 199,800 + 1 values
    assert len(load_torch_file("p.pt", hp.archive(many), 10)) == 199_800
    with pytest.raises(InputError, match="builds more than 200,000 values"):
        load_torch_file("p.pt", hp.archive(many[:-1] + b"(" + b"K\x01" * 200 + b"e" + hp.STOP), 10)


def test_flat_tuple_keys_and_ordered_dicts_are_plain_data() -> None:
    pickle_bytes = (hp.PROTO + b"ccollections\nOrderedDict\n)R(" + b"(K\x01X\x01\x00\x00\x00a\x88Nt" + b"K\x02"
                    + b"u" + hp.STOP)
    assert load_torch_file("p.pt", hp.archive(pickle_bytes), 10) == {(1, "a", True, None): 2}


def test_archive_members_are_bounded_before_the_directory_is_parsed() -> None:
    content = hp.good_dump() + b"PK\x01\x02" * (MAX_MEMBERS + 1)
    with pytest.raises(InputError, match="lists more than 10,000 members"):
        parse_stats("z.pt", content)
    assert MAX_PICKLE_BYTES == 4 * 1024**2


def test_storage_member_errors_name_the_member() -> None:
    good = hp.good_dump()
    with zipfile.ZipFile(io.BytesIO(good)) as zf:
        info = zf.getinfo("archive/data/0")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    broken = good[:start] + b"\x07" + good[start + 1:]
    with pytest.raises(InputError, match=r"archive member archive/data/0 is corrupt \(BadZipFile: Bad CRC-32"):
        parse_stats("s.pt", broken)
    short = hp.archive(hp.counts_dict(hp.tensor(hp.storage("0", 6), 0, (2, 3), (3, 1))), {"0": bytes(47)})
    with pytest.raises(InputError, match="storage 0 holds 47 bytes, fewer than its 6 elements need"):
        parse_stats("s.pt", short)
    missing = hp.archive(hp.counts_dict(hp.tensor(hp.storage("1", 6), 0, (2, 3), (3, 1))), {"0": bytes(48)})
    with pytest.raises(InputError, match="refers to storage 1, which the archive lacks"):
        parse_stats("s.pt", missing)
