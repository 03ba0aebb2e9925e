"""Turn result objects into plain JSON-ready data (dicts, lists, str, int, float, bool, None)."""

from __future__ import annotations

import dataclasses
import math
import sys
from enum import Enum
from pathlib import Path
from typing import Any

#: bump when a documented JSON key changes meaning or disappears (adding keys does not bump it)
SCHEMA_VERSION = 2  # 2: issue 22 renamed topology simulate *_gbyte_s to *_bytes_per_s


def to_data(obj: Any, *, keep_int_arrays: bool = False) -> Any:
    """Recursively convert ``obj``.

    Objects with a ``to_data()`` method decide their own shape; dataclasses become dicts in field
    order (fields with ``metadata={"output": False}`` are skipped); numpy arrays become nested lists;
    non-finite floats become ``None`` (JSON has no NaN). ``keep_int_arrays``: integer numpy arrays stay arrays
    (for :mod:`dsctl.output.json_text`, which writes them without a Python int per element).
    """
    return _to_data(obj, keep_int_arrays)


def _to_data(obj: Any, keep: bool) -> Any:
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, Enum):
        return _to_data(obj.value, keep)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    np = sys.modules.get("numpy")  # no numpy object exists before numpy is imported: start-up need not pay for it
    if np is not None and isinstance(obj, np.ndarray):
        if keep and obj.dtype.kind in "iu" and obj.ndim:
            return obj
        if obj.dtype.kind == "f" and not np.all(np.isfinite(obj)):
            return _to_data(obj.astype(object).tolist(), keep)
        return obj.tolist()
    if np is not None and isinstance(obj, np.generic):
        return _to_data(obj.item(), keep)
    if isinstance(obj, Path):
        return str(obj)
    custom = getattr(obj, "to_data", None)
    if callable(custom) and not isinstance(obj, type):
        return _to_data(custom(), keep)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            f.name: _to_data(getattr(obj, f.name), keep)
            for f in dataclasses.fields(obj)
            if f.metadata.get("output", True)
        }
    if isinstance(obj, dict):
        return {str(k): _to_data(v, keep) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [_to_data(v, keep) for v in obj]
    raise TypeError(f"cannot convert {type(obj).__name__} to output data")
