"""Trace files for ``dsctl trace``: glob expansion, safe opening (regular files only) and a process pool.

Each file is streamed in chunks of :data:`CHUNK_BYTES` to a pure per-file function from :mod:`dsctl.trace`
(one file per worker process at a time), so memory is bounded per worker, not by the number of ranks. Errors
in a worker come back as values and are raised again in the parent with their message and hint.
"""

from __future__ import annotations

import contextvars
import glob
import multiprocessing
import os
import re
import stat
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from dsctl.errors import DsctlError, ExitCode, InputError
from dsctl.names import ascii_digits
from dsctl.trace import read_trace
from dsctl.trace.classify import Classifier
from dsctl.trace.job import TraceIdentity, identity
from dsctl.trace.overlap import RankOverlap, analyse_trace
from dsctl.trace.skew import RankCollectives, rank_collectives
from dsctl.trace.timeline import RankLanes, rank_lanes

CHUNK_BYTES = 1 << 20
#: at most this many files from one glob (a typo like '/*' should not start 10^6 reads)
MAX_FILES = 65536
_GLOB_CHARS = re.compile(r"[*?\[]")
_DIGITS = re.compile(r"([0-9]+)")  # ASCII only, as ascii_digits: "٣" stays text (int and str never compared)
#: share of one file's progress that reading its bytes stands for (the analysis after the read is the rest)
READ_SHARE = 0.9
#: ``(bytes_read, file_bytes)`` callback of the file read in this process now (set by ``run_per_file`` when it
#: reads in this process: one large trace shows its bytes read, not just 0 of 1 files)
_bytes_read: contextvars.ContextVar[Callable[[int, int], None] | None] = contextvars.ContextVar("bytes_read",
                                                                                              default=None)


def _natural(path: str) -> list[object]:
    """Sort key: rank10 after rank9."""
    return [int(p) if ascii_digits(p) else p for p in _DIGITS.split(path)]


def expand(args: Sequence[str], what: str = "TRACE") -> list[Path]:
    """Paths from arguments, expanding glob patterns (quoted ones too) in natural order; no match is exit 2."""
    out: list[Path] = []
    for arg in args:
        if _GLOB_CHARS.search(arg) and not os.path.lexists(arg):
            found = sorted(glob.glob(arg), key=_natural)
            if not found:
                raise InputError(f"{what} {arg!r}: no file matches this pattern")
            out.extend(Path(p) for p in found)
        else:
            out.append(Path(arg))
        if len(out) > MAX_FILES:
            raise InputError(f"{what}: more than {MAX_FILES:,} files; give fewer or a narrower pattern")
    return out


def open_chunks(path: Path, max_bytes: int, what: str = "TRACE") -> Iterator[bytes]:
    """The bytes of a regular file in chunks; FIFOs, devices and folders are refused (exit 2) before reading.

    The file is opened non-blocking so that a FIFO cannot hang the open itself; files larger than ``max_bytes``
    on disk are refused up front (compressed ones are limited again on their decompressed size).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"{what} {path}: file not found (it does not exist)") from None
    except IsADirectoryError:
        raise InputError(f"{what} {path}: is a folder, expected a trace file") from None
    except OSError as exc:
        raise InputError(f"{what} {path}: cannot read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputError(f"{what} {path}: is a folder, expected a trace file")
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{what} {path}: not a regular file (a FIFO, socket or device); give a trace file")
        if info.st_size > max_bytes:
            raise InputError(f"{what} {path}: {info.st_size:,} bytes, over the --max-bytes limit of "
                             f"{max_bytes:,}", hint="raise --max-bytes if the trace is genuinely that large")
    except BaseException:
        os.close(fd)
        raise
    return _chunks(fd, path, what, info.st_size)


def _chunks(fd: int, path: Path, what: str, size: int) -> Iterator[bytes]:
    report = _bytes_read.get()
    read = 0
    with os.fdopen(fd, "rb", buffering=0) as handle:
        while True:
            try:
                data = handle.read(CHUNK_BYTES)
            except OSError as exc:
                raise InputError(f"{what} {path}: cannot read ({exc.strerror or exc})") from None
            if not data:
                return
            read += len(data)
            if report is not None:
                report(min(read, size), size)
            yield data


def _call(job: tuple[Callable[..., Any], tuple[Any, ...]]) -> tuple[str, Any]:
    func, args = job
    try:
        return "ok", func(*args)
    except DsctlError as exc:
        return "error", (type(exc).__name__, exc.text, exc.hint, int(exc.exit_code), exc.field, exc.mentions)
    except MemoryError:
        return "error", ("InputError", f"{args[0]}: out of memory while reading this trace", None, 2, None, ())


def _raise(error: tuple[str, str, str | None, int, str | None, tuple[str, ...]]) -> None:
    _, text, hint, code, field, mentions = error
    exc = InputError(text, hint=hint, field=field, mentions=mentions)  # the field stays for the command's table
    exc.exit_code = ExitCode(code)
    raise exc


def run_per_file(func: Callable[..., Any], jobs_args: Sequence[tuple[Any, ...]], jobs: int,
                 report: Callable[[float, float], None] | None = None) -> list[Any]:
    """``func(*args)`` for each args tuple (the first element names the file), in order; in ``jobs`` processes
    when there is more than one file, else in this process. The first error (in file order) is raised.
    ``report(files_done, num_files)`` follows the files (a progress line); read in this process, a file counts
    its bytes read as ``READ_SHARE`` of it (one large trace moves the bar while it is read)."""
    tasks = [(func, args) for args in jobs_args]
    results: list[Any] = []

    def done(result: Any) -> None:
        results.append(result)
        if report is not None:
            report(len(results), len(tasks))

    if jobs <= 1 or len(tasks) <= 1:
        for task in tasks:
            base = len(results)

            def reading(read: int, size: int, base: int = base) -> None:
                if report is not None and size > 0:
                    report(base + READ_SHARE * read / size, len(tasks))

            token = _bytes_read.set(reading)
            try:
                result = _call(task)
            finally:
                _bytes_read.reset(token)
            done(result)
    else:
        context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods()
                                              else "spawn")
        with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=context) as pool:
            for result in pool.map(_call, tasks, chunksize=1):
                done(result)
    out = []
    for status, value in results:
        if status == "error":
            _raise(value)
        out.append(value)
    return out


def default_jobs() -> int:
    """Worker processes by default: the CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def overlap_file(path: Path, index: int, classifier: Classifier, step: int | None, all_steps: bool, top: int,
                 keep_lanes: bool, max_bytes: int) -> tuple[TraceIdentity, list[RankOverlap]]:
    """Who wrote one trace file and its overlap rows, streamed (the pool's unit of work)."""
    trace = read_trace(open_chunks(path, max_bytes), str(path), max_bytes)
    return identity(trace), analyse_trace(trace, index, classifier, step, all_steps, top, keep_lanes)


def collectives_file(path: Path, index: int, classifier: Classifier, step: int | None,
                     max_bytes: int) -> tuple[TraceIdentity, list[RankCollectives]]:
    """Who wrote one trace file and its matchable collectives, streamed (the pool's unit of work)."""
    trace = read_trace(open_chunks(path, max_bytes), str(path), max_bytes)
    return identity(trace), rank_collectives(trace, index, classifier, step)


def lanes_file(path: Path, index: int, classifier: Classifier, step: int | None, from_us: float | None,
               to_us: float | None, max_bytes: int) -> tuple[TraceIdentity, RankLanes]:
    """Who wrote one trace file and its timeline lanes, streamed (the pool's unit of work)."""
    trace = read_trace(open_chunks(path, max_bytes), str(path), max_bytes)
    return identity(trace), rank_lanes(trace, index, classifier, step, from_us, to_us)
