"""One confinement rule for paths built from input data: :func:`safe_join` keeps them inside their root folder."""

from __future__ import annotations

import os
from pathlib import Path

from dsctl.errors import InputError


def safe_join(root: Path | str, *parts: str, field: str = "path") -> Path:
    """``root / part / ...``, refusing anything that would leave ``root``.

    Each part is relative (no leading ``/``), has no ``..`` or empty component and no NUL byte; the joined path,
    with every symlink that already exists along it resolved, must still lie inside ``root`` (resolved the same
    way). Raises :class:`InputError` (exit 2) naming ``field`` otherwise. Returns the joined, unresolved path.
    """
    base = Path(root)
    for part in parts:
        text = str(part)
        pieces = text.split("/")
        if (not text or "\0" in text or text.startswith("/") or os.path.isabs(text)
                or any(p in ("", ".", "..") for p in pieces)):
            raise InputError(f"{field}: {text!r} is not a relative path inside its folder",
                             hint="names from input become path components: no leading /, no .., no empty part")
    joined = base.joinpath(*parts)
    real_root = os.path.realpath(base)
    real = os.path.realpath(joined)
    if os.path.commonpath([real_root, real]) != real_root:
        raise InputError(f"{field}: {'/'.join(parts)!r} leads outside its folder (through a symlink)",
                         hint="paths built from input must stay inside their folder")
    return joined
