"""dsctl health fleet through a fake srun that behaves as the real one where it broke (issue 32): it runs the
fleet wrapper on each "node" here and prints the output as srun --label does, long lines cut into labelled pieces
of at most 1,024 bytes (tests/fake_srun.py). Each node's dsctl is this checkout's, replaying a record."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "health"

FAKE_SRUN = '''#!{python}
import json, os, subprocess, sys
sys.path.insert(0, {root!r})
from dsctl.cluster.hostlist import expand
from tests.fake_srun import labelled
args = sys.argv[1:]
cut = args.index("sh")
nodes = expand(next(a.split("=", 1)[1] for a in args[:cut] if a.startswith("--nodelist=")))
outputs, lines = {{}}, {{}}
for task, node in enumerate(nodes):
    done = subprocess.run(args[cut:], env={{**os.environ, "SLURMD_NODENAME": node}}, capture_output=True,
                          stdin=subprocess.DEVNULL)
    outputs[task] = done.stdout
    lines[node] = done.stdout.count(b"\\n")
    sys.stderr.buffer.write(b"".join(b"%d: %s\\n" % (task, ln) for ln in done.stderr.splitlines()))
with open(os.environ["FAKE_SRUN_LOG"], "w") as log:
    json.dump(lines, log)
sys.stdout.buffer.write(labelled(outputs))
'''


def test_fleet_reads_one_line_answers_that_srun_cut(cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                    ) -> None:
    """The caller asks for indented JSON (DSCTL_JSON_INDENT=1, which srun passes on to the tasks): the wrapper
    still makes every node answer one line (header, answer, blank, trailer), srun cuts it into pieces, and the
    head node reads both nodes' reports: n1 healthy, n2 with its critical NVLink finding."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(FAKE_SRUN.format(python=sys.executable, root=str(ROOT)))
    (bin_dir / "sinfo").write_text("#!/bin/sh\nprintf 'n1 idle none\\nn2 idle none\\n'\n")
    node_dsctl = bin_dir / "dsctl-on-node"
    node_dsctl.write_text(f"#!/bin/sh\nexport PYTHONPATH={ROOT}\nexec {sys.executable} -m dsctl \"$@\"\n")
    for path in (bin_dir / "srun", bin_dir / "sinfo", node_dsctl):
        path.chmod(0o755)
    records = tmp_path / "records"
    records.mkdir()
    (records / "n1.yaml").write_bytes((DATA / "hgx_h800_healthy.yaml").read_bytes())
    (records / "n2.yaml").write_bytes((DATA / "nvlink_link_down.yaml").read_bytes())
    log = tmp_path / "lines.json"
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SRUN_LOG", str(log))
    monkeypatch.setenv("DSCTL_JSON_INDENT", "1")
    res = cli("health", "fleet", "-w", "n[1-2]", "--from-record", records / "{node}.yaml", "--dsctl", node_dsctl,
              "--timeout-s", "60", "-f", "json")
    data = json.loads(res.stdout)
    assert [(v["node"], v["status"], v["reason"]) for v in data["nodes"]] == [
        ("n1", "healthy", ""), ("n2", "crit", "")], res.stderr
    assert {(f["node"], f["check"], f["severity"]) for f in data["findings"]} == {("n2", "G6", "CRIT")}
    assert json.loads(log.read_text()) == {"n1": 4, "n2": 4}  # one answer line each, well over 1,024 bytes
