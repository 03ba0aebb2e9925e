"""Port error counters from ``perfquery`` output or ibdiagnet's ``ibdiagnet2.db_csv`` PM_INFO section, and the
thresholds ``verify`` judges them by.

perfquery (infiniband-diags; format as in rdma-core's ``perfquery.c`` and the output kept as test data by
treydock/infiniband_exporter) prints one block per port::

    # Port counters: Lid 1719 port 1 (CapMask: 0x5300 CapMask2: 0x0000002)
    PortSelect:......................1
    SymbolErrorCounter:..............0
    LinkErrorRecoveryCounter:........0
    LinkDownedCounter:...............0
    PortRcvErrors:...................0

(``# Port extended counters:`` with ``-x``; the same field names). Several blocks may be concatenated, as
``perfquery -x -a`` or a loop over LIDs writes them. The port is named by LID; the ibnetdiscover dump maps
LIDs to devices.

Thresholds (defaults, all "greater than" since the counters were last cleared):

- SymbolErrorCounter > 10, PortRcvErrors > 10, LinkErrorRecoveryCounter > 10: ``error_counters``. ibqueryerrors
  reports any non-zero counter (its default threshold is 0, infiniband-diags man page); dsctl allows a few so
  that a burst while cables were being plugged does not flag a healthy port. Clear counters after cabling
  (``perfquery -x -R``) and collect after a load test.
- LinkDownedCounter > 1: ``link_downed`` (the link went down more than once: flapping, not a single re-plug).
- Effective BER > 1e-12 (ibdiagnet's BER test default threshold, ibdiagnet user manual 2.9-2.19), for rows
  that carry a BER.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from dsctl.errors import InputError
from dsctl.names import bounded_int


@dataclass(frozen=True)
class PortCounters:
    """Error counters of one port. ``lid`` (perfquery) or ``guid`` (16 hex digits) names the device."""

    source: str
    line: int
    lid: int
    guid: str
    port: int
    symbol_errors: int = 0
    link_recovers: int = 0
    link_downed: int = 0
    rcv_errors: int = 0
    effective_ber: float | None = None


@dataclass(frozen=True)
class Thresholds:
    """Largest healthy value of each counter since the last clear (see the module docstring for sources)."""

    symbol_errors: int = 10
    rcv_errors: int = 10
    link_recovers: int = 10
    link_downed: int = 1
    effective_ber: float = 1e-12


THRESHOLD_NAMES = ("symbol_errors", "rcv_errors", "link_recovers", "link_downed", "effective_ber")

_BLOCK = re.compile(r"^#\s*Port (?:extended )?counters:\s*Lid\s+([0-9]+)\s+port\s+([0-9]+)", re.IGNORECASE)
#: digits of a LID (16 bits), a port number (8 bits, with room) and a counter (64 bits, or 16 hex digits)
LID_DIGITS, PORT_DIGITS, COUNTER_DIGITS = 5, 3, 20
_FIELDS = {"SymbolErrorCounter": "symbol_errors", "LinkErrorRecoveryCounter": "link_recovers",
           "LinkDownedCounter": "link_downed", "PortRcvErrors": "rcv_errors"}


def _field(line: str) -> tuple[str, str] | None:
    r"""``(name, value)`` of a stripped ``Name:......value`` line, else None. Split by hand: the regex it replaces
    (``:\.*\s*(\S+)\s*$``) let the dots match two ways and backtracked quadratically on a long line of dots."""
    name, colon, rest = line.partition(":")
    if not colon or not name.isascii() or not name.isalnum():
        return None
    value = rest.lstrip(".").strip() or rest.strip()
    if not value or len(value.split(None, 1)) != 1:
        return None
    return name, value


def parse_perfquery(text: str, source: str = "--counters") -> list[PortCounters]:
    """Every ``# Port counters: Lid L port P`` block of perfquery output; InputError names a bad value's line."""
    rows: list[PortCounters] = []
    current: dict[str, int] | None = None
    head: tuple[int, int, int] = (0, 0, 0)

    def flush() -> None:
        if current is not None:
            rows.append(PortCounters(source, head[0], head[1], "", head[2], **current))

    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        block = _BLOCK.match(stripped)
        if block:
            flush()
            where = f"{source} line {number}"
            current, head = {}, (number, bounded_int(block.group(1), f"{where}: Lid", LID_DIGITS),
                                 bounded_int(block.group(2), f"{where}: port", PORT_DIGITS))
            continue
        found = _field(stripped) if current is not None else None
        if current is None or found is None or found[0] not in _FIELDS:
            continue
        current[_FIELDS[found[0]]] = bounded_int(found[1], f"{source} line {number}: {found[0]}", COUNTER_DIGITS,
                                                 base=0)
    flush()
    if not rows:
        raise InputError(f"{source} has no '# Port counters: Lid <lid> port <port>' block; is it perfquery output?")
    return rows


_PM_COLUMNS = {"symbolerrorcounter": "symbol_errors", "linkerrorrecoverycounter": "link_recovers",
               "linkdownedcounter": "link_downed", "portrcverrors": "rcv_errors"}


def is_db_csv(text: str) -> bool:
    """True if the text holds an ibdiagnet ``ibdiagnet2.db_csv`` ``START_PM_INFO`` section."""
    return "START_PM_INFO" in text[:4_000_000]


def parse_ibdiagnet_pm(text: str, source: str = "--counters") -> list[PortCounters]:
    """The ``START_PM_INFO`` .. ``END_PM_INFO`` section of ``ibdiagnet2.db_csv`` (``ibdiagnet --pc``/``-P``).

    A CSV with a header row; columns used: ``NodeGUID``, ``PortNumber`` (or ``PortNum``) and the four error
    counters under their perfquery names, with or without the ``Ext`` suffix newer ibdiagnet versions add
    (``LinkDownedCounterExt``); a column whose name contains ``EffectiveBER``/``Eff_BER`` is read as the
    port's effective BER. Ports are named by node GUID, so no plane pairing is needed. (Section and column
    names as read by public ibdiagnet post-processing scripts; NVIDIA documents the file, not its columns.)
    """
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "START_PM_INFO")
    except StopIteration:
        raise InputError(f"{source} has no START_PM_INFO section; is it ibdiagnet2.db_csv?") from None
    if start + 1 >= len(lines):
        raise InputError(f"{source} line {start + 1}: START_PM_INFO has no header row")
    header = [h.strip().lower() for h in lines[start + 1].split(",")]
    col = {name: i for i, name in enumerate(header)}
    guid_col = col.get("nodeguid")
    port_col = col.get("portnumber", col.get("portnum"))
    if guid_col is None or port_col is None:
        raise InputError(f"{source} line {start + 2}: the PM_INFO header has no NodeGUID/PortNumber column")
    counters = {field: col[name] for name, field in _PM_COLUMNS.items() if name in col}
    counters.update({field: col[name + "ext"] for name, field in _PM_COLUMNS.items() if name + "ext" in col})
    ber_col = next((i for i, h in enumerate(header) if "effectiveber" in h.replace("_", "")
                    or "effber" in h.replace("_", "")), None)
    rows: list[PortCounters] = []
    for number in range(start + 2, len(lines)):
        line = lines[number].strip()
        if line == "END_PM_INFO":
            break
        if not line:
            continue
        cells = [c.strip() for c in line.split(",")]
        where = f"{source} line {number + 1}"
        if len(cells) < len(header):
            raise InputError(f"{where}: a PM_INFO row has {len(cells)} cells, the header {len(header)}: {line[:80]!r}")
        values = {f: bounded_int(cells[i], f"{where}: {header[i]}", COUNTER_DIGITS, base=0)
                  if cells[i] not in ("", "N/A", "NA") else 0 for f, i in counters.items()}
        try:
            ber = float(cells[ber_col]) if ber_col is not None and cells[ber_col] not in ("", "N/A", "NA") else None
        except ValueError:
            raise InputError(f"{where}: a PM_INFO value is not a number: {line[:80]!r}") from None
        guid = cells[guid_col].lower().removeprefix("0x").rjust(16, "0")
        port = bounded_int(cells[port_col], f"{where}: {header[port_col]}", PORT_DIGITS, base=0)
        rows.append(PortCounters(source, number + 1, 0, guid, port, effective_ber=ber, **values))
    return rows


def parse_counters(text: str, source: str = "--counters") -> list[PortCounters]:
    """perfquery output or an ibdiagnet2.db_csv (by content)."""
    return parse_ibdiagnet_pm(text, source) if is_db_csv(text) else parse_perfquery(text, source)


def parse_thresholds(items: list[str]) -> Thresholds:
    """``NAME=VALUE`` items (``--threshold symbol_errors=0``) over the defaults; InputError on a bad item."""
    values: dict[str, float | int] = {}
    for item in items:
        name, _, value = item.partition("=")
        name = name.strip()
        if name not in THRESHOLD_NAMES:
            raise InputError(f"{item!r}: unknown counter; use one of {', '.join(THRESHOLD_NAMES)}",
                             field="threshold")
        if name == "effective_ber":
            try:
                number: float | int = float(value)
            except ValueError:
                raise InputError(f"{item!r}: {value!r} is not a number", field="threshold") from None
        else:
            number = bounded_int(value, f"--threshold {name}", COUNTER_DIGITS)
        if not math.isfinite(number) or number < 0:  # nan compares False with every BER: the check would be off
            raise InputError(f"{item!r}: a threshold is a finite number >= 0", field="threshold")
        values[name] = number
    return Thresholds(**values)  # type: ignore[arg-type]


def judge(row: PortCounters, limits: Thresholds) -> list[tuple[str, float, float, str]]:
    """(finding kind, value, limit, what) for each counter of ``row`` above its limit."""
    out: list[tuple[str, float, float, str]] = []
    if row.link_downed > limits.link_downed:
        out.append(("link_downed", row.link_downed, limits.link_downed, "LinkDownedCounter"))
    for name, what in (("symbol_errors", "SymbolErrorCounter"), ("rcv_errors", "PortRcvErrors"),
                       ("link_recovers", "LinkErrorRecoveryCounter")):
        value = getattr(row, name)
        if value > getattr(limits, name):
            out.append(("error_counters", value, getattr(limits, name), what))
    if row.effective_ber is not None and row.effective_ber > limits.effective_ber:
        out.append(("error_counters", row.effective_ber, limits.effective_ber, "effective BER"))
    return out
