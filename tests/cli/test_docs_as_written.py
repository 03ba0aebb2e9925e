"""Issue 30 item 3, docs that run as written: every ``$ `` line of the README and docs/*.md runs literally, in page
order, in one bash session per page, in a fresh folder (the README's own ``dsctl examples try/`` and ``cd try/``
make its folder; every docs page starts in a fresh ``dsctl examples`` folder), and ends with the exit code the page
states: 0 unless the line's comment starts with ``exit N`` (``$ dsctl storage check-chains d25bad/  # exit 1: ...``).

Lines that need what a test machine has not got (a GPU, Slurm, a live fabric, a cluster's files) are listed in
NEEDS with the reason and are not run; the test prints the count of lines run, passed and skipped.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docs_pages import PAGES, ROOT, dollar_lines

#: line prefix (after "$ ") -> why it is not run here
NEEDS = {
    "pip install": "installs dsctl itself (the test runs this checkout's dsctl)",
    "ibnetdiscover": "a live InfiniBand fabric",
    "dsctl health check --node-profile": "live NVML on a GPU node",
    "dsctl health check --slurm-healthcheck": "Slurm's HealthCheckProgram on a GPU node",
    "dsctl health check --textfile-dir": "live NVML on a GPU node",
    "dsctl health record": "live NVML on a GPU node (and it would overwrite the shipped node.yaml)",
    "dsctl health show  ": "live NVML and sysfs of a GPU node",
    "dsctl health topo  ": "live NVML and sysfs of a GPU node",
    "dsctl health fleet": "Slurm (srun) and GPU nodes",
    "dsctl health burn-in fabric/ -w": "Slurm (srun) and the probe on GPU nodes",
    "dsctl launch --nodes 256 --backend slurm --job-name v3 --submit": "Slurm (sbatch)",
    "dsctl --profiles-dir cpu launch": "the CI Slurm cluster (docs/launch-run.md, real runs)",
    "grep -v '^W' e2e/": "the output of a real Slurm job",
    "dsctl trace overlap '/local": "Slurm (srun) and traces on the nodes",
    "dsctl launch --nodes 256 --backend kubernetes --image r/t:1 --submit": "a host without kubectl (the case the "
                                                                           "page shows; exit 1 where one is installed)",
    "dsctl trace stragglers 'rank*.json'": "a synthetic 64-rank job whose parameters the page does not give",
    "dsctl trace stragglers w8-sleep/": "real torch gloo jobs that tests/real_traces.py records (timings differ "
                                        "every run; tests/cli/test_trace_real.py checks them)",
    "dsctl trace stragglers 'traces/*.json' --ranks": "2,048 synthetic trace files (17 s to build on 2 cores; "
                                                      "tests/cli/test_trace_place.py seeds the same job in memory)",
    "dsctl health check\n": "live NVML on a GPU node",
}
#: seconds one page's lines may take together
PAGE_TIMEOUT_S = 600
EXIT = re.compile(r"^exit (\d)\b")


@dataclass(frozen=True)
class Line:
    """One ``$ `` line of a page: the command (continuations joined, comment dropped), the exit code the page
    states for it, and why it is not run (empty when it runs)."""

    command: str
    exit_code: int
    skip: str


def page_lines(page: Path) -> list[Line]:
    """Every ``$ `` line in the fenced blocks of ``page``, in order, with its stated exit code and skip reason."""
    found = []
    for line in dollar_lines(page):
        stated = EXIT.match(line.comment)
        skip = next((why for prefix, why in NEEDS.items() if (line.command + "\n").startswith(prefix)
                     or (line.command + "  ").startswith(prefix)), "")
        found.append(Line(line.command, int(stated.group(1)) if stated else 0, skip))
    return found


def run_page(page: Path, folder: Path, dsctl: Path | None = None) -> list[tuple[Line, int | None]]:
    """Run the page's lines in one bash session in ``folder``; (line, exit code or None when skipped). ``dsctl``
    is the command the lines call (default: this checkout through this interpreter)."""
    lines = page_lines(page)
    shim = folder.parent / "bin"
    shim.mkdir(exist_ok=True)
    target = shlex.quote(str(dsctl)) if dsctl is not None else f"{shlex.quote(sys.executable)} -m dsctl"
    (shim / "dsctl").write_text(f'#!/bin/sh\nexec {target} "$@"\n')
    (shim / "dsctl").chmod(0o755)
    codes = folder.parent / "codes.txt"
    script = ["set +e"]
    for n, line in enumerate(lines):
        if not line.skip:
            script += [line.command, f"__rc=$?; echo \"{n} $__rc\" >> {shlex.quote(str(codes))}; (exit $__rc)"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSCTL_") and k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PATH=f"{shim}:{env.get('PATH', '')}", COLUMNS="100")
    if dsctl is None:
        env["PYTHONPATH"] = str(ROOT)
    subprocess.run(["bash", "-c", "\n".join(script)], cwd=folder, env=env, stdin=subprocess.DEVNULL,
                   capture_output=True, timeout=PAGE_TIMEOUT_S, check=False)
    got = {}
    if codes.exists():
        for row in codes.read_text().splitlines():
            n, code = row.split()
            got[int(n)] = int(code)
    return [(line, None if line.skip else got.get(n, -1)) for n, line in enumerate(lines)]


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_documented_line_runs_as_written(page: Path, tmp_path: Path) -> None:
    if not page_lines(page):
        pytest.skip("no $ lines")
    folder = tmp_path / "work"
    if page.name == "README.md":  # the README makes its own examples folder (its first lines)
        folder.mkdir()
    else:
        subprocess.run([sys.executable, "-m", "dsctl", "examples", str(folder)], check=True, capture_output=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    results = run_page(page, folder)
    wrong = [(line.command, line.exit_code, code) for line, code in results if code is not None
             and code != line.exit_code]
    ran = sum(1 for _, code in results if code is not None)
    print(f"{page.name}: {len(results)} lines, {ran} run, {ran - len(wrong)} as documented, "
          f"{len(results) - ran} skipped (need a GPU, Slurm or a cluster)")
    assert wrong == [], "\n".join(f"{c!r}: documented exit {want}, got {got}" for c, want, got in wrong)
