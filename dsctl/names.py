"""One validator for names that reach generated files, and one escaper per output format.

A *name* (a profile, job, partition, device or host name) ends up inside shell scripts, ``#SBATCH`` lines,
YAML manifests, Graphviz DOT, SVG and Slurm's ``topology.conf``. Names are checked against an allow-list with
``re.fullmatch`` (never ``re.match`` with ``$``, which accepts a trailing newline), so a name can never carry a
line break, a quote or a comment character into a file. Free text that is not a name (summaries, labels) is
escaped for its format instead: :func:`comment_text`, :func:`dot_string`, :func:`xml_text`.
"""

from __future__ import annotations

import re

from dsctl.errors import InputError

#: profile and node names (file names without ``.yaml``; 64 characters): letters, digits, ``._-``
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: a Slurm job, partition, account, QOS or reservation name (63 characters, as Slurm's name fields allow)
SLURM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
#: a node name as Slurm prints it after hostlist expansion (no brackets, no spaces, nothing a shell would expand):
#: the same rule as :data:`NAME`
NODE_NAME = NAME
#: words Slurm reads as more than one node where it takes a node list, compared without case as Slurm does:
#: ``ALL`` is every node (``scontrol update NodeName=ALL`` drains the cluster; src/slurmctld nodespec_to_hostlist),
#: ``DEFAULT`` sets defaults in slurm.conf (``NodeName=DEFAULT``). Site NodeSet names are not knowable here: a
#: drain confirms with Slurm that its name is exactly one node (dsctl.runners.slurm_nodes.node_drain_state)
SLURM_RESERVED_NODE_NAMES = frozenset({"all", "default"})
#: what a plain node name is, for error messages
NODE_NAME_RULE = ("a node name is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit, and not "
                  "ALL or DEFAULT (Slurm reads those as many nodes)")
#: a Slurm hostlist expression as typed (``gpu[001-016,020]``, comma-separated names), before expansion
HOSTLIST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._,\[\]-]{0,4095}")
#: a DNS-1123 label short enough that ``<name>-node-<i>-<j>`` pod names stay within 63 characters
K8S_NAME = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,38}[a-z0-9])?")
#: a host name or an IPv4/IPv6 address
HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9.:-]{0,252}")
#: a container image reference: ``registry/repo:tag`` or ``...@sha256:digest``
IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,511}")
#: device names from the topology templates: letters, digits, ``._-`` and ``:/@+`` (no ``#``, ``=``, quotes,
#: spaces, commas or control characters, which Slurm's topology.conf, CSV and DOT cannot carry)
DEVICE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._:/@+-]*")

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
_LINE_BREAK = re.compile(r"[\n\r\x0b\x0c\x85\u2028\u2029]")
#: what a terminal would act on inside one line of text: C0/C1 controls (ESC starts a sequence that can move the
#: cursor, retitle the window or clear the screen), CR, line/paragraph separators and lone surrogates
_TERMINAL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_text(text: str) -> str:
    """``text`` safe to show on a terminal: control characters, CR and lone surrogates become visible escapes
    (``\\x1b``, ``\\r``, ``\\ud800``); newlines and tabs stay. Every table cell passes through this
    (``dsctl.output.emit``)."""
    return _TERMINAL.sub(_escaped, text) if _TERMINAL.search(text) else text


def shown(value: object, limit: int = 40) -> str:
    """``repr`` of a user value cut to ``limit`` characters (a huge value never floods a message); a string is
    quoted, anything else shown as its ``repr``."""
    if not isinstance(value, str):
        text = repr(value)
        return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value):,} characters)"


def check_name(value: str, what: str, pattern: re.Pattern[str] = NAME, rule: str | None = None) -> str:
    """Return ``value`` if it fully matches ``pattern``; else raise InputError naming ``what`` and the rule."""
    if isinstance(value, str) and pattern.fullmatch(value):
        return value
    rule = rule or ("use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
                    if pattern is NAME else f"it must match {pattern.pattern}")
    raise InputError(f"{what} {shown(str(value))} is not a valid name: {rule}")


def plain_node_name(name: object) -> bool:
    """True when ``name`` names one Slurm node and nothing else: :data:`NODE_NAME` in full (no hostlist brackets,
    commas, spaces or shell characters, so a hostlist expands it to itself) and not a reserved word
    (:data:`SLURM_RESERVED_NODE_NAMES`, any case)."""
    return (isinstance(name, str) and NODE_NAME.fullmatch(name) is not None
            and name.lower() not in SLURM_RESERVED_NODE_NAMES)


def comment_text(text: str) -> str:
    """``text`` fit for one line of a shell or YAML comment: line breaks and control characters become ``?``."""
    return _CONTROL.sub("?", _LINE_BREAK.sub("?", text))


def dot_string(text: str) -> str:
    """A Graphviz double-quoted string (quotes included): backslashes, quotes and line breaks escaped."""
    body = comment_text(text.replace("\\", "\\\\").replace('"', '\\"'))
    return f'"{body}"'


def xml_text(text: str) -> str:
    """``text`` escaped for XML/SVG character data or a double-quoted attribute.

    XML 1.0 forbids most C0 control characters even as references; they (and lone surrogates) become U+FFFD.
    """
    text = _CONTROL.sub("\ufffd", text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace('"', "&quot;").replace("'", "&apos;")


def check_slurm_conf_name(value: str, what: str) -> str:
    """A name written into ``slurm.conf``/``topology.conf``: no whitespace, ``#`` (comment) or ``=`` (key)."""
    return check_name(value, what, DEVICE,
                      "Slurm configuration names are letters, digits and '._:/@+-' (no spaces, '#' or '=')")


#: longest integer literal an argument or a hostlist number may be: every count, size and id dsctl takes fits in
#: 64 bits (20 digits); a longer one (Python parses up to 4,300 digits) would only reach arithmetic and messages
#: that cannot print it. Checked (with :func:`ascii_digits`) before ``int()``.
MAX_INTEGER_DIGITS = 30


def ascii_digits(text: str) -> bool:
    """True when ``text`` is one or more ASCII digits 0-9. ``str.isdigit`` also accepts "¹" and "⓪", which
    ``int()`` then rejects (ValueError); every "is this a number" test on input text goes through here."""
    return text.isascii() and text.isdigit()


#: the longest digit run dsctl turns into an integer, from an option or from input text: every count, size and id
#: it handles fits in 64 bits (20 digits); Python's ``int()`` takes up to 4,300 digits (and above that raises
#: ValueError, which an unguarded parser turned into exit 4)
MAX_INTEGER_DIGITS = 30
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def bounded_int(text: str, what: str, max_digits: int = MAX_INTEGER_DIGITS, *, base: int = 10,
                signed: bool = False) -> int:
    """``text`` as an int, or InputError naming ``what``: the one integer rule for every parser of input text.

    Accepted: optional surrounding whitespace, a sign when ``signed``, then ASCII digits (``base=16``: hex
    digits, ``0x`` allowed; ``base=0``: decimal, or hex after ``0x``). The digit run is counted and refused above
    ``max_digits`` BEFORE ``int()`` runs, so no input reaches Python's 4,300-digit limit or its quadratic
    conversion. ``what`` is the message's start: the file, line and field (``"perf.txt line 3: Lid"``).
    """
    body = text.strip() if isinstance(text, str) else ""
    sign = ""
    if signed and body[:1] in ("-", "+"):
        sign, body = body[0], body[1:]
    radix = base
    if base == 0:
        radix = 16 if body[:2] in ("0x", "0X") else 10
    if radix == 16 and body[:2] in ("0x", "0X"):
        body = body[2:]
    ok = body.isascii() and (body.isdigit() if radix == 10 else bool(body) and _HEX_DIGITS.issuperset(body))
    if not ok:
        kind = "hexadecimal number" if radix == 16 else "whole number"
        raise InputError(f"{what} {shown(text)} is not a {kind}")
    if len(body) > max_digits:
        raise InputError(f"{what}: a number of {len(body):,} digits is out of range (at most {max_digits})")
    return int(sign + body, radix)


def last_digit_run(text: str) -> tuple[int, int] | None:
    r"""``(start, end)`` of the last run of ASCII digits in ``text`` (``swp17`` -> the ``17``), None without one.

    A scan from the end, linear in the text: the regex ``(\d+)\D*$`` it replaces backtracks quadratically with
    ``re.search`` (480 KB of digits ending in ``x1`` took 275 s).
    """
    end = len(text)
    while end and not "0" <= text[end - 1] <= "9":
        end -= 1
    start = end
    while start and "0" <= text[start - 1] <= "9":
        start -= 1
    return (start, end) if end else None
