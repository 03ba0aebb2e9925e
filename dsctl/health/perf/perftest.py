"""Parse perftest bandwidth reports (``ib_write_bw``, ``ib_read_bw``, ``ib_send_bw``, ``ib_atomic_bw``), every
header variant since perftest 4.x.

A report is a title line (``RDMA_Write BW Test``, ``Send Bidirectional BW Test``, ``RDMA_Write Post List BW Test``),
the parameter block (``Device : mlx5_0``, ``Link type : IB``, ``Number of qps``, ``Dual-port``), the local and remote
addresses (LID, GID) and a result table whose header is

    #bytes [#sl] #iterations BW peak[UNIT] BW average[UNIT] MsgRate[Mpps] [per-port columns] [CPU_Util[%]]

with UNIT ``MiB/sec`` (the default since perftest 24.07, commit 1d202bb / PR #257), ``MB/sec`` (the same number
before it: perftest's ``format_factor`` is 0x100000 bytes for both) or ``Gb/sec`` (``--report_gbits``: 10^9 bit/s).
One row per message size (``-a`` sweeps sizes); a dashed line ends the table. Lines perftest writes to stderr land
anywhere when both streams are captured: ``Conflicting CPU frequency values detected: A != B. CPU Frequency is not
max.`` (get_clock.c) and `` WARNING: BW peak won't be measured in this run.`` are kept as warnings, never read as
rows. In a bidirectional test (``-b``) both sides print the sum of both directions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dsctl.errors import InputError

_HEADER = re.compile(r"#bytes\s+(#sl\s+)?#iterations\s+BW peak\[(Gb|MiB|MB)/sec\]\s+BW average\[(Gb|MiB|MB)/sec\]"
                     r"\s+MsgRate\[Mpps\](.*)$")
_HEADER_START = re.compile(r"#bytes\s+(#sl\s+)?#iterations\s+BW peak\[(Gb|MiB|MB)/sec\]")
_TITLE = re.compile(r"^\s{0,40}(\S.{0,80}?)\s+BW Test\s*$")
_PARAM = re.compile(r"(Device|Link type|Number of qps|Dual-port|Transport type)\s*:\s*(\S{1,64})")
_ADDRESS = re.compile(r"^\s*(local|remote) address:\s*LID\s+(\S{1,16})")
_GID = re.compile(r"^\s*GID:\s*(\S{1,80})\s*$")
_CPU_WARNING = re.compile(r"Conflicting CPU frequency values detected|CPU Frequency is not max|"
                          r"BW peak won't be measured")
#: a numeric field: digit runs bounded so that no value reaches int()'s 4,300-digit limit or float overflow
_NUMBER = re.compile(r"[0-9]{1,20}(\.[0-9]{1,20})?")
#: Gb/s per reported unit: MiB and MB are both 2^20 bytes (format_factor 0x100000)
UNIT_GBPS = {"Gb": 1.0, "MiB": 8 * 2 ** 20 / 1e9, "MB": 8 * 2 ** 20 / 1e9}
#: most result rows read from one file (a -a sweep has 23; --run_infinitely prints one per interval)
MAX_ROWS = 100_000
#: longer lines are skipped unread (real report lines are under 200 characters; a 64 MiB line is not split)
MAX_LINE_CHARS = 4096


@dataclass(frozen=True)
class PerftestRow:
    """One message size: ``size_bytes``, ``iterations``, peak and average in Gb/s, message rate in Mpps."""

    size_bytes: int
    iterations: int
    peak_gbps: float
    average_gbps: float
    msg_rate_mpps: float


@dataclass(frozen=True)
class PerftestRun:
    """One perftest report: the title (``RDMA_Write BW``; "" when the text starts at the table), the RDMA device and
    link type it names, QPs, whether it is bidirectional or dual-port, the unit of its header, the local and remote
    LIDs/GIDs, the rows and the stderr warnings found among them."""

    title: str
    device: str
    link_type: str
    num_qps: int
    bidirectional: bool
    dual_port: bool
    unit: str
    local_address: str
    remote_address: str
    rows: tuple[PerftestRow, ...]
    warnings: tuple[str, ...]

    @property
    def largest(self) -> PerftestRow:
        """The row of the largest message size (what a link-rate check compares)."""
        return max(self.rows, key=lambda r: r.size_bytes)


@dataclass
class _Draft:
    title: str = ""
    params: dict[str, str] | None = None
    local: str = ""
    remote: str = ""
    last_address: str = ""
    unit: str = ""
    columns: int = 0
    qos: bool = False
    in_table: bool = False
    rows: list[PerftestRow] | None = None
    warnings: list[str] | None = None

    def finish(self) -> PerftestRun | None:
        if not self.rows:
            return None
        params = self.params or {}
        qps = params.get("Number of qps", "1")
        return PerftestRun(re.sub(r"\s*\bBidirectional\b", "", self.title).strip(), params.get("Device", ""),
                           params.get("Link type", ""), int(qps) if qps.isdigit() and len(qps) < 7 else 1,
                           "Bidirectional" in self.title, params.get("Dual-port", "OFF") == "ON", self.unit,
                           self.local, self.remote, tuple(self.rows), tuple(self.warnings or ()))


def _row(line: str, draft: _Draft) -> PerftestRow | None:
    fields = line.split()
    if len(fields) < 5 + draft.qos or len(fields) > draft.columns or \
            not all(_NUMBER.fullmatch(f) for f in fields):
        return None
    if draft.qos:
        fields = fields[:1] + fields[2:]  # the service level column (--raw_qos)
    if "." in fields[0] or "." in fields[1]:
        return None
    scale = UNIT_GBPS[draft.unit]
    return PerftestRow(int(fields[0]), int(fields[1]), float(fields[2]) * scale, float(fields[3]) * scale,
                       float(fields[4]))


def parse_perftest(text: str, source: str) -> list[PerftestRun]:
    """Every perftest report in ``text`` with at least one result row; InputError when there is none."""
    runs: list[PerftestRun] = []
    draft = _Draft()
    num_rows = 0
    for line in text.splitlines():
        if len(line) > MAX_LINE_CHARS:
            continue
        title = _TITLE.match(line)
        if title and "#" not in line:
            if draft.rows:
                runs.append(draft.finish())  # type: ignore[arg-type]
                draft = _Draft()
            draft.title = title.group(1)
            continue
        head = _HEADER.search(line)
        if head:
            if draft.rows:  # a second table (server and client interleaved, or the next report without a title)
                runs.append(draft.finish())  # type: ignore[arg-type]
                draft = _Draft(draft.title, draft.params, draft.local, draft.remote)
            draft.unit = head.group(3)
            draft.qos = bool(head.group(1))
            extra = head.group(4)
            draft.columns = 5 + draft.qos + (4 if "Port1" in extra else 0) + (1 if "CPU_Util" in extra else 0)
            draft.in_table = True
            continue
        if _CPU_WARNING.search(line):
            if draft.warnings is None:
                draft.warnings = []
            if len(draft.warnings) < 16:
                draft.warnings.append(line.strip()[:200])
            continue
        if draft.in_table:
            if line.strip().startswith("---"):
                draft.in_table = False
                continue
            row = _row(line, draft)
            if row is not None:
                num_rows += 1
                if num_rows > MAX_ROWS:
                    raise InputError(f"{source}: more than {MAX_ROWS:,} perftest result rows; give one run's "
                                     "output per file")
                if draft.rows is None:
                    draft.rows = []
                draft.rows.append(row)
            continue
        for key, value in _PARAM.findall(line):
            if draft.params is None:
                draft.params = {}
            draft.params[key] = value
        address = _ADDRESS.match(line)
        if address:
            draft.last_address = address.group(1)
            if address.group(1) == "local":
                draft.local = f"LID {address.group(2)}"
            else:
                draft.remote = f"LID {address.group(2)}"
            continue
        gid = _GID.match(line)
        if gid and draft.last_address:
            if draft.last_address == "local":
                draft.local = f"{draft.local} GID {gid.group(1)}"
            else:
                draft.remote = f"{draft.remote} GID {gid.group(1)}"
            draft.last_address = ""
    last = draft.finish()
    if last is not None:
        runs.append(last)
    if not runs:
        raise InputError(f"{source}: no perftest result table (a '#bytes #iterations BW peak[...]' header and "
                         "rows)", hint="give the full output of ib_write_bw, ib_read_bw or ib_send_bw (client or "
                         "server side)")
    return runs


def is_perftest(text: str) -> bool:
    """Whether ``text`` holds a perftest bandwidth table header."""
    return _HEADER_START.search(text) is not None
