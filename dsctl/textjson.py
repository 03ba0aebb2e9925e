"""Read JSON given as text, turning every way it can fail into one InputError naming the source."""

from __future__ import annotations

import json
from typing import Any

from dsctl.errors import InputError


def load_json(text: str, source: str, **kwargs: Any) -> Any:
    """``json.loads(text)`` for user files: syntax errors give the line and column; absurd nesting or integers too
    long for Python (over 4,300 digits) are reported as bad input instead of crashing."""
    try:
        return json.loads(text, **kwargs)
    except json.JSONDecodeError as exc:
        raise InputError(f"{source}: not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        raise InputError(f"{source}: JSON nested too deeply (thousands of levels); this is not a dsctl input") from None
    except ValueError as exc:  # e.g. "Exceeds the limit (4300 digits) for integer string conversion"
        raise InputError(f"{source}: unreadable JSON value: {str(exc).split(';')[0]}") from None
