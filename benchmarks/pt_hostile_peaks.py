"""Peak memory and wall time of every hostile ``.pt`` file of tests/hostile_pickles.py (issue 33), each given to
``dsctl eplb rebalance`` in a fresh process; the target is < 300 MiB and < 10 s each, exit 2.

    PYTHONPATH=. python -m benchmarks.pt_hostile_peaks [--only build_on_storage,stride_zero]

Peaks are ``ru_maxrss`` of the child (``wait4``; it counts the parent's pages a fork copies, so the files are
built in children too and this process stays small); wall time includes the CLI's start-up. The numbers in
docs/eplb.md and docs/reliability.md come from this.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from benchmarks.memory_peaks import _child
from tests.hostile_pickles import HOSTILE


_WRITE = "import sys; from tests.hostile_pickles import HOSTILE; open(sys.argv[2], 'wb').write(HOSTILE[sys.argv[1]][1]())"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pt_hostile_peaks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(HOSTILE))
    args = parser.parse_args(argv)
    worst = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only.split(","):
            what = HOSTILE[name][0]
            path = Path(tmp) / f"{name}.pt"
            _child([sys.executable, "-c", _WRITE, name, str(path)])  # built in a child: this process stays small
            code, wall, peak, line = _child([sys.executable, "-m", "dsctl", "eplb", "rebalance", str(path),
                                             "--replicas", "4", "--gpus", "2", "--nodes", "1"])
            ok = code == 2 and peak < 300 and wall < 10
            worst = max(worst, 0 if ok else 1)
            print(f"{name} ({what}; {path.stat().st_size:,} bytes): exit {code}, {wall:.2f} s, peak {peak:.0f} MiB"
                  f"{'' if ok else '  <-- over target'}: {line}", flush=True)
    return worst


if __name__ == "__main__":
    sys.exit(main())
