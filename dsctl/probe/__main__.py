"""``python -m dsctl.probe --round SPEC``: run this node's share of one burn-in round, print one JSON object.

``--round -`` reads SPEC from standard input (how ``dsctl health burn-in`` hands it over: srun ``--input=all``; a
round of 2,048 nodes is far above Linux's 128 KiB limit on one argv string). SPEC (JSON text): ``{"nodes":
[names], "ranks": [[node_index, nic_name, gpu], ...], "pairs": [[rank_a, rank_b], ...], "bytes": int,
"repeats": int, "backend": "gloo"|"nccl", "port": int, "timeout_s": float}``. The ranks of this node
(``$SLURMD_NODENAME``, else the short host name) run as one process each; rank 0's node is the rendezvous
(rank 0's node name, resolved on the nodes). Every pair exchanges ``bytes`` in both directions ``repeats``
times (after one warm-up), all pairs of the round at once between barriers (gloo: one direction after the
other).

Output: ``{"probe": "dsctl.probe/1", "node": name, "backend": ..., "flows": [{"src": rank, "dst": rank,
"median_gbps": x, "min_gbps": y, "repeats": n}, ...]}`` with one entry per flow *received* on this node
(bandwidth = bytes x 8 / time until the receive completed, Gb/s). ``--jsonl`` prints one line per flow instead.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import sys
from typing import Any

from dsctl.probe import EXIT_NO_TORCH, PROBE_SCHEMA

MAX_SPEC_CHARS = 16 << 20


def parse_spec(text: str) -> dict[str, Any]:
    """The round spec, checked enough that a bad one is one clear line (exit 2), never a traceback."""
    if len(text) > MAX_SPEC_CHARS:
        raise ValueError(f"--round: spec of {len(text)} characters is too long")
    spec = json.loads(text)
    if not isinstance(spec, dict):
        raise ValueError("--round: spec must be a JSON object")
    for key, kind in (("nodes", list), ("ranks", list), ("pairs", list), ("bytes", int), ("repeats", int),
                      ("backend", str), ("port", int)):
        if not isinstance(spec.get(key), kind):
            raise ValueError(f"--round: spec.{key} must be a {kind.__name__}")
    if spec["backend"] not in ("gloo", "nccl"):
        raise ValueError("--round: spec.backend must be gloo or nccl")
    if not 0 < spec["bytes"] <= 1 << 34 or not 1 <= spec["repeats"] <= 100:
        raise ValueError("--round: spec.bytes must be 1 B..16 GiB and spec.repeats 1..100")
    num = len(spec["ranks"])
    for pair in spec["pairs"]:
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(r, int) and 0 <= r < num
                                                                     for r in pair)):
            raise ValueError("--round: every pair must be [rank, rank] with ranks of spec.ranks")
    return spec


def this_node() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dsctl.probe", description=__doc__.split("\n\n")[0])
    parser.add_argument("--round", required=True, help="the round spec (JSON text), or - to read it from "
                        "standard input")
    parser.add_argument("--node", default=None, help="this node's name (default $SLURMD_NODENAME)")
    parser.add_argument("--jsonl", action="store_true", help="one JSON line per flow")
    args = parser.parse_args(argv)
    try:
        spec = parse_spec(sys.stdin.read(MAX_SPEC_CHARS + 1) if args.round == "-" else args.round)
    except (ValueError, RecursionError) as exc:
        print(f"error: --round: {exc}" if isinstance(exc, RecursionError) else f"error: {exc}", file=sys.stderr)
        return 2
    if importlib.util.find_spec("torch") is None:
        print(f"error: dsctl.probe needs torch (torch.distributed) on {this_node()} and {sys.executable} cannot "
              "import it; install torch on the training nodes or give dsctl health burn-in --python",
              file=sys.stderr)
        return EXIT_NO_TORCH
    from dsctl.probe.exchange import run_node

    node = args.node or this_node()
    flows, errors = run_node(spec, node)
    if args.jsonl:
        for flow in flows:
            print(json.dumps(flow))
    else:
        print(json.dumps({"probe": PROBE_SCHEMA, "node": node, "backend": spec["backend"], "flows": flows,
                          "errors": errors}))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
