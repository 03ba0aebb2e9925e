"""Quality table for the balanced EPLB mode: reference vs balanced vs lower bounds, and migration counts.

    cd /work/main && python benchmarks/eplb_quality.py            # markdown tables (about a minute)
    python benchmarks/eplb_quality.py --layers 16 --no-migration  # quicker

Synthetic loads at DeepSeek-V3 scale (58 MoE layers x 256 experts, 8 groups): Zipf(s) over a random permutation of
the experts per layer with ~10% lognormal jitter, and lognormal(sigma). Balancedness = mean / max GPU load per layer;
"avg" is the mean over layers, "worst" the smallest layer. Bounds (docs/eplb-balanced.md): "hier bound" keeps
groups on nodes, "global bound" is policy-free. Migration: a balanced plan for the loads, then loads drift by 10%
(lognormal sigma 0.1 per expert); replicas moved at 1% tolerance vs the unconstrained balanced plan relabelled to
best match the previous one.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.eplb_layouts import LAYOUTS, NUM_EXPERTS, NUM_GROUPS, NUM_LAYERS
from dsctl.eplb.balanced import rebalance_balanced
from dsctl.eplb.bounds import global_lower_bound, hierarchical_lower_bound
from dsctl.eplb.migration import rebalance_with_previous
from dsctl.eplb.placement import Placement, balancedness, gpu_loads
from dsctl.eplb.reference import rebalance_reference

SHAPES = [("zipf 0.5", "zipf", 0.5), ("zipf 0.8", "zipf", 0.8), ("zipf 1.0", "zipf", 1.0),
          ("zipf 1.2", "zipf", 1.2), ("lognormal 0.6", "lognormal", 0.6)]


def synthetic_loads(kind: str, param: float, layers: int = NUM_LAYERS, experts: int = NUM_EXPERTS,
                    seed: int = 0) -> np.ndarray:
    """Token counts float64 [layers, experts] (~1e5 tokens per expert on average), deterministic per seed."""
    rng = np.random.default_rng(seed)
    if kind == "zipf":
        out = np.stack([(rng.permutation(experts) + 1.0) ** (-param) for _ in range(layers)])
        out *= np.exp(0.1 * rng.standard_normal(out.shape))
    elif kind == "lognormal":
        out = np.exp(param * rng.standard_normal((layers, experts)))
    else:
        raise ValueError(f"unknown load kind {kind!r}")
    return out / out.sum(axis=1, keepdims=True) * 1e5 * experts


def _bal(weight: np.ndarray, plan: Placement, gpus: int) -> np.ndarray:
    return balancedness(gpu_loads(weight, plan.phy2log, plan.logcnt, gpus))


def co_located(plan: Placement, gpus: int) -> int:
    """Replicas sharing a GPU with another replica of the same expert (all layers)."""
    layers, slots = plan.phy2log.shape
    per_gpu = np.sort(plan.phy2log.reshape(layers, gpus, slots // gpus), axis=2)
    return int((per_gpu[:, :, 1:] == per_gpu[:, :, :-1]).sum())


def quality_rows(layers: int) -> list[str]:
    rows = ["| layout | loads | reference avg / worst | balanced avg / worst | hier bound avg / worst "
            "| global bound avg / worst | gap closed | co-located ref → bal | balanced s |",
            "|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(rows), flush=True)
    for label, replicas, nodes, gpus, policy in LAYOUTS:
        for shape, kind, param in SHAPES:
            w = synthetic_loads(kind, param, layers)
            ref = rebalance_reference(w, replicas, NUM_GROUPS, nodes, gpus, policy)
            start = time.perf_counter()
            bal = rebalance_balanced(w, replicas, NUM_GROUPS, nodes, gpus, policy)
            took = time.perf_counter() - start
            mean = w.sum(axis=1) / gpus
            b_ref, b_bal = _bal(w, ref, gpus), _bal(w, bal, gpus)
            b_glob = mean / global_lower_bound(w, replicas, gpus)
            if policy == "hierarchical":
                b_hier = mean / hierarchical_lower_bound(w, replicas, NUM_GROUPS, nodes, gpus)
                hier = f"{b_hier.mean():.4f} / {b_hier.min():.4f}"
                bound = b_hier
            else:
                hier, bound = "-", b_glob
            gap = bound.mean() - b_ref.mean()
            closed = f"{(b_bal.mean() - b_ref.mean()) / gap:.0%}" if gap > 1e-6 else "-"
            rows.append(
                f"| {label} | {shape} | {b_ref.mean():.4f} / {b_ref.min():.4f} | {b_bal.mean():.4f} / {b_bal.min():.4f}"
                f" | {hier} | {b_glob.mean():.4f} / {b_glob.min():.4f} | {closed}"
                f" | {co_located(ref, gpus)} → {co_located(bal, gpus)} | {took:.2f} |"
            )
            print(rows[-1], flush=True)
    return rows


def migration_rows(layers: int) -> list[str]:
    rows = ["| layout | loads | previous plan on new loads | target (unconstrained) | achieved "
            "| moved | unconstrained moved (relabelled) | slots | seconds |",
            "|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(rows), flush=True)
    for label, replicas, nodes, gpus, policy in LAYOUTS:
        for shape, kind, param in [("zipf 1.0", "zipf", 1.0), ("lognormal 0.6", "lognormal", 0.6)]:
            w = synthetic_loads(kind, param, layers)
            previous = rebalance_balanced(w, replicas, NUM_GROUPS, nodes, gpus, policy)
            drifted = w * np.exp(0.1 * np.random.default_rng(1).standard_normal(w.shape))
            start = time.perf_counter()
            r = rebalance_with_previous(drifted, previous, replicas, NUM_GROUPS, nodes, gpus, policy, 0.01)
            took = time.perf_counter() - start
            share = r.replicas_moved / max(1, r.unconstrained_replicas_moved)
            rows.append(
                f"| {label} | {shape} | {r.previous_balancedness.mean():.4f} | {r.target_balancedness.mean():.4f}"
                f" | {r.balancedness.mean():.4f} | {r.replicas_moved} ({share:.0%})"
                f" | {r.unconstrained_replicas_moved} | {layers * replicas} | {took:.2f} |"
            )
            print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=NUM_LAYERS)
    parser.add_argument("--no-migration", action="store_true")
    args = parser.parse_args(argv)
    print(f"## Balancedness, {args.layers} layers x {NUM_EXPERTS} experts, {NUM_GROUPS} groups\n")
    quality_rows(args.layers)
    if not args.no_migration:
        print("\n## Migration at 1% tolerance after a 10% drift\n")
        migration_rows(args.layers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
