"""The one check that a command refused its input the way dsctl refuses: exit 2, no output (with --format json
the error envelope only), one ``error: ...`` line first on stderr, never a traceback, and the expected words."""

from __future__ import annotations

import json
from typing import Any


def assert_refused(result: Any, *needles: str, first_line: bool = False) -> None:
    """``needles`` must appear in the error line (``first_line``) or anywhere on stderr."""
    assert result.exit_code == 2, (result.exit_code, result.stderr[-600:])
    if result.stdout:  # --format json/yaml: the error envelope, and nothing else
        assert "error" in json.loads(result.stdout), result.stdout[-300:]
    lines = result.stderr.splitlines()
    assert lines and lines[0].startswith("error: ") and "Traceback" not in result.stderr, result.stderr[-600:]
    where = lines[0] if first_line else result.stderr
    for needle in needles:
        assert needle in where, where[-600:]
