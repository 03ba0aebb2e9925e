"""``storage expand``'s outputs over fixed shapes as sha256 digests: a speed change must keep every byte (issue 32).

    PYTHONPATH=. python -m benchmarks.storage_expand_bytes            # compare with storage_expand_bytes.json
    PYTHONPATH=. python -m benchmarks.storage_expand_bytes --write    # record the digests (only from main's code)
    PYTHONPATH=. python -m benchmarks.storage_expand_bytes --only 50  # shapes whose label starts with 50

Each shape generates a table with ``storage chains``' code (nodes x SSDs, k, targets per SSD or the default),
expands it and hashes every file it would write plus the result's figures (the steps, balance, counts, notes).
The largest shape (300 -> 330) takes most of the time; the whole run is about a minute of CPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
import time
from pathlib import Path

DIGESTS = Path(__file__).with_name("storage_expand_bytes.json")
# label: (old nodes, added, SSDs per node, replication, targets per SSD or None for the default)
SHAPES: dict[str, tuple[int, int, int, int, int | None]] = {
    "25->30 x16 k3": (25, 5, 16, 3, None),
    "50->55 x16 k3": (50, 5, 16, 3, None),
    "100->110 x16 k3": (100, 10, 16, 3, None),
    "180->200 x16 k3": (180, 20, 16, 3, None),
    "300->330 x16 k3": (300, 30, 16, 3, None),
    "60->75 x8 k2 r20": (60, 15, 8, 2, 20),
    "40->44 x4 k4": (40, 4, 4, 4, None),
    "120->121 x16 k3 r30": (120, 1, 16, 3, 30),
    "30->45 x16 k5": (30, 15, 16, 5, None),
    "20->40 x16 k3": (20, 20, 16, 3, None),  # these three spend most steps after the untouched chains ran out
    "60->100 x16 k4": (60, 40, 16, 4, None),
    "40->70 x8 k3 r12": (40, 30, 8, 3, 12),
}


def digest(label: str) -> tuple[dict[str, str], float]:
    from dsctl.storage.api import generate_chains
    from dsctl.storage.chaintable import IdScheme
    from dsctl.storage.crosscheck import FILE_NAMES
    from dsctl.storage.expand import expand

    v, add, disks, k, r = SHAPES[label]
    files = generate_chains(v, disks, k, r, 1, IdScheme()).files_text
    texts: dict[str, str | None] = {name: files[name] for name in FILE_NAMES}
    before = time.process_time()
    result = expand(texts, "bytes", add, 1e12, 0.0, 0.0)
    out = {name: hashlib.sha256("".join(result.files_text.pieces(name)).encode()).hexdigest()  # type: ignore[attr-defined]
           for name in result.files_text}
    cpu_s = time.process_time() - before
    figures = {f.name: getattr(result, f.name) for f in dataclasses.fields(result) if f.name != "files_text"}
    out["result"] = hashlib.sha256(repr(figures).encode()).hexdigest()
    return out, cpu_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.storage_expand_bytes", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="record the digests instead of comparing")
    parser.add_argument("--only", default="", help="shapes whose label starts with this")
    args = parser.parse_args(argv)
    known = json.loads(DIGESTS.read_text()) if DIGESTS.exists() else {}
    differ = 0
    for label in SHAPES:
        if not label.startswith(args.only):
            continue
        got, cpu_s = digest(label)
        if args.write:
            known[label] = got
            verdict = "recorded"
        else:
            bad = sorted(name for name in set(got) | set(known.get(label, {}))
                         if got.get(name) != known.get(label, {}).get(name))
            differ += bool(bad)
            verdict = "same" if not bad else "DIFFERS: " + ", ".join(bad)
        print(f"{label:<22} {cpu_s:7.2f} cpu_s  {verdict}", flush=True)
    if args.write:
        DIGESTS.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
