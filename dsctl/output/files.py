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

The rule is applied here; two jobs it relies on live beside it: :mod:`dsctl.output.folder_manifest` (reading a
folder's manifest: is this folder dsctl's?) and :mod:`dsctl.output.temporaries` (pid-named temporaries, their sweep
after a killed run, SIGTERM/SIGHUP turned into an unwinding exception). What the command read is asked through
:func:`dsctl.inputs.input_inside`. A reader auditing "can dsctl destroy a file it did not write?" starts here: every
delete and replace is in this module, and each asks those three first.
"""

from __future__ import annotations

import ctypes
import errno
import fnmatch
import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from dsctl.errors import InputError
from dsctl.inputs import INPUTS_READ, input_inside
from dsctl.output.folder_manifest import MANIFEST_NAME, foreign_reason, job_outputs, listing
from dsctl.output.temporaries import cleanup_on_signals, sweep_stale, temp_prefix

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


def _check_noinput_inside(folder: Path, option: str, role: str = "") -> None:
    """Refuse replacing (or deleting) a folder that holds (or is) one of the command's inputs."""
    found = input_inside(folder)
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
        sweep_stale(parent, path.name)
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
        fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path.name), suffix=".tmp", dir=parent)
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
    name = parent / f"{temp_prefix(path.name)}{os.urandom(6).hex()}.old"
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


def _check_existing(out_dir: Path, option: str) -> None:
    if out_dir.is_symlink():
        raise InputError(f"{option} {out_dir} is a symbolic link; dsctl replaces the {option} folder whole, so "
                         "give the real folder")
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise InputError(f"{option} {out_dir}: exists and is {_kind(os.lstat(out_dir).st_mode)}, not a folder",
                         hint=f"give a new folder name for {option}")
    _check_noinput_inside(out_dir, option)
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
        _check_noinput_inside(prev, option, f"{prev.name} is deleted for the folder {option} replaces")
        _check_prev(prev, out_dir, option)
    return parent


def _write_manifest(stage: Path, patterns: Sequence[str] = ()) -> None:
    from dsctl import __version__

    files, _dirs, _other = listing(stage)
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
    sweep_stale(parent, out_dir.name)
    with cleanup_on_signals():
        stage = Path(tempfile.mkdtemp(prefix=temp_prefix(out_dir.name), dir=parent))
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
