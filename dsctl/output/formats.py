"""The ``--format`` values, in a module light enough for start-up (no rich, yaml or numpy)."""

from __future__ import annotations

from enum import Enum


class OutputFormat(str, Enum):
    """Values of every command's ``--format`` option."""

    table = "table"
    json = "json"
    yaml = "yaml"
