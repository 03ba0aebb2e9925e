"""What ``dsctl health burn-in`` is asked to do, and the rules its options obey, in field names: the command layer
spells each field as its flag from one table (``FIELD_OPTIONS`` in ``dsctl/commands/health.py``, keys
``"burn-in FIELD"``), as for every domain error (:class:`dsctl.errors.DsctlError`)."""

from __future__ import annotations

from dataclasses import dataclass

from dsctl.errors import InputError
from dsctl.thresholds import MAD_K, SLOW_FRACTION
from dsctl.units import DAY_S

#: the probe's wires: gloo (CPU, TCP) or nccl (GPUs)
TRANSPORTS = ("gloo", "nccl")
MAX_REPEATS = 100
MAX_TIMEOUT_S = DAY_S


@dataclass(frozen=True)
class BurninRequest:
    """A burn-in: ``nodes`` (names; empty = every node of the plan; with ``reports``, the reports' own), judging
    thresholds, ``nvlink`` (the NVLink round wanted), how it measures (``rehearse`` on the simulated fabric of
    ``fabric_doc``, named ``fabric_source`` in its errors; ``reports``: judge saved perftest / nccl-tests reports;
    else the probe over ``transport`` with ``repeats`` exchanges per pair and ``timeout_s`` per round), the NVLink
    rate per direction (bytes/s) and whether to draw each plane (``svg``)."""

    nodes: tuple[str, ...] = ()
    fraction: float = SLOW_FRACTION
    mad_k: float = MAD_K
    nvlink: bool = True
    rehearse: bool = False
    fabric_doc: object = None
    fabric_source: str = "fabric model"
    reports: bool = False
    transport: str = "nccl"
    repeats: int = 5
    timeout_s: float = 300.0
    nvlink_bytes_per_s: float = 450e9
    svg: bool = False

    @property
    def nvlink_round(self) -> bool:
        """Whether an NVLink round runs: wanted, and the measurement reaches NVLink (a rehearsal simulates it;
        gloo runs on CPUs, so a gloo probe has no NVLink round to run)."""
        return self.nvlink and (self.rehearse or self.transport == "nccl")

    def check(self) -> None:
        """InputError (naming the field) for the first option rule the request breaks."""
        if not 0 < self.fraction < 1:
            raise InputError(f"{self.fraction:g} must lie in (0, 1), e.g. 0.9", field="fraction")
        if not 0 < self.mad_k <= 100:
            raise InputError(f"{self.mad_k:g} must be a positive number of MADs, e.g. 4", field="mad_k")
        if self.reports and self.rehearse:
            raise InputError("and {rehearse} are two ways to measure: give one", field="reports",
                             mentions=("rehearse",))
        if self.reports and self.nodes:
            raise InputError("judges the nodes the reports name: {nodes} does not apply", field="reports",
                             mentions=("nodes",))
        if self.reports and not self.nvlink:
            raise InputError("judges what the reports ran: {nvlink} does not apply", field="reports",
                             mentions=("nvlink",))
        if self.transport not in TRANSPORTS:
            raise InputError(f"{self.transport!r}: use gloo or nccl", field="transport")
        if not 1 <= self.repeats <= MAX_REPEATS or not 0 < self.timeout_s <= MAX_TIMEOUT_S:
            raise InputError(f"must be 1..{MAX_REPEATS} and {{timeout_s}} seconds in (0, {MAX_TIMEOUT_S:g}]",
                             field="repeats", mentions=("timeout_s",))
