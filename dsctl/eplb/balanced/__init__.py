"""Balanced EPLB mode: DeepSeek's reference plan refined by local search (``refine``) over batched sub-problems
(``search``); never worse than the reference on any layer. See docs/eplb-balanced.md."""

from dsctl.eplb.balanced.refine import join_batch, keep_better_layers, rebalance_balanced, refine_placement, split_batch
from dsctl.eplb.balanced.search import REL_EPS, Batch

__all__ = ["REL_EPS", "Batch", "join_batch", "keep_better_layers", "rebalance_balanced", "refine_placement",
           "split_batch"]
