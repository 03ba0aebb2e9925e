"""Issue 23: docs and output in the same units. Every ``$ dsctl ...`` line of the README and docs/*.md runs (in its
page's order, in a folder of its own, so that a later example finds what an earlier one wrote), and every number
with a unit that the page quotes under it (``7,290.00 GB/s``, ``61.52 GiB``, ``35.3 %``) must be in what the
command prints now: a page that says TiB/s where dsctl prints GB/s, or quotes a stale figure, fails here.

Examples that need what a test machine has not got are listed in NEEDS with the reason; anything else runs. A
``$ cat NAME`` whose file no earlier example made and no shipped example input provides writes NAME with the lines
the page shows (the page gives the reader that file's text; a ``cat`` of a file dsctl wrote is left alone).
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.docs_pages import PAGES, ROOT, dollar_lines

_UNIT = r"(?:[KMGTPE]i?B(?:/s)?|[KMGT]b/s|ms|us|µs|s|h|%)"
NUMBER = re.compile(r"(?<![\w.,])(\d[\d,]*(?:\.\d+)?) ?(" + _UNIT + r")(?![\w/])")
#: command prefix -> why it does not run here
NEEDS = {
    "dsctl health fleet": "Slurm (srun)",
    "dsctl health check --slurm-healthcheck": "Slurm (scontrol) on a node",
    "dsctl health record": "live NVML",
    "dsctl --profiles-dir cpu launch": "the CI Slurm cluster (docs/launch-run.md, real runs)",
    "dsctl launch --nodes 256 --backend slurm --job-name v3 --submit": "Slurm (sbatch)",
    "dsctl trace stragglers 'rank*.json'": "a synthetic 64-rank job whose parameters the page does not give",
    "dsctl trace overlap '/local": "Slurm (srun) and traces on the nodes",
    "dsctl trace stragglers w8-sleep/": "real torch gloo jobs that tests/real_traces.py records (wall-clock timings, "
                                        "different every run; tests/cli/test_trace_real.py checks them)",
    "dsctl trace stragglers 'traces/*.json' --ranks": "2,048 synthetic trace files (17 s to build on 2 cores; "
                                                      "tests/cli/test_trace_place.py seeds the same job in memory)",
}
#: pages whose examples read files made by a script the page names (run first, in the page's folder)
SETUP = {"trace.md": [sys.executable, str(ROOT / "tests" / "trace_builder.py"), "ep"]}


def examples(page: Path) -> list[tuple[str, list[str]]]:
    """(command, the lines quoted under it) for each ``$ dsctl`` line of ``page``'s code blocks (and ``$ cat``)."""
    return [(line.command, list(line.quoted)) for line in dollar_lines(page)
            if (line.command.startswith("dsctl ") and "|" not in line.command and " ... " not in line.command)
            or re.fullmatch(r"cat [\w./-]+", line.command)]


def _numbers(lines: list[str]) -> list[str]:
    return [f"{n} {u}" for line in lines for n, u in NUMBER.findall(line)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_numbers_a_page_quotes_are_what_dsctl_prints(page: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch, cli: Any) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "tests").symlink_to(ROOT / "tests")  # pages name tests/data/... from the repository root
    shutil.copytree(ROOT / "dsctl" / "_example_data", work, dirs_exist_ok=True)  # dsctl examples' inputs
    (work / "train.py").write_text("print('train')\n")
    monkeypatch.chdir(work)
    monkeypatch.setenv("COLUMNS", "120")
    if page.name in SETUP:
        subprocess.run(SETUP[page.name], cwd=work, check=True, capture_output=True)
    found = examples(page)
    last = max((i for i, (c, quoted) in enumerate(found) if _numbers(quoted) and c.startswith("dsctl ")),
               default=-1)
    wrong = []
    for command, quoted in found[:last + 1]:  # later examples quote nothing (the walkthrough runs those)
        if any(command.startswith(prefix) for prefix in NEEDS):
            continue
        if command.startswith("cat "):
            shown = work / command[4:]
            if not shown.exists():
                shown.parent.mkdir(parents=True, exist_ok=True)
                shown.write_text("\n".join(quoted) + "\n", encoding="utf-8")
            continue
        result = cli(*shlex.split(command)[1:])
        assert "Traceback" not in result.stderr and result.exit_code != 4, (command, result.stderr)
        text = result.stdout + result.stderr
        flat = " ".join(text.split())
        missing = [q for q in _numbers(quoted) if q not in flat and q.replace(" ", "") not in flat]
        if missing:
            wrong.append((command, missing[:4]))
    assert wrong == [], "\n".join(map(str, wrong))
