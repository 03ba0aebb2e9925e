"""A bounded interpreter for the pickle subset ``torch.save`` writes (protocol 2; protocol-4 framing accepted).

Python's unpickler trusts the stream: a memo index sizes an array (2^27 from 257 bytes: 2.1 GB), the stack grows
with every opcode (60 MiB of ``]``: 4.6 GB), a chain of 1-tuples nests without limit (hashing or printing it
overflows the C stack), and BUILD sets state on whatever it finds. This interpreter runs only opcodes that build
plain data: None, bools, ints of at most 64 bits, floats, str, tuples, lists and dicts; memo get/put; MARK; GLOBAL
(resolved by the caller's allow-list to its own stand-ins), REDUCE (only of what that allow-list returned, through
the caller's ``call``) and BINPERSID (the caller's ``persistent_load``). Nothing else runs: no BUILD, INST, OBJ,
NEWOBJ, EXT or POP; APPEND(S) only into lists and SETITEM(S) only into dicts the pickle made itself, never into
a container already placed inside another (so nesting depths stay exact and no cycle forms but a list or dict in
itself, which is refused too).

Every count is checked before the work: :data:`MAX_OPCODES`, :data:`MAX_STACK_ITEMS` (stack items plus open marks),
:data:`MAX_OBJECTS` (values pushed, memo reads included), :data:`MAX_MEMO_INDEX` (memo indices), :data:`MAX_NESTING`
(containers inside containers), and dict keys are scalars or flat tuples of at most :data:`MAX_KEY_ITEMS` scalars.
The pickle itself is bounded by the caller (``torch_dump.MAX_PICKLE_BYTES``), which bounds the time: one pass.
"""

from __future__ import annotations

import pickletools
import struct
from collections.abc import Callable
from typing import Any

from dsctl.errors import InputError

#: most items on the stack, open MARKs included (torch pickles hold a few per nesting level; SETITEMS batches 1,000)
MAX_STACK_ITEMS = 100_000
#: most values pushed in all (new values and memo reads): bounds memory at a few tens of MB
MAX_OBJECTS = 200_000
#: most opcodes run (a value and its memo put are two; bounds the time of the one pass at ~1.5 s)
MAX_OPCODES = 1_000_000
#: memo indices must be below this (the memo is a dict: only the entries put cost memory)
MAX_MEMO_INDEX = 200_000
#: most levels of containers inside containers (an SGLang dump has 3: dict, tensor args tuple, size tuple)
MAX_NESTING = 64
#: most items in a tuple used as a dict key (keys are str, int, float, bool, None or flat tuples of those)
MAX_KEY_ITEMS = 16
#: most bytes of a LONG1 integer (torch writes sizes, strides and offsets; none needs more than 64 bits)
MAX_INT_BYTES = 8
#: most characters of a GLOBAL's module or name
MAX_GLOBAL_CHARS = 200

_NAMES = {op.code: op.name for op in pickletools.opcodes}
_SCALARS = (str, int, float, bool, type(None))
_CONTAINERS = (list, dict, tuple)


class PickleVM:
    """One run of the interpreter over ``data`` (the pickle's bytes); ``name`` starts every message.

    ``resolve(module, name)`` returns the stand-in for an allowed global (or raises InputError);
    ``call(func, args)`` runs a REDUCE of a stand-in; ``persistent_load(pid)`` resolves a BINPERSID id.
    """

    def __init__(self, data: bytes, name: str, resolve: Callable[[str, str], Any],
                 call: Callable[[Any, tuple[Any, ...]], Any], persistent_load: Callable[[Any], Any]) -> None:
        self._data, self._name = data, name
        self._resolve, self._call, self._persistent_load = resolve, call, persistent_load
        self._pos = 0
        self._stack: list[Any] = []
        self._marks: list[int] = []
        self._memo: dict[int, Any] = {}
        self._pushed = 0
        self._depth: dict[int, int] = {}  # id of a container made here -> levels of nesting it holds (1 = flat)
        self._placed: set[int] = set()  # ids of lists/dicts already inside another container (no more changes)
        self._keep: list[Any] = []  # every container made here, so that no id is reused during the run

    def fail(self, what: str) -> InputError:
        return InputError(f"{self._name}: refused to load: {what} (pickle byte {self._pos:,})")

    # -- reading the stream ------------------------------------------------------------------------------------
    def _take(self, count: int, opname: str) -> bytes:
        end = self._pos + count
        if count < 0 or end > len(self._data):
            raise self.fail(f"the pickle ends inside {opname}")
        chunk = self._data[self._pos:end]
        self._pos = end
        return chunk

    def _line(self, opname: str) -> str:
        end = self._data.find(b"\n", self._pos, self._pos + MAX_GLOBAL_CHARS + 1)
        if end < 0:
            raise self.fail(f"{opname} names a module or global longer than {MAX_GLOBAL_CHARS} characters, or the "
                            "pickle ends inside it")
        text = self._data[self._pos:end].decode("latin-1")
        self._pos = end + 1
        return text

    def _text(self, count: int, opname: str) -> str:
        raw = self._take(count, opname)
        try:
            return raw.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            raise self.fail(f"{opname} holds text that is not UTF-8") from None

    # -- the stack ---------------------------------------------------------------------------------------------
    def _push(self, value: Any) -> None:
        if len(self._stack) + len(self._marks) >= MAX_STACK_ITEMS:
            raise self.fail(f"the pickle's stack grows beyond {MAX_STACK_ITEMS:,} items")
        self._pushed += 1
        if self._pushed > MAX_OBJECTS:
            raise self.fail(f"the pickle builds more than {MAX_OBJECTS:,} values")
        self._stack.append(value)

    def _pop(self, opname: str) -> Any:
        if len(self._stack) <= (self._marks[-1] if self._marks else 0):
            raise self.fail(f"{opname} finds the stack empty")
        return self._stack.pop()

    def _pop_mark(self, opname: str) -> list[Any]:
        if not self._marks:
            raise self.fail(f"{opname} finds no MARK")
        start = self._marks.pop()
        items = self._stack[start:]
        del self._stack[start:]
        return items

    def _top(self, opname: str) -> Any:
        if len(self._stack) <= (self._marks[-1] if self._marks else 0):
            raise self.fail(f"{opname} finds the stack empty")
        return self._stack[-1]

    # -- containers --------------------------------------------------------------------------------------------
    def _levels(self, value: Any) -> int:
        return self._depth.get(id(value), 1) if isinstance(value, _CONTAINERS) else 0

    def _made(self, container: Any, levels: int) -> Any:
        if levels > MAX_NESTING:
            raise self.fail(f"containers nest deeper than {MAX_NESTING} levels")
        self._depth[id(container)] = levels
        self._placed.discard(id(container))
        self._keep.append(container)
        return container

    def _place(self, value: Any) -> None:
        """``value`` goes inside a container: a list or dict is frozen from now on (its depth is final)."""
        if isinstance(value, (list, dict)):
            self._placed.add(id(value))

    def _tuple(self, items: list[Any]) -> tuple[Any, ...]:
        for item in items:
            self._place(item)
        return self._made(tuple(items), 1 + max((self._levels(i) for i in items), default=0))

    def _target(self, container: Any, kind: type, opname: str) -> None:
        if type(container) is not kind and not (kind is dict and isinstance(container, dict)):
            raise self.fail(f"{opname} into a {type(container).__name__} (only into a {kind.__name__} the pickle "
                            "made)")
        if id(container) in self._placed or id(container) not in self._depth:
            raise self.fail(f"{opname} into a {kind.__name__} that is already inside another container")

    def _grow(self, container: Any, items: list[Any]) -> None:
        levels = self._depth[id(container)]
        for item in items:
            if item is container:
                raise self.fail("a container is placed inside itself")
            levels = max(levels, 1 + self._levels(item))
            if levels > MAX_NESTING:
                raise self.fail(f"containers nest deeper than {MAX_NESTING} levels")
            self._place(item)
        self._depth[id(container)] = levels

    def _check_key(self, key: Any) -> None:
        if type(key) in _SCALARS:
            return
        if type(key) is tuple and len(key) <= MAX_KEY_ITEMS and all(type(k) in _SCALARS for k in key):
            return
        raise self.fail(f"a dict key is a {type(key).__name__} (keys must be strings, numbers, None or flat tuples "
                        f"of at most {MAX_KEY_ITEMS} of those)")

    def _append(self, items: list[Any], opname: str) -> None:
        target = self._top(opname)
        self._target(target, list, opname)
        self._grow(target, items)
        target.extend(items)

    def _setitems(self, items: list[Any], opname: str) -> None:
        if len(items) % 2:
            raise self.fail(f"{opname} has a key without a value")
        target = self._top(opname)
        self._target(target, dict, opname)
        keys, values = items[0::2], items[1::2]
        for key in keys:
            self._check_key(key)
        self._grow(target, values)
        for key, value in zip(keys, values, strict=True):
            target[key] = value

    # -- the memo ----------------------------------------------------------------------------------------------
    def _put(self, index: int) -> None:
        if index >= MAX_MEMO_INDEX:
            raise self.fail(f"memo index {index:,} is not below {MAX_MEMO_INDEX:,}")
        self._memo[index] = self._top("a memo put")

    def _get(self, index: int) -> None:
        if index not in self._memo:
            raise self.fail(f"memo index {index:,} was never put")
        self._push(self._memo[index])

    # -- the loop ----------------------------------------------------------------------------------------------
    def run(self) -> Any:
        """The pickled object; InputError naming the file and byte for anything outside the subset or its bounds."""
        data = self._data
        for _ in range(MAX_OPCODES):
            if self._pos >= len(data):
                raise self.fail("the pickle ends without STOP")
            start = self._pos
            code = chr(data[start])
            self._pos += 1
            if code == ".":
                value = self._pop("STOP")
                return value
            handler = _HANDLERS.get(code)
            if handler is None:
                opname = _NAMES.get(code, f"byte 0x{ord(code):02x}")
                self._pos = start
                raise self.fail(f"pickle opcode {opname} is not one torch.save writes for tensors and plain data")
            handler(self)
        raise self.fail(f"the pickle runs more than {MAX_OPCODES:,} opcodes")

    def _op_proto(self) -> None:
        if self._take(1, "PROTO")[0] > 5:
            raise self.fail("unknown pickle protocol")

    def _op_frame(self) -> None:
        self._take(8, "FRAME")

    def _op_mark(self) -> None:
        if len(self._stack) + len(self._marks) >= MAX_STACK_ITEMS:
            raise self.fail(f"the pickle's stack grows beyond {MAX_STACK_ITEMS:,} items")
        self._marks.append(len(self._stack))

    def _op_empty_tuple(self) -> None:
        self._push(self._tuple([]))

    def _op_tuple(self) -> None:
        self._push(self._tuple(self._pop_mark("TUPLE")))

    def _tuple_n(self, count: int) -> None:
        items = [self._pop(f"TUPLE{count}") for _ in range(count)][::-1]
        self._push(self._tuple(items))

    def _op_empty_list(self) -> None:
        self._push(self._made([], 1))

    def _op_list(self) -> None:
        items = self._pop_mark("LIST")
        made = self._made([], 1)
        self._grow(made, items)
        made.extend(items)
        self._push(made)

    def _op_empty_dict(self) -> None:
        self._push(self._made({}, 1))

    def _op_dict(self) -> None:
        items = self._pop_mark("DICT")
        self._push(self._made({}, 1))
        self._setitems(items, "DICT")

    def _op_append(self) -> None:
        self._append([self._pop("APPEND")], "APPEND")

    def _op_appends(self) -> None:
        self._append(self._pop_mark("APPENDS"), "APPENDS")

    def _op_setitem(self) -> None:
        value = self._pop("SETITEM")
        key = self._pop("SETITEM")
        self._setitems([key, value], "SETITEM")

    def _op_setitems(self) -> None:
        self._setitems(self._pop_mark("SETITEMS"), "SETITEMS")

    def _op_int(self, size: int, fmt: str, opname: str) -> None:
        self._push(struct.unpack(fmt, self._take(size, opname))[0])

    def _op_long1(self) -> None:
        count = self._take(1, "LONG1")[0]
        if count > MAX_INT_BYTES:
            raise self.fail(f"an integer of {count} bytes (at most {MAX_INT_BYTES}: 64 bits)")
        self._push(int.from_bytes(self._take(count, "LONG1"), "little", signed=True))

    def _op_unicode(self, size: int, fmt: str, opname: str) -> None:
        count = struct.unpack(fmt, self._take(size, opname))[0]
        self._push(self._text(count, opname))

    def _op_global(self) -> None:
        module = self._line("GLOBAL")
        name = self._line("GLOBAL")
        self._push(self._resolve(module, name))

    def _op_stack_global(self) -> None:
        name = self._pop("STACK_GLOBAL")
        module = self._pop("STACK_GLOBAL")
        if type(module) is not str or type(name) is not str or max(len(module), len(name)) > MAX_GLOBAL_CHARS:
            raise self.fail(f"STACK_GLOBAL of something that is not a name of at most {MAX_GLOBAL_CHARS} characters")
        self._push(self._resolve(module, name))

    def _op_reduce(self) -> None:
        args = self._pop("REDUCE")
        func = self._pop("REDUCE")
        if type(args) is not tuple:
            raise self.fail("REDUCE with arguments that are not a tuple")
        result = self._call(func, args)
        if isinstance(result, (list, dict)):
            if result:
                raise self.fail("a rebuild function returned a non-empty container")
            self._made(result, 1)
        self._push(result)

    def _op_persid(self) -> None:
        pid = self._pop("BINPERSID")
        self._place(pid)
        self._push(self._persistent_load(pid))

    def _op_memoize(self) -> None:
        self._put(len(self._memo))


def _int_op(size: int, fmt: str, opname: str) -> Callable[[PickleVM], None]:
    return lambda vm: vm._op_int(size, fmt, opname)


def _unicode_op(size: int, fmt: str, opname: str) -> Callable[[PickleVM], None]:
    return lambda vm: vm._op_unicode(size, fmt, opname)


def _memo_op(size: int, fmt: str, opname: str, put: bool) -> Callable[[PickleVM], None]:
    def run(vm: PickleVM) -> None:
        index = struct.unpack(fmt, vm._take(size, opname))[0]
        if put:
            vm._put(index)
        else:
            vm._get(index)
    return run


_HANDLERS: dict[str, Callable[[PickleVM], None]] = {
    "\x80": PickleVM._op_proto, "\x95": PickleVM._op_frame, "(": PickleVM._op_mark,
    ")": PickleVM._op_empty_tuple, "t": PickleVM._op_tuple,
    "\x85": lambda vm: vm._tuple_n(1), "\x86": lambda vm: vm._tuple_n(2), "\x87": lambda vm: vm._tuple_n(3),
    "]": PickleVM._op_empty_list, "l": PickleVM._op_list, "}": PickleVM._op_empty_dict, "d": PickleVM._op_dict,
    "a": PickleVM._op_append, "e": PickleVM._op_appends, "s": PickleVM._op_setitem, "u": PickleVM._op_setitems,
    "N": lambda vm: vm._push(None), "\x88": lambda vm: vm._push(True), "\x89": lambda vm: vm._push(False),
    "J": _int_op(4, "<i", "BININT"), "K": _int_op(1, "<B", "BININT1"), "M": _int_op(2, "<H", "BININT2"),
    "\x8a": PickleVM._op_long1, "G": _int_op(8, ">d", "BINFLOAT"),
    "X": _unicode_op(4, "<I", "BINUNICODE"), "\x8c": _unicode_op(1, "<B", "SHORT_BINUNICODE"),
    "\x8d": _unicode_op(8, "<Q", "BINUNICODE8"),
    "c": PickleVM._op_global, "\x93": PickleVM._op_stack_global, "R": PickleVM._op_reduce,
    "Q": PickleVM._op_persid,
    "q": _memo_op(1, "<B", "BINPUT", True), "r": _memo_op(4, "<I", "LONG_BINPUT", True),
    "\x94": PickleVM._op_memoize,
    "h": _memo_op(1, "<B", "BINGET", False), "j": _memo_op(4, "<I", "LONG_BINGET", False),
}
