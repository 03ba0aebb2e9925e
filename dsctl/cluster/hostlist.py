"""Slurm hostlists, dsctl's own grammar: ``node[0001-0004]`` -> ``node0001 ... node0004`` and back.

One parser for every ``-w/--nodelist`` and every hostlist dsctl writes; no ``scontrol`` (a login node or CI
image with Slurm's client installed but not configured cannot run ``scontrol show hostnames``). The grammar is
Slurm's, as ``scontrol show hostnames`` reads it (Slurm 22.05; tests/e2e/test_hostlist_scontrol_e2e.py compares):

- terms separated by commas outside brackets: ``gpu01,gpu02,n[1-4]``;
- a bracket group is a comma list of numbers and ranges ``lo-hi`` (``lo <= hi``); each number is written with
  at least as many digits as ``lo`` has (``[08-10]`` -> ``08 09 10``; ``[01-100]`` -> ``01 ... 99 100``);
- several groups in one term multiply out (``rack[1-2]-n[1-2]`` -> ``rack1-n1 rack1-n2 rack2-n1 rack2-n2``) in
  Slurm's order: the last group varies fastest, then the first, second, ... up to the one before the last
  varying slowest (``a[1-2]b[3-4]c[5-6]`` -> ``a1b3c5 a1b3c6 a2b3c5 a2b3c6 a1b4c5 ...``);
- nothing may follow a term's last ``]`` (Slurm refuses ``n[1-2]x``);
- names keep their order and repeats (``n[1-2],n1`` -> ``n1 n2 n1``); :func:`node_names` drops repeats.

dsctl is stricter than Slurm where Slurm guesses: blank terms (``a,,b``), spaces as separators, unbalanced
brackets (Slurm reads ``n[1-3`` as the name ``n]``) and a trailing comma in brackets (``n[1,]``) are refused.

Bounds, checked before any name is made: the expression's length (:data:`MAX_HOSTLIST_CHARS`), the digits of
each number (:data:`dsctl.names.MAX_INTEGER_DIGITS`; values below 2^64 as in Slurm), the node count
(:data:`MAX_NODES`, counted from the ranges) and each name's length (:data:`MAX_NAME_CHARS`), so an expansion
holds at most :data:`MAX_EXPANDED_CHARS` characters.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from dsctl.errors import InputError
from dsctl.names import MAX_INTEGER_DIGITS, ascii_digits, plain_node_name, shown

#: longest hostlist expression (characters): one argv string stays below Linux's 128 KiB
MAX_HOSTLIST_CHARS = 120 * 1024
#: most names one expression may expand to (a fleet, burn-in or trace run's nodes)
MAX_NODES = 65536
#: longest expanded name (characters): a node name (:data:`dsctl.names.NODE_NAME` allows 64)
MAX_NAME_CHARS = 64
#: most characters of one expansion (names and separators): MAX_NODES names of MAX_NAME_CHARS
MAX_EXPANDED_CHARS = MAX_NODES * (MAX_NAME_CHARS + 1)
#: Slurm reads each number as a C unsigned long
_NUMBER_LIMIT = 2**64
#: characters a hostlist may hold: node-name characters, brackets and commas (one class: no backtracking)
_CHARACTERS = re.compile(r"[A-Za-z0-9._,\[\]-]*")
_SPECIAL = re.compile(r"[\[\],]")
_HINT = "use names and ranges such as node[0001-0016], rack[1-2]-n[01-08] or gpu01,gpu02"


@dataclass(frozen=True)
class _Range:
    """``lo``..``hi`` written with at least ``width`` digits."""

    lo: int
    hi: int
    width: int

    @property
    def count(self) -> int:
        return self.hi - self.lo + 1


@dataclass(frozen=True)
class _Term:
    """One comma-separated term: ``texts[0] [groups[0]] texts[1] [groups[1]] ...`` (``len(texts) ==
    len(groups) + 1``; the last text is empty when there is a group)."""

    texts: tuple[str, ...]
    groups: tuple[tuple[_Range, ...], ...]


def expand(expression: str, *, option: str = "--nodelist", max_names: int = MAX_NODES) -> list[str]:
    """Every name of ``expression`` in Slurm's order, repeats kept (``n[1-2],n1`` -> ``[n1, n2, n1]``).

    Raises InputError naming ``option`` for anything outside the grammar (module docstring) or past the bounds:
    more than ``max_names`` names, a name over MAX_NAME_CHARS characters. Cost: O(len(expression) + names)."""
    terms = _bounded_terms(expression, option, max_names)
    names: list[str] = []
    for term in terms:
        names.extend(_names(term))
    return names


def node_names(expression: str, *, option: str = "--nodelist", max_names: int = MAX_NODES) -> list[str]:
    """The nodes a ``-w/--nodelist`` names: :func:`expand`, first occurrence of each, every one a plain node
    name (:data:`dsctl.names.NODE_NAME`)."""
    return unique_names(expand(expression, option=option, max_names=max_names), option=option)


def unique_names(names: Iterable[str], *, option: str = "--nodes") -> list[str]:
    """Names in first-seen order without repeats; each must be a plain node name (see ``NODE_NAME``)."""
    out: dict[str, None] = {}
    for name in names:
        if not valid_node_name(name):
            raise InputError(f"{option}: {shown(name)} is not a node name",
                             hint="node names are letters, digits, '.', '_' and '-' (at most 64)")
        out[name] = None
        if len(out) > MAX_NODES:
            raise InputError(f"{option}: more than {MAX_NODES:,} nodes; at most {MAX_NODES:,} in one run")
    return list(out)


def valid_node_name(name: str) -> bool:
    """One plain node name (:func:`dsctl.names.plain_node_name`: the name rule, and not ``ALL``/``DEFAULT``)."""
    return plain_node_name(name)


def count(expression: str, *, option: str = "--nodelist", max_names: int = MAX_NODES) -> int:
    """How many names :func:`expand` gives (repeats counted), from the ranges alone; InputError as expand."""
    return sum(_count(term, max_names) for term in _bounded_terms(expression, option, max_names))


def compress(names: Iterable[str]) -> str:
    """A hostlist whose :func:`expand` is ``names``, in order, repeats included
    (``node0001,node0002,node0003,node0007`` -> ``node[0001-0003,0007]``; ``node3,node4,node1`` -> ``node[3-4,1]``).

    Consecutive names that differ only in their trailing number (same prefix, same digit count) share one
    bracket group; runs of +1 steps become ranges; never longer than the names joined by commas. Names not
    ending in a digit are listed as they are (Slurm allows nothing after a ``]``). Raises ValueError for an
    empty name or one holding ``,``, ``[`` or ``]``: callers hand validated node or device names."""
    parts: list[str] = []
    key: tuple[str, int] | None = None
    ranges: list[list[int]] = []

    def flush() -> None:
        if key is None:
            return
        prefix, width = key
        texts = [f"{lo:0{width}d}" if lo == hi else f"{lo:0{width}d}-{hi:0{width}d}" for lo, hi in ranges]
        grouped = f"{prefix}[{','.join(texts)}]"
        count = sum(hi - lo + 1 for lo, hi in ranges)
        if count * (len(prefix) + width + 1) - 1 <= len(grouped):  # brackets only where they are shorter
            parts.extend(f"{prefix}{n:0{width}d}" for lo, hi in ranges for n in range(lo, hi + 1))
        else:
            parts.append(grouped)

    for name in names:
        if not name or any(c in name for c in ",[]"):
            raise ValueError(f"{shown(name)} cannot stand in a hostlist")
        prefix, digits = split_number(name)
        if not digits:
            flush()
            key, ranges = None, []
            parts.append(name)
            continue
        value = int(digits)
        if key == (prefix, len(digits)):
            if value == ranges[-1][1] + 1:
                ranges[-1][1] = value
            else:
                ranges.append([value, value])
            continue
        flush()
        key, ranges = (prefix, len(digits)), [[value, value]]
    flush()
    return ",".join(parts)


def split_number(name: str) -> tuple[str, str]:
    """(prefix, trailing ASCII digits) of ``name``; digits "" when it does not end in one."""
    end = len(name)
    start = end
    while start > 0 and "0" <= name[start - 1] <= "9":
        start -= 1
    return name[:start], name[start:end]


def _parse(expression: str, option: str) -> list[_Term]:
    if len(expression) > MAX_HOSTLIST_CHARS:
        raise InputError(f"{option}: hostlist of {len(expression):,} characters; at most {MAX_HOSTLIST_CHARS:,}",
                         hint="give a shorter expression (ranges: node[00001-65536])")
    text = expression.strip()
    if not text:
        raise InputError(f"{option}: empty hostlist", hint=_HINT)
    if not _CHARACTERS.fullmatch(text):
        bad = next(c for c in text if not _CHARACTERS.fullmatch(c))
        raise InputError(f"{option} {shown(expression)}: {bad!r} cannot stand in a hostlist (names are letters, "
                         "digits, '.', '_' and '-'; ',' separates them, [ ] hold ranges)", hint=_HINT)
    return [_parse_term(term, expression, option) for term in _split_terms(text, expression, option)]


def _split_terms(text: str, expression: str, option: str) -> list[str]:
    """``text`` cut at the commas outside brackets; brackets balanced and never nested."""
    terms: list[str] = []
    start = 0
    inside = False
    for match in _SPECIAL.finditer(text):
        pos, char = match.start(), match.group()
        if char == "[":
            if inside:
                raise InputError(f"{option} {shown(expression)}: '[' inside brackets at character {pos + 1}",
                                 hint=_HINT)
            inside = True
        elif char == "]":
            if not inside:
                raise InputError(f"{option} {shown(expression)}: ']' without '[' at character {pos + 1}",
                                 hint=_HINT)
            inside = False
        elif char == "," and not inside:
            terms.append(text[start:pos])
            start = pos + 1
    if inside:
        raise InputError(f"{option} {shown(expression)}: '[' is never closed", hint=_HINT)
    terms.append(text[start:])
    for term in terms:
        if not term:
            raise InputError(f"{option} {shown(expression)}: an empty name between commas", hint=_HINT)
    return terms


def _parse_term(term: str, expression: str, option: str) -> _Term:
    texts: list[str] = []
    groups: list[tuple[_Range, ...]] = []
    rest = term
    while True:
        open_at = rest.find("[")
        if open_at < 0:
            texts.append(rest)
            break
        close_at = rest.index("]", open_at)  # balanced: _split_terms checked
        texts.append(rest[:open_at])
        groups.append(tuple(_parse_range(part, expression, option)
                            for part in rest[open_at + 1:close_at].split(",")))
        rest = rest[close_at + 1:]
    if groups and texts[-1]:
        raise InputError(f"{option} {shown(expression)}: {shown(term)} goes on after its last ']' (Slurm "
                         "refuses that)", hint="list such names one by one: n1x,n2x")
    return _Term(tuple(texts), tuple(groups))


def _parse_range(part: str, expression: str, option: str) -> _Range:
    if not part:
        raise InputError(f"{option} {shown(expression)}: an empty entry in brackets", hint=_HINT)
    low, dash, high = part.partition("-")
    for digits in (low, high) if dash else (low,):
        if not ascii_digits(digits):
            raise InputError(f"{option} {shown(expression)}: {shown(part)} in brackets is not a number or a "
                             "range lo-hi", hint=_HINT)
        if len(digits) > MAX_INTEGER_DIGITS:
            raise InputError(f"{option} {shown(expression)}: a number of {len(digits):,} digits in brackets; at "
                             f"most {MAX_INTEGER_DIGITS}", hint=_HINT)
    lo = int(low)
    hi = int(high) if dash else lo
    if hi >= _NUMBER_LIMIT:
        raise InputError(f"{option} {shown(expression)}: {shown(part)} is past Slurm's largest number (2^64-1)",
                         hint=_HINT)
    if lo > hi:
        raise InputError(f"{option} {shown(expression)}: range {shown(part)} runs backwards", hint=_HINT)
    return _Range(lo, hi, len(low))


def _bounded_terms(expression: str, option: str, max_names: int) -> list[_Term]:
    """The parsed terms of ``expression`` once its name count and longest name are known to be within bounds
    (computed from the ranges: nothing is expanded)."""
    terms = _parse(expression, option)
    total = 0
    for term in terms:
        total += _count(term, max_names - total)
        if total > max_names:
            raise InputError(f"{option} {shown(expression)}: more than {max_names:,} names; at most "
                             f"{max_names:,} in one run", hint="split the nodes over several runs")
        longest = sum(map(len, term.texts)) + sum(
            max(max(r.width, len(str(r.hi))) for r in group) for group in term.groups)
        if longest > MAX_NAME_CHARS:
            raise InputError(f"{option} {shown(expression)}: a name of {longest:,} characters; node names have "
                             f"at most {MAX_NAME_CHARS}", hint=_HINT)
    return terms


def _count(term: _Term, room: int) -> int:
    """Names of ``term``; stops multiplying once past ``room`` (any value over ``room`` means too many)."""
    total = 1
    for group in term.groups:
        total *= sum(r.count for r in group)
        if total > room:
            return room + 1
    return total


def _names(term: _Term) -> list[str]:
    """The names of one term in Slurm's order (module docstring): the groups before the last vary from the
    one before the last (slowest) down to the first, then the last group (fastest)."""
    if not term.groups:
        return [term.texts[0]]
    values = [[f"{n:0{r.width}d}" for r in group for n in range(r.lo, r.hi + 1)] for group in term.groups]
    if len(values) == 1:
        return [term.texts[0] + value for value in values[0]]
    last = len(values) - 1
    order = [*range(last - 1, -1, -1), last]
    names = []
    slot = [""] * len(values)
    for combination in itertools.product(*(values[i] for i in order)):
        for index, value in zip(order, combination, strict=True):
            slot[index] = value
        names.append("".join(itertools.chain.from_iterable(zip(term.texts, [*slot, ""], strict=True))))
    return names
