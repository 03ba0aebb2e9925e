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


def atomic_write(path: Path, content: str | bytes) -> None:
    """Write ``content`` to ``path`` via a temporary sibling and ``os.replace``."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"cannot write {path}: folder {parent} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600
        with os.fdopen(fd, "wb") as handle:
            handle.write(content.encode("utf-8") if isinstance(content, str) else content)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
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


def write_files(out_dir: Path, files: Mapping[str, str | bytes]) -> list[Path]:
    """Write several files into ``out_dir`` all-or-nothing; returns their final paths."""
    with staged_directory(out_dir) as stage:
        for name, content in files.items():
            target = stage / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return [Path(out_dir) / name for name in files]
