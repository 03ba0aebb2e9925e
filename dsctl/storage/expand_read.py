"""The four chain-table files read for ``storage expand`` in one pass each, as arrays (issue 32).

``crosscheck.read_checked`` checks a table line by line (one regex match, tuple and dict entry per target:
10 s at 180 nodes x 16 SSDs, 260,000 targets). Here each file in the layout dsctl and upstream
``gen_chain_table.py`` write (``\\n`` line ends, no blank lines or stray spaces, ids of at most 18 digits) is
checked on arrays (``_laid_out``: the text less its digits is the line's pieces repeated and the digit runs sit
where the numbers go), its numbers taken out a column at a time; a create file with chunk sizes is matched
whole by one regex (C speed) instead. Every check of ``check-chains`` that a sound table must pass is then made
on the arrays. A table this reader does not accept (another layout, or any problem) is read again by
``read_checked``, which names the first problem: the fast path only ever accepts tables the full check passes,
and reads them to the same rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from dsctl.storage.chaintable import CREATE_PIECES, MIN_UPSTREAM_CHAIN_ID, REMOVE_PIECES, UINT32_MAX
from dsctl.storage.crosscheck import CHAINS, CREATE, REMOVE, TABLE

_ID = "[0-9]{1,18}"  # 18 digits always fit int64; longer ids go the line-by-line way
_CREATE = re.compile(rf"create-target --node-id {_ID} --disk-index {_ID} --target-id {_ID} --chain-id {_ID}"
                     r"(?: +--chunk-size(?: +[0-9]{1,15}(?:B|KB|MB|GB|TB|K|M|G|T)?)+)? *(?: --use-new-chunk-engine)?\n")
_REMOVE = re.compile(rf"(?:offline|remove)-target --node-id {_ID} --target-id {_ID}\n")
_CHUNK_CHARS = 4 * 1024**2  # characters turned into numbers at a time
# the lines as dsctl and upstream write them (no chunk sizes): read by ``_laid_out``, the regexes' fast case


@dataclass(frozen=True)
class TableArrays:
    """A sound table as arrays, rows in file order: ``chain_ids`` (b,), ``targets`` / ``nodes`` (b, k) ids,
    ``disks`` (b,) disk index of each chain."""

    chain_ids: np.ndarray
    targets: np.ndarray
    nodes: np.ndarray
    disks: np.ndarray


def _lines(pattern: re.Pattern[str], text: str) -> tuple[str, int] | None:
    """``text`` (ending in a newline) and its line count when it is nothing but lines matching ``pattern``."""
    if not text.endswith("\n"):
        text += "\n"
    rest, count = pattern.subn("", text)
    if rest or not count:
        return None
    return text, count


def _runs(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and length of every run of ASCII digits in ``raw`` (bytes as uint8)."""
    digit = (raw - 48) <= 9  # uint8 wraps below '0'
    first = digit.copy()
    first[1:] &= ~digit[:-1]
    last = digit.copy()
    last[:-1] &= ~digit[1:]
    starts = np.flatnonzero(first)
    return starts, np.flatnonzero(last) + 1 - starts


def _values(raw: np.ndarray, starts: np.ndarray, length: np.ndarray) -> np.ndarray:
    if not len(starts):
        return np.zeros(0, dtype=np.int64)
    shortest, longest = int(length.min()), int(length.max())
    if shortest == longest:  # one length (a column of ids usually is): no masks
        total = np.zeros(len(starts), dtype=np.int64)
        for j in range(longest):
            total = total * 10 + raw[starts + j]
        return total - 48 * ((10**longest - 1) // 9)
    values = np.zeros(len(starts), dtype=np.int64)
    for size in np.unique(length).tolist():  # runs of one length together: no masks inside
        runs = np.flatnonzero(length == size)
        first = starts[runs]
        total = np.zeros(len(runs), dtype=np.int64)
        for j in range(size):  # the character codes as digits; '0' (48) in every place is taken off at the end
            total = total * 10 + raw[first + j]
        values[runs] = total - 48 * ((10**size - 1) // 9)
    return values


def _numbers(found: tuple[str, int], width: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Every run of ASCII digits in the lines (at most 18 long) as an int64, ``width`` to a line, and the
    first character of each line; None when the lines hold another count of numbers (e.g. chunk sizes). The
    text is taken ``_CHUNK_CHARS`` at a time (cut at line ends), so the work arrays stay small."""
    text, lines = found
    values, heads = [], []
    at = 0
    while at < len(text):
        cut = text.find("\n", min(len(text), at + _CHUNK_CHARS) - 1) + 1 or len(text)
        raw = np.frombuffer(text[at:cut].encode("ascii"), dtype=np.uint8)
        starts, length = _runs(raw)
        values.append(_values(raw, starts, length))
        heads.append(raw[np.r_[0, np.flatnonzero(raw == 10)[:-1] + 1]])
        at = cut
    flat = np.concatenate(values)
    if len(flat) != width * lines:
        return None
    return flat.reshape(lines, width), np.concatenate(heads)


def _laid_out(text: str, pieces: tuple[str, ...]) -> np.ndarray | None:
    """The numbers of ``text`` when it is nothing but ``pieces[0] N pieces[1] N ... pieces[-1]`` repeated (the
    last piece ends a line; N a run of 1..18 ASCII digits), as int64 (repeats, len(pieces) - 1); else None.

    The regexes' language restricted to the one layout dsctl writes, checked on arrays (3x the regexes' speed):
    the text without its digits must be the pieces repeated, and the digit runs must sit exactly where the N's
    are (none empty, split or inside a word). ``_CHUNK_CHARS`` at a time, cut after a whole repeat.
    """
    if not text.endswith("\n"):
        text += "\n"
    if not text.isascii():
        return None
    skeleton = np.frombuffer("".join(pieces).encode("ascii"), dtype=np.uint8)
    per = int(np.count_nonzero(skeleton == 10))  # lines per repeat
    if np.any((skeleton - 48) <= 9) or skeleton[-1] != 10:
        return None
    width, size = len(pieces) - 1, len(skeleton)
    place = np.cumsum([len(p) for p in pieces[:-1]])  # where each number sits in a repeat without its digits
    values = []
    at = 0
    while at < len(text):
        cut = text.find("\n", min(len(text), at + _CHUNK_CHARS) - 1) + 1 or len(text)
        if per > 1:  # whole repeats only
            for _ in range(per - 1 - (text.count("\n", at, cut) - 1) % per):
                cut = text.find("\n", cut) + 1 or len(text)
        raw = np.frombuffer(text[at:cut].encode("ascii"), dtype=np.uint8)
        at = cut
        digit = (raw - 48) <= 9
        rest = raw[~digit]
        repeats, odd = divmod(len(rest), size)
        if odd or not repeats or not np.array_equal(rest.reshape(repeats, size),
                                                     np.broadcast_to(skeleton, (repeats, size))):
            return None
        starts, length = _runs(raw)
        if len(starts) != repeats * width or int(length.max()) > 18:
            return None
        expected = (np.arange(repeats)[:, None] * size + place[None, :]).ravel()
        if not np.array_equal(starts - (np.cumsum(length) - length), expected):
            return None
        values.append(np.stack([_values(raw, starts[j::width], length[j::width]) for j in range(width)], axis=1))
    return np.concatenate(values)


def _chains(text: str) -> np.ndarray | None:
    head, _, body = text.partition("\n")
    cells = head.split(",")
    k = len(cells) - 1
    if k < 1 or cells[0] != "ChainId" or any(c != "TargetId" for c in cells[1:]):
        return None
    # the regex of these rows (k + 1 ids) is what _laid_out reads: no fallback (compiling it for a header of 10^6
    # columns took minutes)
    return _laid_out(body, ("",) + (",",) * k + ("\n",))


def _table(text: str) -> np.ndarray | None:
    """The chain ids of generated_chain_table.csv."""
    if not text.startswith("ChainId\n"):
        return None
    body = text[len("ChainId\n"):]
    ids = _laid_out(body, ("", "\n"))  # every line one id: _laid_out reads the regex's whole language
    return None if ids is None else ids[:, 0]


def _creates(text: str) -> np.ndarray | None:
    """node, disk, target and chain id of every create-target line."""
    fast = _laid_out(text, CREATE_PIECES)
    if fast is not None:
        return fast
    found = _lines(_CREATE, text)
    if found is None:
        return None
    numbers = _numbers(found, 4)
    return numbers[0] if numbers is not None else _create_fields(found[0])


def _removes(text: str) -> tuple[np.ndarray, np.ndarray] | None:
    """node and target id of every offline-/remove-target line, and True where it is offline-target."""
    fast = _laid_out(text, REMOVE_PIECES)
    if fast is not None:
        kinds = np.zeros(2 * len(fast), dtype=bool)
        kinds[::2] = True
        return fast.reshape(2 * len(fast), 2), kinds
    found = _lines(_REMOVE, text)
    numbers = None if found is None else _numbers(found, 2)
    return None if numbers is None else (numbers[0], numbers[1] == ord("o"))


def _same_set(a: np.ndarray, b: np.ndarray) -> bool:
    """True when ``a`` and ``b`` hold the same distinct values (``b`` is already known distinct)."""
    return len(a) == len(b) and bool(np.array_equal(np.sort(a), np.sort(b)))


def _create_fields(text: str) -> np.ndarray:
    """node, disk, target and chain id of every create-target line (lines with chunk sizes hold more numbers)."""
    fields = re.findall(r"--node-id ([0-9]+) --disk-index ([0-9]+) --target-id ([0-9]+) --chain-id ([0-9]+)", text)
    flat = (int(value) for row in fields for value in row)
    return np.fromiter(flat, dtype=np.int64, count=4 * len(fields)).reshape(len(fields), 4)


def read_sound(texts: dict[str, str | None]) -> TableArrays | None:
    """The table in ``texts`` when it is sound and in the written layout, else None (read it line by line)."""
    if any(texts.get(name) is None for name in (CHAINS, TABLE, CREATE, REMOVE)):
        return None
    chains = _chains(texts[CHAINS] or "")
    table = _table(texts[TABLE] or "")
    creates = _creates(texts[CREATE] or "")
    remove_n = _removes(texts[REMOVE] or "")
    if chains is None or table is None or creates is None or remove_n is None:
        return None
    removes, kinds = remove_n
    cids, targets = chains[:, 0], chains[:, 1:]
    b, k = targets.shape
    flat = targets.ravel()
    if cids.min() < 1 or cids.max() > UINT32_MAX or flat.min() < 1:
        return None
    by_target = np.argsort(flat, kind="stable")
    tid_sorted = flat[by_target]
    if np.any(np.diff(np.sort(cids)) == 0) or np.any(np.diff(tid_sorted) == 0):
        return None
    # create-target: each target of the chains once, with its chain; it encodes the node and disk it names
    # the files dsctl writes list targets in the chains' order: then the chains' sort fits them too
    order = by_target if np.array_equal(creates[:, 2], flat) else np.argsort(creates[:, 2], kind="stable")
    if len(creates) != flat.size or not np.array_equal(creates[order, 2], tid_sorted):
        return None
    if not np.array_equal(creates[order, 3], np.repeat(cids, k)[by_target]):
        return None
    node_sorted, disk_sorted = creates[order, 0], creates[order, 1]
    if not (np.array_equal((tid_sorted // 100_000) % 1_000_000, node_sorted)
            and np.array_equal((tid_sorted // 100) % 1_000 - 1, disk_sorted)):
        return None
    nodes_flat = np.empty_like(flat)
    disks_flat = np.empty_like(flat)
    nodes_flat[by_target], disks_flat[by_target] = node_sorted, disk_sorted
    nodes, disks = nodes_flat.reshape(b, k), disks_flat.reshape(b, k)
    if any(np.any(nodes[:, p] == nodes[:, q]) for p in range(k) for q in range(p + 1, k)):
        return None
    if np.any(disks != disks[:, :1]):
        return None
    coded = (cids // 100_000) % 1_000 - 1
    upstream = (cids >= MIN_UPSTREAM_CHAIN_ID) & (coded >= 0) & (cids % 100_000 >= 1)
    if np.any(upstream & (coded != disks[:, 0])):
        return None
    # the chain table: every chain once
    if table.min() < 1 or table.max() > UINT32_MAX or not _same_set(table, cids):
        return None
    # offline-target then remove-target of every target once, on its node
    line = np.arange(len(removes))
    first_line = {}
    for kind in (True, False):
        mine = kinds == kind
        tids, rnodes, lines = removes[mine, 1], removes[mine, 0], line[mine]
        pick = by_target if np.array_equal(tids, flat) else np.argsort(tids, kind="stable")
        if len(tids) != flat.size or not np.array_equal(tids[pick], tid_sorted):
            return None
        if not np.array_equal(rnodes[pick], node_sorted):
            return None
        first_line[kind] = lines[pick]
    if np.any(first_line[True] > first_line[False]):
        return None
    return TableArrays(cids, targets, nodes, disks[:, 0].copy())
