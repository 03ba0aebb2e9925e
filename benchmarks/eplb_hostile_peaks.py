"""Peak memory and wall time of issue 33's hostile eplb inputs, each in a fresh process: every ``.pt`` file of
tests/hostile_pickles.py given to ``dsctl eplb rebalance``, and every large input of tests/hostile_eplb.py. The
target is exit 2, < 300 MiB and < 10 s each.

    PYTHONPATH=. python -m benchmarks.eplb_hostile_peaks [--only build_on_storage,balanced_large]

Peaks are ``ru_maxrss`` of the child (``wait4``; it counts the parent's pages a fork copies, so the inputs are
built in children too and this process stays small); wall time includes the CLI's start-up (~0.5 s). The numbers
in docs/eplb.md and docs/reliability.md come from this.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.memory_peaks import _child
from tests.hostile_eplb import CASES
from tests.hostile_pickles import HOSTILE

_WRITE_PT = ("import sys; from tests.hostile_pickles import HOSTILE; "
             "open(sys.argv[2], 'wb').write(HOSTILE[sys.argv[1]][1]())")
_WRITE_ARGS = ("import json, sys; from pathlib import Path; from tests.hostile_eplb import CASES; "
               "print(json.dumps(CASES[sys.argv[1]][1](Path(sys.argv[2]))))")


def _argv(name: str, tmp: Path) -> tuple[str, list[str]]:
    """(what the case is, the dsctl argv), its files written by a child process."""
    if name in HOSTILE:
        path = tmp / f"{name}.pt"
        _child([sys.executable, "-c", _WRITE_PT, name, str(path)])
        return HOSTILE[name][0], ["eplb", "rebalance", str(path), "--replicas", "4", "--gpus", "2", "--nodes", "1"]
    out = tmp / "args.json"
    with open(out, "w") as handle:
        subprocess.run([sys.executable, "-c", _WRITE_ARGS, name, str(tmp)], stdout=handle, check=True,
                       env={"PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    return CASES[name][0], json.loads(out.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.eplb_hostile_peaks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join([*HOSTILE, *CASES]))
    args = parser.parse_args(argv)
    worst = 0
    for name in args.only.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            what, dsctl_args = _argv(name, Path(tmp))
            code, wall, peak, line = _child([sys.executable, "-m", "dsctl", *dsctl_args])
        ok = code == 2 and peak < 300 and wall < 10
        worst = max(worst, 0 if ok else 1)
        print(f"{name} ({what}): exit {code}, {wall:.2f} s, peak {peak:.0f} MiB{'' if ok else '  <-- over target'}: "
              f"{line}", flush=True)
    return worst


if __name__ == "__main__":
    sys.exit(main())
