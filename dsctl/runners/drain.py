"""Running a drain plan (:mod:`dsctl.health.drain`) with scontrol: read each node's state first, then drain only
what the plan allows. Errors of one node never stop the others."""

from __future__ import annotations

from collections.abc import Iterable

from dsctl.errors import DsctlError
from dsctl.health.drain import DrainLimit, DrainPlan, NodeState, plan_drain, with_results
from dsctl.runners.fleet import drain_node, node_drain_state


def read_states(nodes: Iterable[str]) -> dict[str, NodeState]:
    """Each node's drain flag and reason now (``scontrol show node -o``), before anything is changed."""
    states = {}
    for node in nodes:
        drained, why = node_drain_state(node)
        states[node] = NodeState(drained, why if why not in ("none", "(null)") else "")
    return states


def plan_and_drain(wanted: list[tuple[str, str]], fleet_size: int, limit: DrainLimit) -> DrainPlan:
    """Plan against the nodes' current states and run scontrol for the nodes the plan drains. More nodes wanted
    than the limit trips the breaker before anything is asked of Slurm."""
    if len(dict(wanted)) > limit.nodes(fleet_size):
        return plan_drain(wanted, {}, fleet_size, limit)
    plan = plan_drain(wanted, read_states(n for n, _ in wanted), fleet_size, limit)
    results: dict[str, str | None] = {}
    if not plan.tripped:
        for step in plan.runnable:
            try:
                results[step.node] = drain_node(step.node, step.reason)
            except DsctlError as exc:
                results[step.node] = exc.message
    return with_results(plan, results)
