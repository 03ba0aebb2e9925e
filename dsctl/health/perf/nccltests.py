"""Parse nccl-tests reports (``all_reduce_perf``, ``all_gather_perf``, ``reduce_scatter_perf``, ``alltoall_perf``,
``sendrecv_perf``, ``broadcast_perf``, ``reduce_perf`` ...), every layout from 2017 to the 2.15+ releases.

What a report holds (nccl-tests ``src/util.cu``, ``writeDeviceReport`` / ``writeResultHeader`` / ``writeResultFooter``):

- ``# Collective test starting: all_reduce_perf`` (newer releases; older ones name the test nowhere, so the name
  comes from a command line in the text or the file name);
- one line per rank: ``#  Rank  0 Group  0 Pid 1234 on node001 device  0 [0000:18:00] NVIDIA H800`` (``Group``
  since 2.11; the bus id printed as ``[0x18]`` before 2.13); people elide the middle of long lists with ``...``;
- the column header ``size count type redop root time algbw busbw #wrong time algbw busbw #wrong`` (out-of-place,
  then in-place). Older releases have no ``root`` and an ``error`` column (a float, max deviation) instead of
  ``#wrong`` (a count, ``N/A`` when -c 0); alltoall of those releases prints an empty ``redop``; ``-I 1`` adds
  per-iteration columns, ``cputime`` replaces ``time`` with ``-C``; some logs drop the leading ``#``;
- one row per size (bytes, elements, type, reduction, root, time in us, algbw and busbw in GB/s = 10^9 bytes/s);
- ``# Out of bounds values : 0 OK`` and ``# Avg bus bandwidth : 70.742``.

Lines that are none of these (NCCL INFO logs, mpirun noise) are skipped; a launcher's tag in front of every line
(OpenMPI ``--tag-output``: ``[1,0]<stdout>:``, ``srun --label``: ``0: ``) is taken off first.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from dsctl.errors import InputError

#: test names as nccl-tests builds them (``<name>_perf``, ``<name>_perf_mpi``)
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoallv", "alltoall", "sendrecv", "broadcast",
               "reduce", "gather", "scatter", "hypercube")
_NAME = re.compile(r"\b(" + "|".join(COLLECTIVES) + r")_perf(?:_mpi)?\b")
_STARTING = re.compile(r"Collective test starting:\s*(\S{1,200})")
_FILE_NAME = re.compile(r"(all[_-]?reduce|all[_-]?gather|reduce[_-]?scatter|all[_-]?to[_-]?allv|all[_-]?to[_-]?all|"
                        r"send[_-]?recv|broadcast|reduce|gather|scatter|hypercube)", re.IGNORECASE)
_RANK = re.compile(r"^#?\s{0,8}Rank\s{1,8}([0-9]{1,7})\s{1,8}(?:Group\s{1,8}[0-9]{1,7}\s{1,8})?Pid\s{1,8}[0-9]{1,10}"
                   r"\s{1,8}on\s{1,64}(\S{1,255})\s{1,8}device\s{1,8}([0-9]{1,5})\s{1,8}\[([^\]]{0,64})\]\s{0,8}"
                   r"(.{0,200}?)\s*$")
_ELIDED = re.compile(r"^#?\s{0,8}(\.{3,}|…)\s*$")
_OUT_OF_BOUNDS = re.compile(r"Out of bounds values\s*:\s*([0-9]{1,12})")
_AVG_BUSBW = re.compile(r"Avg bus bandwidth\s*:\s*([0-9]{1,12}(?:\.[0-9]{0,12})?(?:e[+-]?[0-9]{1,3})?)")
#: a launcher's tag before each line: OpenMPI --tag-output (``[1,0]<stdout>:``), srun --label (``0: ``)
_TAG = re.compile(r"^(?:\[[0-9]{1,7},[0-9]{1,7}\]<std(?:out|err)>:|\s{0,6}[0-9]{1,7}: )")
_INT = re.compile(r"-?[0-9]{1,20}")
_FLOAT = re.compile(r"-?[0-9]{1,20}(\.[0-9]{0,20})?([eE][+-]?[0-9]{1,3})?")
_TIME_NAMES = ("time", "cputime")
_WRONG_NAMES = ("#wrong", "error", "res")
#: most rows and rank lines read from one file (a full -b 8 -e 16G sweep has 32 rows; 131,072 ranks is far
#: beyond any job nccl-tests has been run on)
MAX_ROWS = 100_000
MAX_RANKS = 131_072
#: longer lines are skipped unread (the widest real line, -I 1 with timestamps, is under 300 characters): splitting
#: one 64 MiB line into words would take gigabytes
MAX_LINE_CHARS = 4096


@dataclass(frozen=True)
class NcclRank:
    """One ``# Rank`` line: rank, host, CUDA device index, PCI bus id text, GPU name."""

    rank: int
    host: str
    device: int
    bus_id: str
    gpu: str


@dataclass(frozen=True)
class NcclPass:
    """Out-of-place or in-place: time (us), algbw and busbw (bytes/s), ``wrong`` (count; None for N/A or the
    older float ``error`` column, kept in ``error``)."""

    time_us: float
    algbw_bytes_per_s: float
    busbw_bytes_per_s: float
    wrong: int | None
    error: float | None


@dataclass(frozen=True)
class NcclRow:
    """One size: bytes, elements, data type, reduction ("" when not printed), root (None when not printed), the
    out-of-place pass and the in-place one (None where the line stops before it)."""

    size_bytes: int
    count: int
    dtype: str
    redop: str
    root: int | None
    out_of_place: NcclPass
    in_place: NcclPass | None

    @property
    def best_busbw_bytes_per_s(self) -> float:
        """The better of the two passes (a dip in one pass is not a slow link)."""
        return max(self.out_of_place.busbw_bytes_per_s,
                   self.in_place.busbw_bytes_per_s if self.in_place is not None else 0.0)

    @property
    def wrong(self) -> int:
        """Wrong elements counted over both passes (0 where not counted)."""
        return sum(p.wrong or 0 for p in (self.out_of_place, self.in_place) if p is not None)


@dataclass(frozen=True)
class NcclTestsRun:
    """One nccl-tests report: the collective (``all_reduce``; "" when nothing names it) and where that name came
    from, the rank lines (``ranks_elided`` when the list was cut with ``...``), the number of ranks (highest rank
    + 1), the rows, the out-of-bounds count and average bus bandwidth of the footer (None when absent)."""

    collective: str
    named_by: str
    ranks: tuple[NcclRank, ...]
    ranks_elided: bool
    num_ranks: int
    rows: tuple[NcclRow, ...]
    out_of_bounds: int | None
    avg_busbw_bytes_per_s: float | None

    @property
    def hosts(self) -> tuple[str, ...]:
        """Host names in rank order, each once."""
        return tuple(dict.fromkeys(r.host for r in self.ranks))

    @property
    def gpus_per_node(self) -> int:
        """Ranks per host; with elided rank lines, the highest CUDA device index + 1 (0 when no rank line)."""
        if not self.ranks:
            return 0
        per_host: dict[str, int] = {}
        for r in self.ranks:
            per_host[r.host] = per_host.get(r.host, 0) + 1
        counted = max(per_host.values())
        return max(counted, max(r.device for r in self.ranks) + 1) if self.ranks_elided else counted

    @property
    def num_nodes(self) -> int:
        """Hosts in the job: the hosts named, or ranks / GPUs per node when rank lines were elided."""
        if not self.ranks:
            return 0
        if self.ranks_elided:
            return max(len(self.hosts), math.ceil(self.num_ranks / self.gpus_per_node))
        return len(self.hosts)

    @property
    def gpu_models(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.gpu for r in self.ranks if r.gpu))

    @property
    def largest(self) -> NcclRow:
        return max(self.rows, key=lambda r: r.size_bytes)


@dataclass(frozen=True)
class _Columns:
    lead: tuple[str, ...]
    width: int  # columns per pass
    wrong_name: str


def _columns(line: str) -> _Columns | None:
    names = line.lstrip("#").split()
    if len(names) > 64 or "size" not in names[:1] or "busbw" not in names or "algbw" not in names:
        return None
    times = [i for i, n in enumerate(names) if n in _TIME_NAMES]
    if not times:
        return None
    width = (times[1] - times[0]) if len(times) > 1 else len(names) - times[0]
    first = names[times[0]:times[0] + width]
    if width < 4 or first[1:3] != ["algbw", "busbw"]:
        return None
    return _Columns(tuple(names[:times[0]]), width, first[3] if first[3] in _WRONG_NAMES else "")


def _pass(fields: list[str], columns: _Columns) -> NcclPass | None:
    if len(fields) < columns.width or not all(_FLOAT.fullmatch(f) for f in fields[:3]):
        return None
    time_us, algbw, busbw = (float(f) for f in fields[:3])
    if not all(math.isfinite(v) and v >= 0 for v in (time_us, algbw, busbw)):
        return None
    mark = fields[3]
    wrong: int | None = None
    error: float | None = None
    if columns.wrong_name == "#wrong" and _INT.fullmatch(mark):
        wrong = int(mark)
    elif mark != "N/A" and _FLOAT.fullmatch(mark):
        error = float(mark)
    elif mark != "N/A":
        return None
    return NcclPass(time_us, algbw * 1e9, busbw * 1e9, wrong, error)


def _row(line: str, columns: _Columns) -> NcclRow | None:
    fields = line.split()
    if len(fields) > 200 or len(fields) < 3 or not _INT.fullmatch(fields[0]) or not _INT.fullmatch(fields[1]):
        return None
    lead = len(columns.lead)
    # an older alltoall prints no text in its redop column: one field fewer than the header
    for present in (lead, lead - 1):
        if present < 3 or (present < lead and "redop" not in columns.lead):
            continue
        rest = fields[present:]
        first = _pass(rest, columns)
        if first is None or (present == lead and "redop" in columns.lead and
                             _FLOAT.fullmatch(fields[columns.lead.index("redop")])):
            continue
        second = _pass(rest[columns.width:], columns)
        if second is None and len(rest) >= 2 * columns.width:
            continue  # a full line whose second pass does not read: not this layout
        named = columns.lead if present == lead else tuple(n for n in columns.lead if n != "redop")
        names = dict(zip(named, fields[:present], strict=True))
        root_text = names.get("root")
        root = int(root_text) if root_text is not None and _INT.fullmatch(root_text) else None
        if int(fields[0]) < 0:
            return None
        return NcclRow(int(fields[0]), int(fields[1]), fields[2][:32], names.get("redop", "")[:32], root, first,
                       second)
    return None


def _name_in(line: str) -> str:
    """The test a line names: ``# Collective test starting: ./all_reduce_perf`` or a command line."""
    starting = _STARTING.search(line)
    found = _NAME.search(starting.group(1) + " " if starting else line)
    return found.group(1) if found else ""


def _name_of_file(source: str) -> str:
    base = source.replace("\\", "/").rsplit("/", 1)[-1]
    by_file = _FILE_NAME.search(base)
    if not by_file:
        return ""
    names = {c.replace("_", ""): c for c in COLLECTIVES}
    return names.get(re.sub(r"[_-]", "", by_file.group(1).lower()), "")


@dataclass
class _Draft:
    ranks: list[NcclRank]
    name: str = ""
    elided: bool = False
    rows: list[NcclRow] | None = None
    columns: _Columns | None = None
    out_of_bounds: int | None = None
    avg: float | None = None


def parse_nccl_tests(text: str, source: str) -> list[NcclTestsRun]:
    """Every nccl-tests table in ``text`` (a new column header after rows starts a new report; rank lines and
    the name carry over); InputError when there is none."""
    drafts: list[_Draft] = []
    draft = _Draft([])
    num_rows = 0
    for line in text.splitlines():
        if len(line) > MAX_LINE_CHARS:
            continue
        line = _TAG.sub("", line, count=1)
        named = _name_in(line) if "_perf" in line else ""
        if (named or ("nThread" in line and "nGpus" in line)) and draft.rows:
            drafts.append(draft)  # the next run prints its own rank lines
            draft = _Draft([])
        if named:
            draft.name = named
            continue
        rank = _RANK.match(line)
        if rank:
            if len(draft.ranks) >= MAX_RANKS:
                raise InputError(f"{source}: more than {MAX_RANKS:,} '# Rank' lines; not an nccl-tests report")
            draft.ranks.append(NcclRank(int(rank.group(1)), rank.group(2), int(rank.group(3)), rank.group(4),
                                        rank.group(5)))
            continue
        if _ELIDED.match(line) and draft.ranks and not draft.rows:
            draft.elided = True
            continue
        if "algbw" in line and "busbw" in line:
            columns = _columns(line)
            if columns is not None:
                if draft.rows:
                    drafts.append(draft)
                    draft = _Draft(list(draft.ranks), draft.name, draft.elided)
                draft.columns = columns
            continue
        if draft.columns is not None:
            row = _row(line, draft.columns)
            if row is not None:
                num_rows += 1
                if num_rows > MAX_ROWS:
                    raise InputError(f"{source}: more than {MAX_ROWS:,} nccl-tests rows; give one run per file")
                if draft.rows is None:
                    draft.rows = []
                draft.rows.append(row)
                continue
        bounds = _OUT_OF_BOUNDS.search(line)
        if bounds:
            draft.out_of_bounds = int(bounds.group(1))
            continue
        avg = _AVG_BUSBW.search(line)
        if avg:
            value = float(avg.group(1))
            draft.avg = value * 1e9 if math.isfinite(value) else None
    drafts.append(draft)
    by_file = _name_of_file(source)
    runs = [NcclTestsRun(d.name or by_file, "the text" if d.name else ("the file name" if by_file else ""),
                         tuple(d.ranks), d.elided,
                         max((r.rank for r in d.ranks), default=-1) + 1, tuple(d.rows), d.out_of_bounds, d.avg)
            for d in drafts if d.rows]
    if not runs:
        raise InputError(f"{source}: no nccl-tests result table (a 'size count type ... time algbw busbw' header "
                         "and rows)", hint="give the whole output of an nccl-tests binary such as all_reduce_perf")
    return runs


def is_nccl_tests(text: str) -> bool:
    """Whether ``text`` holds an nccl-tests column header."""
    return any(_columns(_TAG.sub("", line, count=1)) is not None for line in text.splitlines()
               if len(line) <= MAX_LINE_CHARS and "algbw" in line and "busbw" in line)
