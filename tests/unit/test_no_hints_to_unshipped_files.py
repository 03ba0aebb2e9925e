"""Messages, hints and help texts never send a user to a file the installed wheel lacks (docs/*.md, README)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "dsctl"
UNSHIPPED = re.compile(r"docs/|\b[\w-]+\.md\b|\bREADME\b(?! formula| figures| table)")


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def test_no_user_visible_string_points_at_docs_or_readme() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
                    and UNSHIPPED.search(node.value)):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value[:80]!r}")
    assert offenders == []
