"""The smallest node count whose plan fits in GPU memory (``launch layout --min-nodes``, and the hint of a
launch that does not fit).

Search: node counts 1, 2, 4, ... until one fits, then bisection between the last miss and that count. It assumes
that a count that fits stays fitting with more nodes; a layout that only works at isolated counts between two
powers of two (a rare divisibility accident) can be missed, never a count reported that does not fit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from dsctl.errors import DsctlError
from dsctl.launch.plan import LaunchRequest, plan_launch
from dsctl.profiles.schema import ModelProfile, NodeProfile

#: the largest node count the search tries (131,072 GPUs on 8-GPU nodes)
SEARCH_LIMIT_NODES = 16_384


def min_nodes(model: ModelProfile, node: NodeProfile, request: LaunchRequest,
              max_nodes: int = SEARCH_LIMIT_NODES,
              progress: Callable[[int, int], None] | None = None) -> int | None:
    """Smallest ``num_nodes`` (1..``max_nodes``) for which ``request`` plans a layout that fits, or None.

    The request's other constraints (pp, ep, tp, dp, schedule, batch) are kept. Costs about
    ``2 log2(answer)`` layout plans (no schedule simulation); ``progress(plans_done, plans_bound)`` follows them.
    """
    bound = 2 * max(1, max_nodes.bit_length())
    tried = 0

    def fits(num_nodes: int) -> bool:
        nonlocal tried
        tried += 1
        if progress is not None:
            progress(tried, bound)
        try:
            plan = plan_launch(model, node, replace(request, num_nodes=num_nodes), simulate_schedule=False)
        except DsctlError:
            return False
        return plan.exit_code == 0

    miss, hit = 0, 1
    while hit <= max_nodes and not fits(hit):
        miss, hit = hit, hit * 2
    if hit > max_nodes:
        if miss == max_nodes or not fits(max_nodes):
            return None
        hit = max_nodes
    while hit - miss > 1:
        middle = (miss + hit) // 2
        if fits(middle):
            hit = middle
        else:
            miss = middle
    return hit
