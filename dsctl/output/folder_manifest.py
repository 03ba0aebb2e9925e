"""Is this folder dsctl's? The manifest dsctl leaves in every folder it writes (``--out-dir``, a submitted job's
folder) and the test a later run applies before replacing the folder: nothing there that the manifest does not
list, except the job outputs it declares. Reads only; :mod:`dsctl.output.files` writes the manifest and decides."""

from __future__ import annotations

import fnmatch
import json
import os
import stat
from pathlib import Path

#: the file dsctl leaves in every --out-dir folder: how a later run recognises a folder it may replace
MANIFEST_NAME = ".dsctl-manifest.json"
_MANIFEST_MAX_BYTES = 4 * 1024**2


def read_manifest(folder: Path) -> dict[str, object] | None:
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


def listing(folder: Path) -> tuple[set[str], set[str], list[str]]:
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
    manifest = read_manifest(folder)
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
    files, dirs, other = listing(folder)
    if not files and not dirs and not other:
        return None
    manifest = read_manifest(folder)
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
