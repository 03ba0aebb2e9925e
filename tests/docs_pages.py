"""The ``$ `` lines of the README and docs/*.md, as a reader sees them: one parser for the tests that run them
(tests/cli/test_docs_as_written.py, tests/cli/test_docs_numbers.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@dataclass(frozen=True)
class DollarLine:
    """One ``$ `` line of a fenced block: the command (continuation lines joined), its ``  #`` comment (without
    the ``#``), and the lines the page shows under it (up to the next ``$`` line or the block's end)."""

    command: str
    comment: str
    quoted: tuple[str, ...]


def dollar_lines(page: Path) -> list[DollarLine]:
    """Every ``$ `` line in the fenced blocks of ``page``, in page order."""
    found = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```$", page.read_text(encoding="utf-8"), re.S | re.M):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            if lines[i].startswith("$ "):
                command = lines[i][2:]
                while command.rstrip().endswith("\\") and i + 1 < len(lines):
                    i += 1
                    command = command.rstrip()[:-1] + " " + lines[i].strip()
                quoted = []
                while i + 1 < len(lines) and not lines[i + 1].startswith("$ "):
                    i += 1
                    quoted.append(lines[i])
                command, _, comment = command.partition("  #")
                found.append(DollarLine(command.strip(), comment.strip(), tuple(quoted)))
            i += 1
    return found
