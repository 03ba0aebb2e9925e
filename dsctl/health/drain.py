"""Draining nodes safely: one home for every dsctl command that drains (``health fleet``, ``health check
--slurm-healthcheck``, ``health burn-in``).

Rules:

- **Reasons** start with one fixed, machine-readable prefix: ``dsctl:<code> <text>`` (``dsctl:G6 crit gpu3 ...``,
  ``dsctl:burnin nic node0147:mlx5_3 at 50% ...``), printable ASCII, one line, at most ``MAX_REASON_CHARS``.
- **Never overwrite** a reason dsctl did not set: a node that already carries any other reason (an operator's,
  another tool's) is left alone and reported as ``foreign``; a node already drained by dsctl is updated.
- **Circuit breaker**: when more nodes would be drained than ``--max-drain`` allows (a count ``N`` or a
  percentage ``P%`` of the nodes the run covered; default ``DEFAULT_MAX_DRAIN``), nothing is drained and the
  plan says so: a mass drain is far more often a broken test, switch or network than many broken nodes.
- **Order** (the commands' part): the report is written first, nodes are drained after it is safely on disk,
  and the report is printed whatever the drain does.

Pure: the current state of each node arrives as data (read with scontrol by the command layer); nothing here
runs a process.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from dsctl.errors import InputError
from dsctl.names import NODE_NAME_RULE, plain_node_name, shown

REASON_PREFIX = "dsctl:"
#: Slurm keeps the reason as given; a short one reads in ``sinfo -R`` and fits every version's limits
MAX_REASON_CHARS = 120
DEFAULT_MAX_DRAIN = "10%"
ACTIONS = ("drain", "update", "foreign", "held")


@dataclass(frozen=True)
class DrainLimit:
    """``--max-drain``: at most ``count`` nodes, or ``percent`` % of the nodes covered (at least one node)."""

    text: str
    count: int | None = None
    percent: float | None = None

    def nodes(self, fleet_size: int) -> int:
        if self.count is not None:
            return self.count
        return max(1, math.floor((self.percent or 0.0) * fleet_size / 100 + 1e-9))


def parse_max_drain(text: str, option: str = "--max-drain") -> DrainLimit:
    """``N`` (a whole number >= 0) or ``P%`` (0 < P <= 100)."""
    value = text.strip()
    try:
        if value.endswith("%"):
            percent = float(value[:-1])
            if not 0 < percent <= 100:
                raise ValueError
            return DrainLimit(value, percent=percent)
        count = int(value)
        if count < 0:
            raise ValueError
        return DrainLimit(value, count=count)
    except ValueError:
        raise InputError(f"{option} {text!r}: give a node count such as 4 or a percentage such as 10%") from None


def one_line(text: str) -> str:
    """Printable ASCII-safe single line: control characters and quotes become spaces, runs of spaces one."""
    cleaned = "".join(c if c.isprintable() and c.isascii() and c not in "\"'`\\" else " " for c in text)
    return " ".join(cleaned.split())


def reason(code: str, text: str, more: int = 0) -> str:
    """``dsctl:<code> <text>`` on one line, cut to MAX_REASON_CHARS (``(+N more)`` kept at the end)."""
    tail = f" (+{more} more)" if more else ""
    body = one_line(f"{REASON_PREFIX}{one_line(code).replace(' ', '_')} {text}")
    room = MAX_REASON_CHARS - len(tail)
    if len(body) > room:
        body = body[:room - 3].rstrip() + "..."
    return body + tail


def is_ours(current: str) -> bool:
    """A reason dsctl set (this prefix, or the ``dsctl `` of dsctl before the prefix had a colon)."""
    return current.startswith(REASON_PREFIX) or current.startswith("dsctl ")


@dataclass(frozen=True)
class NodeState:
    """What Slurm says of a node now: its drain flag and its reason (empty when none)."""

    drained: bool = False
    reason: str = ""


def drain_argv(node: str, reason: str, scontrol: str = "scontrol") -> tuple[str, ...]:
    """The command that drains ``node`` with ``reason`` (what reports print and what the runner runs).

    The last line of defence: ``node`` must be one plain node name (:func:`dsctl.names.plain_node_name`), never
    ``ALL``, a hostlist or anything else Slurm would read as several nodes; InputError otherwise."""
    if not plain_node_name(node):
        raise InputError(f"refusing to drain {shown(node)}: {NODE_NAME_RULE}")
    return (scontrol, "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}")


@dataclass(frozen=True)
class DrainStep:
    """One node: ``action`` drain (new), update (drained by dsctl before), foreign (another reason, left alone),
    held (the circuit breaker tripped); ``done`` None until scontrol ran, then True/False with ``error``."""

    node: str
    reason: str
    action: str
    current_reason: str = ""
    done: bool | None = None
    error: str = ""

    @property
    def argv(self) -> tuple[str, ...]:
        return drain_argv(self.node, self.reason)


@dataclass(frozen=True)
class DrainPlan:
    """What a drain would do. ``tripped``: the breaker held every node (``limit`` allowed, ``wanted`` asked)."""

    steps: tuple[DrainStep, ...]
    limit: int
    limit_text: str
    wanted: int
    tripped: bool
    ran: bool = False

    @property
    def message(self) -> str:
        if self.tripped:
            return (f"circuit breaker: {self.wanted} nodes to drain exceeds --max-drain {self.limit_text} "
                    f"({self.limit} nodes); nothing drained: check the test and the fabric first")
        foreign = sum(1 for s in self.steps if s.action == "foreign")
        todo = sum(1 for s in self.steps if s.action in ("drain", "update"))
        text = f"{todo} node(s) to drain"
        if foreign:
            text += f", {foreign} left alone (a reason dsctl did not set)"
        return text

    @property
    def runnable(self) -> tuple[DrainStep, ...]:
        return tuple(s for s in self.steps if s.action in ("drain", "update"))

    def to_data(self) -> dict[str, object]:
        return {"limit": self.limit, "max_drain": self.limit_text, "wanted": self.wanted, "tripped": self.tripped,
                "ran": self.ran, "message": self.message,
                "nodes": [{"node": s.node, "reason": s.reason, "action": s.action, "command": list(s.argv),
                           "current_reason": s.current_reason, "done": s.done,
                           **({"error": s.error} if s.error else {})} for s in self.steps]}


def plan_drain(wanted: Iterable[tuple[str, str]], states: Mapping[str, NodeState], fleet_size: int,
               limit: DrainLimit) -> DrainPlan:
    """The drain plan for ``wanted`` (node, reason) pairs given each node's current ``states``. InputError for a
    name that is not one plain node (:func:`drain_argv`): each step drains one node, so the breaker counts nodes."""
    steps = []
    for node, why in dict(wanted).items():
        drain_argv(node, why)
        state = states.get(node, NodeState())
        if state.reason and not is_ours(state.reason):
            steps.append(DrainStep(node, why, "foreign", state.reason))
        elif state.drained or state.reason:
            steps.append(DrainStep(node, why, "update", state.reason))
        else:
            steps.append(DrainStep(node, why, "drain"))
    allowed = limit.nodes(fleet_size)
    count = sum(1 for s in steps if s.action in ("drain", "update"))
    tripped = count > allowed
    if tripped:
        steps = [replace(s, action="held") if s.action in ("drain", "update") else s for s in steps]
    return DrainPlan(tuple(steps), allowed, limit.text, count, tripped)


def with_results(plan: DrainPlan, results: Mapping[str, str | None]) -> DrainPlan:
    """The plan after scontrol ran: ``results`` maps node -> error text (``None`` = drained)."""
    steps = tuple(replace(s, done=results[s.node] is None, error=results[s.node] or "") if s.node in results else s
                  for s in plan.steps)
    return replace(plan, steps=steps, ran=True)
