"""What a verify speaks in: finding and action kinds, one :class:`Finding`, cable keys and how an observed end
resolves to a planned port. :mod:`dsctl.topology.verify` (cable matching) and :mod:`dsctl.topology.verify_checks`
(rate, GUID, counter and plane checks) both build on it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from dsctl.cluster.plan_file import PlannedFabric, Port
from dsctl.topology.naming import short_repr
from dsctl.topology.observed import ObservedEnd

CABLE_KINDS = ("cross_plane", "swapped", "port_offset", "impossible_port", "missing", "extra", "unmatched_device")
QUALITY_KINDS = ("degraded_width", "degraded_speed", "error_counters", "link_downed")
IDENTITY_KINDS = ("guid_changed", "duplicate_guid", "plane_not_seen")
FINDING_KINDS = CABLE_KINDS + QUALITY_KINDS + IDENTITY_KINDS
ACTION_KINDS = ("move", "swap", "plug", "remove", "reseat", "replace_hca", "rediscover", "check_plan")
Key = tuple[Port, Port]


@dataclass(frozen=True)
class WiringFinding:
    """One difference between plan and fabric, typed by fields.

    ``line``/``source``: the observed file's line and name (None/"" for ``missing``). ``action_kind`` is one of
    ACTION_KINDS and ``action`` says it with the plan's names (``move the cable of node0001 mlx5_2 from
    p2-leaf01:2 to p2-leaf01:1``). ``value``/``expected_value``: what was seen and what the plan expects (link
    rate ``2xNDR``/``4xNDR``, GUIDs, counter values).
    """

    kind: str
    a_device: str
    a_port: str
    b_device: str
    b_port: str
    plane: str
    expected: str
    line: int | None
    message: str
    source: str = ""
    action_kind: str = ""
    action: str = ""
    value: str = ""
    expected_value: str = ""


_SPLIT = re.compile(r"[\s;:/,|]+")


class Resolver:
    """Maps observed ends to planned (device, port label) and plane."""

    def __init__(self, plan: PlannedFabric) -> None:
        self.plan = plan
        self.single_nic = plan.nics[0] if len(plan.nics) == 1 else None

    def device(self, end: ObservedEnd) -> str | None:
        if end.device in self.plan.tier:
            return end.device
        for token in _SPLIT.split(end.desc or end.device):
            if token in self.plan.tier:
                return token
        return None

    def resolve(self, end: ObservedEnd) -> tuple[Port | None, int | None, str]:
        """((device, port), plane, why-not) for an observed end."""
        if end.default_desc and not end.by_position:
            desc = short_repr(" ".join(end.desc.split()), 60)
            return None, None, (f"HCA 0x{end.guid} has the default description {desc} and is not at a planned "
                                "NIC port whose NIC is seen nowhere else, so its position does not identify it")
        device = self.device(end)
        if device is None:
            return None, None, f"device {short_repr(end.desc or end.device, 60)} is not in the plan"
        if self.plan.tier[device] == "node":
            port = end.port
            if port not in self.plan.nic_plane and self.single_nic is not None and len(end.desc.split()) < 2:
                port = self.single_nic
            if port not in self.plan.nic_plane:
                return None, None, f"NIC {short_repr(port, 60)} of {device} is not in the plan"
            return (device, port), self.plan.nic_plane[port], ""
        try:
            number = int(end.port)
        except ValueError:
            return None, None, f"switch {device} port {short_repr(end.port, 20)} is not a port number"
        return (device, str(number)), self.plan.plane[device], ""


def key_of(a: Port, b: Port) -> Key:
    return (a, b) if a <= b else (b, a)


def plan_text(port: Port, tier: dict[str, str]) -> str:
    """``node0001 mlx5_0`` / ``p0-leaf01 port 3``: how ``expected`` names planned ends."""
    return f"{port[0]} {port[1]}" if tier.get(port[0]) == "node" else f"{port[0]} port {port[1]}"


def end_text(port: Port, tier: dict[str, str]) -> str:
    """``node0001 mlx5_0`` for a NIC, ``p0-leaf01:3`` for a switch port (the form actions use)."""
    return f"{port[0]} {port[1]}" if tier.get(port[0]) == "node" else f"{port[0]}:{port[1]}"
