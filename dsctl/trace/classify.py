"""Classify event names (compute, communication, memory) by the table of :mod:`dsctl.trace.kernels` and options.

Order of precedence for one name: ``--compute-pattern`` (compute), then the user's communication patterns
(``--comm-pattern`` replaces the table's communication families, ``--add-comm-pattern`` comes before them), then
the table (first matching family), else compute.

Regular expressions from options are user input matched against names from (possibly hostile) trace files, so
they are checked before use (:func:`check_pattern`): at most :data:`MAX_PATTERN_CHARS` characters, no
backreferences, no quantifier inside a quantified group (``(a+)+``: exponential backtracking) and at most
:data:`MAX_UNBOUNDED` unbounded quantifiers (``*``, ``+``, ``{n,}``; each one multiplies the worst case by the
name length). Names are matched on their first :data:`MAX_NAME_CHARS` characters, and the whole
classification of one trace has a time budget (:data:`REGEX_BUDGET_S`); past it, exit 2 names the option.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from dsctl.errors import InputError
from dsctl.trace.kernels import COMM, COMPUTE, DEFAULT_COMM_PATTERNS, FAMILIES, MEMORY

#: kept for callers that want the plain list of default communication regexes
DEFAULT_PATTERNS = DEFAULT_COMM_PATTERNS
MAX_PATTERN_CHARS = 200
MAX_UNBOUNDED = 2
MAX_NAME_CHARS = 1024
REGEX_BUDGET_S = 10.0
#: class codes in the per-name arrays
CLASS_CODE = {COMPUTE: 0, COMM: 1, MEMORY: 2}
CLASS_NAMES = (COMPUTE, COMM, MEMORY)

_NCCL_COLLECTIVE = re.compile(r"^(?:nccl|rccl|msccl)(?:Dev|Symk|SymkDev)?Kernel_([A-Za-z]+)")
try:  # the regex parser's private module moved in 3.11
    import re._parser as _sre_parse  # type: ignore[import-not-found]
    from re._constants import MAXREPEAT as _MAXREPEAT  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover
    import sre_parse as _sre_parse
    from sre_constants import MAXREPEAT as _MAXREPEAT

_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}


def _walk(items: object, depth_in_repeat: int, counts: dict[str, int]) -> None:
    """Count unbounded repeats, nested repeats and backreferences of a parsed pattern."""
    for op, arg in items:  # type: ignore[attr-defined]
        name = str(op)
        if name in _REPEATS:
            _lo, hi, sub = arg
            if depth_in_repeat and hi != 1:
                counts["nested"] += 1
            if hi == _MAXREPEAT:
                counts["unbounded"] += 1
            _walk(sub, depth_in_repeat + (hi != 1), counts)
        elif name in ("GROUPREF", "GROUPREF_EXISTS"):
            counts["backref"] += 1
        elif name == "SUBPATTERN":
            _walk(arg[-1], depth_in_repeat, counts)
        elif name == "BRANCH":
            for alt in arg[1]:
                _walk(alt, depth_in_repeat, counts)
        elif name in ("ASSERT", "ASSERT_NOT", "ATOMIC_GROUP"):
            _walk(arg[-1], depth_in_repeat, counts)


def check_pattern(pattern: str, option: str) -> re.Pattern[str]:
    """Compile one user regex after the safety checks of the module docstring; InputError names ``option``."""
    if not pattern.strip():
        raise InputError(f"{option} {pattern!r}: an empty pattern matches every event name",
                         hint="give a regular expression such as 'nccl|deep_ep'")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InputError(f"{option}: pattern of {len(pattern)} characters; at most {MAX_PATTERN_CHARS} allowed")
    try:
        compiled = re.compile(pattern)
        parsed = _sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise InputError(f"{option} {pattern!r}: not a valid regular expression ({exc})") from None
    counts = {"nested": 0, "unbounded": 0, "backref": 0}
    _walk(parsed, 0, counts)
    if counts["nested"]:
        raise InputError(f"{option} {pattern!r}: a repeated group contains another repeat (like '(a+)+'), which "
                         "can backtrack for ever on long names", hint="drop the inner or the outer quantifier")
    if counts["backref"]:
        raise InputError(f"{option} {pattern!r}: backreferences are not allowed in name patterns")
    if counts["unbounded"] > MAX_UNBOUNDED:
        raise InputError(f"{option} {pattern!r}: {counts['unbounded']} unbounded quantifiers (*, +, {{n,}}); at "
                         f"most {MAX_UNBOUNDED} allowed (each multiplies the matching time by the name length)")
    return compiled


def compile_patterns(patterns: Sequence[str], option: str = "--comm-pattern") -> re.Pattern[str]:
    """One compiled alternation of checked ``patterns`` (see :func:`check_pattern`)."""
    if not patterns:
        raise InputError(f"{option}: no patterns given; give at least one regular expression")
    for pattern in patterns:
        check_pattern(pattern, option)
    return re.compile("|".join(f"(?:{p})" for p in patterns))


@dataclass(frozen=True)
class Classifier:
    """How names are classified (picklable: plain strings; see the module docstring for the precedence).

    ``comm_patterns`` are the user's communication regexes; ``replace_table`` drops the table's communication
    families (``--comm-pattern``); ``compute_patterns`` force compute.
    """

    comm_patterns: tuple[str, ...] = ()
    compute_patterns: tuple[str, ...] = ()
    replace_table: bool = False
    comm_option: str = "--add-comm-pattern"

    @property
    def patterns(self) -> list[str]:
        """Every communication regex in effect, in precedence order (for the JSON output)."""
        table = [] if self.replace_table else list(DEFAULT_COMM_PATTERNS)
        return list(self.comm_patterns) + table

    def rules(self) -> list[tuple[str, str, re.Pattern[str]]]:
        """``(rule name, class, compiled regex)`` in precedence order."""
        out: list[tuple[str, str, re.Pattern[str]]] = []
        for p in self.compute_patterns:
            out.append(("--compute-pattern", COMPUTE, check_pattern(p, "--compute-pattern")))
        for p in self.comm_patterns:
            out.append((self.comm_option, COMM, check_pattern(p, self.comm_option)))
        for family in FAMILIES:
            if self.replace_table and family.cls != MEMORY:
                continue
            out.append((family.name, family.cls, re.compile(family.pattern)))
        return out


def make_classifier(comm_pattern: Sequence[str] | None = None, add_comm_pattern: Sequence[str] = (),
                    compute_pattern: Sequence[str] = ()) -> Classifier:
    """A checked :class:`Classifier` from the three options; bad regexes raise InputError naming the option."""
    replace = bool(comm_pattern)
    comm = tuple(comm_pattern or ()) + tuple(add_comm_pattern)
    classifier = Classifier(comm, tuple(compute_pattern), replace, "--comm-pattern" if replace else
                            "--add-comm-pattern")
    classifier.rules()  # validates every pattern now, before any file is read
    return classifier


def classify_names(names: Sequence[str], classifier: Classifier) -> tuple[NDArray[np.int8], list[str]]:
    """Class code (:data:`CLASS_CODE`) and matching rule name of each distinct name, shapes ``(len(names),)``.

    Raises InputError naming the option when the user's patterns exceed the time budget.
    """
    rules = classifier.rules()
    codes = np.zeros(len(names), dtype=np.int8)
    rule_of: list[str] = []
    started = time.perf_counter()
    for i, full in enumerate(names):
        name = full[:MAX_NAME_CHARS]
        which = "default"
        for rule, cls, regex in rules:
            if regex.search(name) is not None:
                codes[i] = CLASS_CODE[cls]
                which = rule
                break
        rule_of.append(which)
        if time.perf_counter() - started > REGEX_BUDGET_S:
            user = ", ".join(sorted({r for r, _, _ in rules if r.startswith("--")})) or "the patterns"
            raise InputError(f"{user}: classifying {len(names):,} kernel names took over {REGEX_BUDGET_S:g} s "
                             f"(stopped after {i + 1:,}); simplify the regular expression")
    return codes, rule_of


def collective_label(name: str, args_collective: str | None = None) -> str:
    """Short label of a communication event for the per-collective table.

    The profiler's ``"Collective name"`` argument wins (``allreduce``); else an NCCL kernel's collective
    (``ncclDevKernel_AllGather_RING_LL`` -> ``AllGather``); else the name without C++ template arguments.
    """
    if args_collective:
        return args_collective
    name = name.removeprefix("void ")
    match = _NCCL_COLLECTIVE.match(name)
    if match:
        return match.group(1)
    cut = len(name)
    for mark in ("<", "("):
        at = name.find(mark)
        if 0 < at < cut:
            cut = at
    return name[:cut][:80]
