"""Every file dsctl writes goes through here, under one rule that never destroys what dsctl did not write.

The rule (also in docs/reliability.md, Limits, and docs/architecture.md):

* **A file target** (``--svg``, ``--out FILE``, ``--sglang-out``, a file in ``--textfile-dir``) that already
  exists must be a regular file: a symbolic link, a folder, a character or block device (``/dev/null``), a FIFO
  or a socket is refused with exit 2 naming the option and the path, and left as it was. An existing regular file
  is replaced (as ``cp`` or ``sort -o`` would); no ``--force`` is needed or offered.
* **An output is never one of the command's own inputs**: every file read through :mod:`dsctl.inputs` (and any
  path a command passes to :func:`dsctl.inputs.note_input`) is remembered by device and inode; a file target that
  is one of them, or an ``--out-dir DIR`` that holds one, is refused (exit 2) before anything is written.
* **A folder target** (``--out-dir DIR``, ``launch --submit``'s ``./JOB_NAME``) is built whole in a sibling temporary
  folder and swapped in with one rename. ``DIR`` may already exist only if dsctl wrote it: it then holds
  :data:`MANIFEST_NAME` (tool, version, command, the files written) and nothing that manifest does not list. A
  folder without one, or holding anything else (a file added later, a job's log, a symbolic link), is foreign and
  refused with exit 2; an empty folder is accepted (it is replaced, nothing is lost). The replaced dsctl folder is
  kept as ``DIR.prev``; an existing ``DIR.prev`` is deleted for it only if dsctl wrote it too (same manifest test)
  and it holds none of the command's inputs, otherwise the run is refused before any work. The input check covers
  every path the writer deletes or replaces: a file target, ``DIR``, ``DIR.prev`` and the stale temporaries it
  sweeps (one that is an input is left alone). Nothing outside ``DIR`` and ``DIR.prev`` is moved or deleted.
* **Job outputs**: a folder whose job writes into it (``launch --submit``: Slurm's ``JOB-%j.out``) declares their
  name patterns in the manifest (``"job_outputs": ["JOB-*.out"]``). Top-level regular files matching one are not
  foreign, and they are never deleted: the next run into the folder moves them into the new folder (same inode,
  so a job still running keeps writing its log), and its manifest declares their patterns too. So every log of
  every run stays in ``DIR``; ``DIR.prev`` holds only dsctl's files, and one that holds job outputs (a run
  interrupted between the two renames) is refused rather than deleted.
* **Several outputs of one command** (:func:`write_together`: ``eplb --out A --sglang-out B``) are all written to
  temporaries first (a full disk fails here and changes nothing), then renamed into place one after the other.
  Before the renames, each target that exists is hard-linked to a backup name; if a rename fails, the targets
  already renamed get their backup back (or are removed if they did not exist), so the files stay a matching pair.
  Guaranteed: a failure while writing changes no target. Best effort: a failure between two renames restores the
  earlier targets from their backups (only a second failure during that restore, or a file system without hard
  links, can leave a new file beside an old one; the error then says which).

Temporaries carry the writer's pid; they are removed on errors, SIGINT, SIGTERM and SIGHUP, and those of a killed
run (its pid gone) by the next run into the same place.

Why one module over 500 lines: it is one rule, not several jobs. The target checks, the manifest test of a
folder, the staging and swap, the backups of :func:`write_together` and the temporary sweep each rely on the
others' guarantees (a swap is safe only because the folder was found to be dsctl's, a sweep only because the
names carry a pid), so a reader auditing "can dsctl destroy a file it did not write?" reads this file alone.
Split it only along a line that keeps that question answerable in one place.
"""

from __future__ import annotations

import ctypes
import errno
import fnmatch
import json
import os
import shutil
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from dsctl.errors import InputError
from dsctl.inputs import INPUTS_READ
from dsctl.names import ascii_digits

#: the file dsctl leaves in every --out-dir folder: how a later run recognises a folder it may replace
MANIFEST_NAME = ".dsctl-manifest.json"
_MANIFEST_MAX_BYTES = 4 * 1024**2
#: one output: (target path, content, option naming it in errors or None)
Output = tuple[Path, "str | bytes", "str | None"]


def _refused(option: str | None, path: Path, exc: OSError) -> InputError:
    """An OS refusal (read-only or pseudo file system, no space, no permission) is bad output input: exit 2."""
    return InputError(f"{_where(option, path)}: cannot write ({exc.strerror or exc})")


def _where(option: str | None, path: Path) -> str:
    return f"{option} {path}" if option else str(path)


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_target(path: Path, option: str | None = None) -> None:
    """Refuse (InputError, exit 2) a file target that exists and is not a regular file, or is an input."""
    path = Path(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:
        raise InputError(f"{_where(option, path)}: cannot write ({getattr(exc, 'strerror', None) or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        example = f", e.g. {path / 'out.svg'}" if stat.S_ISDIR(info.st_mode) else ""
        raise InputError(f"{_where(option, path)}: exists and is {_kind(info.st_mode)}; dsctl replaces only a "
                         f"regular file, so give a file path{example}",
                         hint="nothing was written; a link, device, FIFO or socket is never replaced")
    for read in INPUTS_READ:
        if (read.device, read.inode) == (info.st_dev, info.st_ino):
            raise InputError(f"{_where(option, path)}: is the input {read.what} {read.path}; an output never "
                             "replaces one of the command's inputs", hint="write the result to another file")


def _input_inside(path: Path | str) -> tuple[str, str] | None:
    """(what, path) of a command input that ``path`` is or holds (by real path, or by device and inode for a
    file), or None. Everything the writer deletes or replaces is asked first."""
    real = os.path.realpath(path)
    try:
        info = os.lstat(path)
    except (OSError, ValueError):
        info = None
    for read in INPUTS_READ:
        if read.path == real or read.path.startswith(real.rstrip(os.sep) + os.sep):
            return read.what, read.path
        if info is not None and (read.device, read.inode) == (info.st_dev, info.st_ino):
            return read.what, read.path
    return None


def _check_no_input_inside(folder: Path, option: str, role: str = "") -> None:
    """Refuse replacing (or deleting) a folder that holds (or is) one of the command's inputs."""
    found = _input_inside(folder)
    if found is not None:
        what, path = found
        role = role or f"dsctl replaces the {option} folder whole"
        raise InputError(f"{option} {folder}: holds the input {what} {path}; {role} and never an input",
                         hint="write the result to another folder; nothing was changed")


def atomic_write(path: Path, content: str | bytes, option: str | None = None) -> None:
    """Write ``content`` to ``path`` via a temporary sibling and ``os.replace``, under the module's rule.

    ``option`` (e.g. ``"--svg"``) names the path in error messages; a refused target or an OS refusal raises
    ``InputError``.
    """
    write_together([(Path(path), content, option)])


def write_together(outputs: Sequence[Output]) -> None:
    """Write several files so that all of them are replaced or none (see the module docstring for the limits)."""
    items = [(Path(p), c, o) for p, c, o in outputs]
    seen: dict[str, str | None] = {}
    for path, _content, option in items:
        parent = path.parent if str(path.parent) else Path(".")
        if not parent.is_dir():
            raise InputError(f"cannot write {path}: folder {parent} does not exist")
        check_target(path, option)
        key = os.path.realpath(path)
        if key in seen:
            raise InputError(f"{_where(option, path)}: same file as {seen[key] or 'another output'}; give two "
                             "different files")
        seen[key] = option
        _sweep_stale(parent, path.name)
    with cleanup_on_signals():
        temps: list[Path] = []
        backups: dict[Path, Path | None] = {}
        done: list[Path] = []
        try:
            for path, content, option in items:
                temps.append(_write_temp(path, content, option))
            for path, _content, _option in items:
                if path.exists():
                    backups[path] = _backup(path)
            for (path, _content, option), tmp in zip(items, temps, strict=True):
                check_target(path, option)  # it may have changed while the content was written
                try:
                    os.replace(tmp, path)
                except OSError as exc:
                    raise _refused(option, path, exc) from None
                done.append(path)
        except BaseException:
            _restore(done, backups)
            raise
        finally:
            for leftover in [*temps, *backups.values()]:
                if leftover is not None:
                    leftover.unlink(missing_ok=True)


def _write_temp(path: Path, content: str | bytes, option: str | None) -> Path:
    parent = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path.name), suffix=".tmp", dir=parent)
    except OSError as exc:
        raise _refused(option, path, exc) from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600
        with os.fdopen(fd, "wb") as handle:
            handle.write(content.encode("utf-8") if isinstance(content, str) else content)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _refused(option, path, exc) from None
        raise
    return Path(tmp)


def _backup(path: Path) -> Path | None:
    """A hard link to the current ``path`` under a temporary name (the old content, kept until all renames pass);
    None where the file system has no hard links."""
    parent = path.parent if str(path.parent) else Path(".")
    name = parent / f"{_temp_prefix(path.name)}{os.urandom(6).hex()}.old"
    try:
        os.link(path, name)
    except OSError:
        return None
    return name


def _restore(done: list[Path], backups: Mapping[Path, Path | None]) -> None:
    """Undo the renames already made: old content back where it was, new files that replaced nothing removed."""
    for path in reversed(done):
        try:
            if path not in backups:
                path.unlink(missing_ok=True)
            elif (backup := backups[path]) is not None:
                os.replace(backup, path)
        except OSError:
            continue


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


#: sibling kept of the folder an ``--out-dir DIR`` run replaced (one generation; the one before is deleted)
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
        if not ascii_digits(pid_text) or int(pid_text) == os.getpid() or _alive(int(pid_text)):
            continue
        if _input_inside(entry.path) is not None:
            continue  # named like a temporary, but the command reads it: never deleted
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


@contextmanager
def scratch_file(name: str, content: str, prefix: str = "dsctl-") -> Iterator[Path]:
    """``content`` in a new private folder (mode 0700, under the temporary directory) as ``name`` while the block
    runs; the folder is removed afterwards. For a file another program reads (srun's names file), never an output."""
    with tempfile.TemporaryDirectory(prefix=prefix) as folder:
        path = Path(folder) / name
        path.write_text(content, encoding="utf-8")
        yield path


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
    """Make ``stage`` the folder ``out_dir``; a folder already there becomes ``out_dir.prev`` (an empty one is
    removed). The caller has checked (:func:`_check_out_dir`) that both are dsctl's, just before."""
    if not out_dir.exists():
        os.rename(stage, out_dir)
        return
    prev = out_dir.with_name(out_dir.name + PREV_SUFFIX)
    keep = any(os.scandir(out_dir))
    if keep and os.path.lexists(prev):
        shutil.rmtree(prev)
    if _exchange(stage, out_dir):
        if keep:
            os.rename(stage, prev)  # stage now holds the old result
        else:
            os.rmdir(stage)
        return
    if not keep:
        os.rmdir(out_dir)
        os.rename(stage, out_dir)
        return
    os.rename(out_dir, prev)
    try:
        os.rename(stage, out_dir)
    except BaseException:
        os.rename(prev, out_dir)
        raise


def _read_manifest(folder: Path) -> dict[str, object] | None:
    """The manifest dsctl left in ``folder``, or None (missing, not a regular file, not dsctl's JSON)."""
    path = folder / MANIFEST_NAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MANIFEST_MAX_BYTES:
            return None
        data = json.loads(os.read(fd, _MANIFEST_MAX_BYTES + 1).decode("utf-8"))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    if not isinstance(data, dict) or data.get("written_by") != "dsctl" or not isinstance(data.get("files"), list):
        return None
    return data


def _listing(folder: Path) -> tuple[set[str], set[str], list[str]]:
    """Regular files, folders and anything else under ``folder`` (relative paths, links not followed)."""
    files: set[str] = set()
    dirs: set[str] = set()
    other: list[str] = []
    for root, subdirs, names in os.walk(folder):
        rel = os.path.relpath(root, folder)
        for name in (*subdirs, *names):
            full = os.path.join(root, name)
            key = os.path.normpath(os.path.join(rel, name))
            mode = os.lstat(full).st_mode
            if stat.S_ISDIR(mode):
                dirs.add(key)
            elif stat.S_ISREG(mode):
                files.add(key)
            else:
                other.append(key)
    return files, dirs, other


def job_outputs(folder: Path) -> tuple[list[str], list[str]]:
    """The job-output patterns ``folder``'s manifest declares and its top-level regular files matching one."""
    manifest = _read_manifest(folder)
    raw = manifest.get("job_outputs", []) if manifest is not None else []
    patterns = [p for p in raw if isinstance(p, str) and p and "/" not in p] if isinstance(raw, list) else []
    names = manifest.get("files", []) if manifest is not None else []
    listed = {str(name) for name in names} if isinstance(names, list) else set()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return patterns, []
    found = sorted(e.name for e in entries if e.name not in listed and e.name != MANIFEST_NAME
                   and e.is_file(follow_symlinks=False) and any(fnmatch.fnmatchcase(e.name, p) for p in patterns))
    return patterns, found


def foreign_reason(folder: Path, *, allow_job_outputs: bool = True) -> str | None:
    """Why ``folder`` (an existing real folder) is not one dsctl wrote; None when dsctl wrote it or it is empty.

    Files matching the manifest's ``job_outputs`` patterns are accepted unless ``allow_job_outputs`` is False
    (a ``.prev`` about to be deleted: job outputs are never deleted)."""
    files, dirs, other = _listing(folder)
    if not files and not dirs and not other:
        return None
    manifest = _read_manifest(folder)
    if manifest is None:
        return f"it has no {MANIFEST_NAME} (dsctl leaves one in every folder it writes)"
    names = manifest["files"]
    listed = {os.path.normpath(str(name)) for name in names} if isinstance(names, list) else set()
    listed.add(MANIFEST_NAME)
    logs = set(job_outputs(folder)[1])
    if logs and not allow_job_outputs:
        return f"it holds job outputs ({', '.join(sorted(logs)[:3])}), which dsctl never deletes"
    extra = sorted(other) + sorted(files - listed - logs)
    parents = {os.path.normpath(p) for name in listed for p in Path(name).parents if str(p) != "."}
    extra += sorted(dirs - parents)
    if extra:
        more = f" and {len(extra) - 3} more" if len(extra) > 3 else ""
        return f"it holds {', '.join(extra[:3])}{more}, which dsctl did not write there"
    return None


def _check_existing(out_dir: Path, option: str) -> None:
    if out_dir.is_symlink():
        raise InputError(f"{option} {out_dir} is a symbolic link; dsctl replaces the {option} folder whole, so "
                         "give the real folder")
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise InputError(f"{option} {out_dir}: exists and is {_kind(os.lstat(out_dir).st_mode)}, not a folder",
                         hint=f"give a new folder name for {option}")
    _check_no_input_inside(out_dir, option)
    reason = foreign_reason(out_dir)
    if reason is not None:
        raise InputError(f"{option} {out_dir}: the folder exists and was not written by dsctl ({reason}); dsctl "
                         f"replaces an {option} folder whole, so it replaces only one it wrote",
                         hint=f"give a new folder for {option}, or move {out_dir} away; nothing was changed")


def _check_prev(prev: Path, out_dir: Path, option: str) -> None:
    """``DIR.prev`` is deleted for the folder being replaced only if dsctl wrote it."""
    why = None
    if prev.is_symlink() or not prev.is_dir():
        why = f"it is {_kind(os.lstat(prev).st_mode)}"
    else:
        why = foreign_reason(prev, allow_job_outputs=False)
    if why is not None:
        raise InputError(f"{option} {out_dir}: {prev} exists and was not written by dsctl ({why}); dsctl keeps the "
                         f"folder it replaces as {prev.name} and would delete it",
                         hint=f"move {prev} away, or give a new folder for {option}; nothing was changed")


def _check_out_dir(out_dir: Path, option: str) -> Path:
    """Refuse an ``--out-dir`` folder dsctl may not replace (see the module docstring); returns its parent."""
    here = Path.cwd().resolve()
    target = out_dir.resolve()
    if target == here or target in here.parents or out_dir.name in ("", ".", ".."):
        raise InputError(f"{option} {out_dir} is the current folder or one above it; dsctl replaces the whole "
                         f"{option} folder, so give a folder of its own", hint=f"e.g. {option} plan/")
    _check_existing(out_dir, option)
    parent = out_dir.parent if str(out_dir.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"cannot write into {out_dir}: folder {parent} does not exist")
    prev = out_dir.with_name(out_dir.name + PREV_SUFFIX)
    if out_dir.is_dir() and any(os.scandir(out_dir)) and os.path.lexists(prev):
        _check_no_input_inside(prev, option, f"{prev.name} is deleted for the folder {option} replaces")
        _check_prev(prev, out_dir, option)
    return parent


def _write_manifest(stage: Path, patterns: Sequence[str] = ()) -> None:
    from dsctl import __version__

    files, _dirs, _other = _listing(stage)
    argv = sys.argv if sys.argv and Path(sys.argv[0]).name in ("dsctl", "__main__.py") else ["dsctl"]
    command = " ".join(["dsctl", *argv[1:]])[:4096]
    data = {"written_by": "dsctl", "version": __version__, "command": command,
            "files": sorted(files - {MANIFEST_NAME})}
    if patterns:
        data["job_outputs"] = sorted(set(patterns))
    (stage / MANIFEST_NAME).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def _carry(names: Sequence[str], src: Path, dst: Path) -> list[str]:
    """Move the job outputs ``names`` from ``src`` to ``dst`` (renames: same inode); returns those moved."""
    moved: list[str] = []
    for name in names:
        if os.path.lexists(dst / name):
            continue  # the new run wrote a file of that name: the old one stays and goes to .prev
        try:
            os.rename(src / name, dst / name)
        except FileNotFoundError:
            continue
        moved.append(name)
    return moved


@contextmanager
def staged_directory(out_dir: Path, option: str = "--out-dir", job_outputs: Sequence[str] = ()) -> Iterator[Path]:
    """Yield an empty sibling temporary folder; on success it replaces ``out_dir`` in one rename.

    ``out_dir`` may exist only as a folder dsctl wrote (or an empty one); the folder replaced is kept as
    ``out_dir.prev`` (replacing an older dsctl ``.prev``), so the result never mixes files of two runs. On any
    exception, SIGTERM or SIGHUP nothing at ``out_dir`` changes and the temporary folder is removed. The
    manifest (:data:`MANIFEST_NAME`) listing the files written is added before the swap. ``job_outputs``: name
    patterns (``fnmatch``, top level) of files the job will write into the folder (see the module docstring);
    those the replaced folder holds are moved into the new one.
    """
    out_dir = Path(out_dir)
    parent = _check_out_dir(out_dir, option)
    _sweep_stale(parent, out_dir.name)
    with cleanup_on_signals():
        stage = Path(tempfile.mkdtemp(prefix=_temp_prefix(out_dir.name), dir=parent))
        try:
            stage.chmod(0o777 & ~_umask())  # mkdtemp makes 0700; the final folder should look like any other
            yield stage
            old_patterns, old_logs = _old_job_outputs(out_dir)
            _write_manifest(stage, [*job_outputs, *old_patterns])
            _check_out_dir(out_dir, option)  # again, just before: either folder may have changed during the run
            carried = _carry(old_logs, out_dir, stage)
            try:
                _swap_in(stage, out_dir)
            except BaseException:
                _carry(carried, stage, out_dir)
                raise
        finally:
            if stage.exists():
                shutil.rmtree(stage, ignore_errors=True)


def _old_job_outputs(out_dir: Path) -> tuple[list[str], list[str]]:
    """Patterns and matching files of the folder about to be replaced (patterns kept only if files match)."""
    if out_dir.is_symlink() or not out_dir.is_dir():
        return [], []
    patterns, logs = job_outputs(out_dir)
    used = [p for p in patterns if any(fnmatch.fnmatchcase(name, p) for name in logs)]
    return used, logs


def write_files(out_dir: Path, files: Mapping[str, str | bytes], option: str = "--out-dir",
                job_outputs: Sequence[str] = ()) -> list[Path]:
    """Write several files into ``out_dir`` all-or-nothing; returns their final paths. A ``files`` mapping with a
    ``pieces(name)`` method (e.g. ``storage chains``' tables) is streamed piece by piece into the staged folder.

    A refused folder (foreign, holding an input) or an OS refusal (read-only or pseudo file system, no space)
    raises ``InputError`` naming ``option``. ``job_outputs``: see :func:`staged_directory`.
    """
    try:
        with staged_directory(out_dir, option, job_outputs) as stage:
            pieces = getattr(files, "pieces", None)  # a mapping that renders its texts a piece at a time
            for name in files:
                target = stage / name
                target.parent.mkdir(parents=True, exist_ok=True)
                if pieces is None:
                    content = files[name]
                    target.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
                    continue
                with target.open("wb") as out:  # streamed: never the whole text in memory
                    for piece in pieces(name):
                        out.write(piece.encode("utf-8") if isinstance(piece, str) else piece)
    except OSError as exc:
        raise _refused(option, Path(out_dir), exc) from None
    return [Path(out_dir) / name for name in files]
