"""Write output files so that a failure never leaves a partial file or a mix of two runs behind.

Every file is written to a temporary name in the destination folder, then renamed into place; an ``--out DIR``
result is built whole in a sibling temporary folder and swapped in with one rename (the previous folder is
kept as ``DIR.prev``). Temporaries are removed on errors, SIGINT, SIGTERM and SIGHUP, and those of a killed
run (its pid gone) by the next run into the same place. Every ``--out`` command writes through this module.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from dsctl.errors import InputError


def _refused(option: str | None, path: Path, exc: OSError) -> InputError:
    """An OS refusal (read-only or pseudo file system, no space, no permission) is bad output input: exit 2."""
    where = f"{option} {path}" if option else str(path)
    return InputError(f"{where}: cannot write ({exc.strerror or exc})")


def atomic_write(path: Path, content: str | bytes, option: str | None = None) -> None:
    """Write ``content`` to ``path`` via a temporary sibling and ``os.replace``.

    ``option`` (e.g. ``"--svg"``) names the path in error messages; an OS refusal raises ``InputError``.
    """
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"cannot write {path}: folder {parent} does not exist")
    _sweep_stale(parent, path.name)
    with cleanup_on_signals():
        try:
            fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path.name), suffix=".tmp", dir=parent)
        except OSError as exc:
            raise _refused(option, path, exc) from None
        try:
            os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600
            with os.fdopen(fd, "wb") as handle:
                handle.write(content.encode("utf-8") if isinstance(content, str) else content)
            os.replace(tmp, path)
        except BaseException as exc:
            Path(tmp).unlink(missing_ok=True)
            if isinstance(exc, OSError):
                raise _refused(option, path, exc) from None
            raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


#: sibling kept of the folder an ``--out DIR`` run replaced (one generation; the one before is deleted)
PREV_SUFFIX = ".prev"
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _temp_prefix(name: str) -> str:
    """Temporaries carry the writer's pid, so a later run can tell those of a killed run (pid gone)."""
    return f".{name}.dsctl-{os.getpid()}-"


def _sweep_stale(parent: Path, name: str) -> None:
    """Remove temporaries a killed run (SIGKILL, power loss) left beside ``name``: their pid no longer runs."""
    prefix = f".{name}.dsctl-"
    try:
        entries = [e for e in os.scandir(parent) if e.name.startswith(prefix)]
    except OSError:
        return
    for entry in entries:
        pid_text = entry.name[len(prefix):].split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or _alive(int(pid_text)):
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            Path(entry.path).unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


class Terminated(SystemExit):
    """SIGTERM/SIGHUP arrived while output was being written: unwind (removing temporaries), exit 128+signal."""


@contextmanager
def cleanup_on_signals() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into an exception for the duration, so ``finally`` blocks remove temporaries.

    (SIGINT already raises KeyboardInterrupt; SIGKILL cannot be caught: :func:`_sweep_stale` handles that.)
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, _frame: object) -> None:
        raise Terminated(128 + signum)

    previous = {sig: signal.signal(sig, _raise) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _swap_in(stage: Path, out_dir: Path) -> None:
    """Make ``stage`` the folder ``out_dir``; a folder already there becomes ``out_dir.prev``."""
    if not out_dir.exists():
        os.rename(stage, out_dir)
        return
    prev = out_dir.with_name(out_dir.name + PREV_SUFFIX)
    if prev.is_symlink() or prev.is_file():
        prev.unlink()
    elif prev.exists():
        shutil.rmtree(prev)
    if _exchange(stage, out_dir):
        os.rename(stage, prev)  # stage now holds the old result
        return
    os.rename(out_dir, prev)
    try:
        os.rename(stage, out_dir)
    except BaseException:
        os.rename(prev, out_dir)
        raise


def _check_out_dir(out_dir: Path, option: str) -> Path:
    if out_dir.is_symlink():
        raise InputError(f"{option} {out_dir} is a symbolic link; dsctl replaces the {option} folder whole, so "
                         "give the real folder")
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{option} {out_dir} exists and is not a folder")
    parent = out_dir.parent if str(out_dir.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"cannot write into {out_dir}: folder {parent} does not exist")
    here = Path.cwd().resolve()
    target = out_dir.resolve()
    if target == here or target in here.parents or out_dir.name in ("", ".", ".."):
        raise InputError(f"{option} {out_dir} is the current folder or one above it; dsctl replaces the whole "
                         f"{option} folder, so give a folder of its own", hint=f"e.g. {option} plan/")
    return parent


@contextmanager
def staged_directory(out_dir: Path, option: str = "--out") -> Iterator[Path]:
    """Yield an empty sibling temporary folder; on success it replaces ``out_dir`` in one rename.

    A folder already at ``out_dir`` is kept as ``out_dir.prev`` (replacing an older ``.prev``), so the result
    never mixes files of two runs. On any exception, SIGTERM or SIGHUP nothing at ``out_dir`` changes and the
    temporary folder is removed.
    """
    out_dir = Path(out_dir)
    parent = _check_out_dir(out_dir, option)
    _sweep_stale(parent, out_dir.name)
    with cleanup_on_signals():
        stage = Path(tempfile.mkdtemp(prefix=_temp_prefix(out_dir.name), dir=parent))
        try:
            stage.chmod(0o777 & ~_umask())  # mkdtemp makes 0700; the final folder should look like any other
            yield stage
            _swap_in(stage, out_dir)
        finally:
            if stage.exists():
                shutil.rmtree(stage, ignore_errors=True)


def write_files(out_dir: Path, files: Mapping[str, str | bytes], option: str = "--out") -> list[Path]:
    """Write several files into ``out_dir`` all-or-nothing; returns their final paths.

    An OS refusal (read-only or pseudo file system, no space) raises ``InputError`` naming ``option``.
    """
    try:
        with staged_directory(out_dir, option) as stage:
            for name, content in files.items():
                target = stage / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    except OSError as exc:
        raise _refused(option, Path(out_dir), exc) from None
    return [Path(out_dir) / name for name in files]
