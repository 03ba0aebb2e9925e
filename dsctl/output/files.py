"""Write output files so that a failure never leaves a partial file behind.

Every file is written to a temporary name in the destination folder, then renamed into place.
"""

from __future__ import annotations

import os
import shutil
import tempfile
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
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
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


@contextmanager
def staged_directory(out_dir: Path) -> Iterator[Path]:
    """Yield a temporary folder; on success move every file in it into ``out_dir`` (created if needed).

    On any exception nothing in ``out_dir`` changes and the temporary folder is removed.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--out {out_dir} exists and is not a folder")
    parent = out_dir.parent if str(out_dir.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"cannot write into {out_dir}: folder {parent} does not exist")
    stage = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=parent))
    stage.chmod(0o777 & ~_umask())  # mkdtemp makes 0700; the final folder should look like any other
    try:
        yield stage
        if not out_dir.exists():
            os.replace(stage, out_dir)
            return
        for item in sorted(stage.rglob("*")):
            if item.is_file():
                target = out_dir / item.relative_to(stage)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(item, target)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def write_files(out_dir: Path, files: Mapping[str, str | bytes], option: str = "--out") -> list[Path]:
    """Write several files into ``out_dir`` all-or-nothing; returns their final paths.

    An OS refusal (read-only or pseudo file system, no space) raises ``InputError`` naming ``option``.
    """
    try:
        with staged_directory(out_dir) as stage:
            for name, content in files.items():
                target = stage / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    except OSError as exc:
        raise _refused(option, Path(out_dir), exc) from None
    return [Path(out_dir) / name for name in files]
