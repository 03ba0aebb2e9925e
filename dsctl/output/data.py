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


def to_data(obj: Any) -> Any:
    """Recursively convert ``obj``.

    Objects with a ``to_data()`` method decide their own shape; dataclasses become dicts in field
    order (fields with ``metadata={"output": False}`` are skipped); numpy arrays become nested lists;
    non-finite floats become ``None`` (JSON has no NaN).
    """
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, Enum):
        return to_data(obj.value)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    np = sys.modules.get("numpy")  # no numpy object exists before numpy is imported: start-up need not pay for it
    if np is not None and isinstance(obj, np.ndarray):
        if obj.dtype.kind == "f" and not np.all(np.isfinite(obj)):
            return to_data(obj.astype(object).tolist())
        return obj.tolist()
    if np is not None and isinstance(obj, np.generic):
        return to_data(obj.item())
    if isinstance(obj, Path):
        return str(obj)
    custom = getattr(obj, "to_data", None)
    if callable(custom) and not isinstance(obj, type):
        return to_data(custom())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            f.name: to_data(getattr(obj, f.name))
            for f in dataclasses.fields(obj)
            if f.metadata.get("output", True)
        }
    if isinstance(obj, dict):
        return {str(k): to_data(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_data(v) for v in obj]
    raise TypeError(f"cannot convert {type(obj).__name__} to output data")
