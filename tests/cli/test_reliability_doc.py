"""docs/reliability.md: every listed hostile input and fault ends with its documented exit code, and the file is
what tests/make_reliability_doc.py writes from that run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.make_reliability_doc import DOC, expected_doc
from tests.reliability_cases import CASES, FAULTS, Case, run_case


def _id(case: Case) -> str:
    return f"{case.family}-{case.input_class}-{case.example}"[:80]


@pytest.mark.parametrize("case", CASES + FAULTS, ids=_id)
def test_case_ends_with_its_documented_exit_code(case: Case, tmp_path: Path) -> None:
    if case.args is None and case.fault is not None and "/dev/full" in case.input_class \
            and not Path("/dev/full").exists():
        pytest.skip("needs /dev/full")
    code, first_line = run_case(case, tmp_path)
    assert code == case.exit_code, first_line
    if code == 2 and case.args is not None:
        assert first_line.startswith("error: ")


def test_reliability_doc_is_current() -> None:
    assert DOC.read_text(encoding="utf-8") == expected_doc(), (
        "docs/reliability.md is stale: run PYTHONPATH=. python tests/make_reliability_doc.py")
