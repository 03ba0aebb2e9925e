"""The option rules of the trace commands, in field names (the command layer spells each field as its flag from
``FIELD_OPTIONS`` in dsctl/commands/trace.py, as for every domain error: :class:`dsctl.errors.DsctlError`)."""

from __future__ import annotations

from dataclasses import dataclass

from dsctl.errors import InputError
from dsctl.trace.skew import ALIGN_MODES  # how the ranks' clocks are aligned: its home, where they are aligned


@dataclass(frozen=True)
class OverlapRequest:
    """What ``trace overlap`` is asked: one ``step`` or ``all_steps``; on the nodes of ``nodes`` through Slurm
    (``slurm``), which reports the overlap table only (no ``svg``, ``explain_classes`` or ``all_steps``)."""

    step: int | None = None
    all_steps: bool = False
    slurm: bool = False
    nodes: str | None = None
    svg: bool = False
    explain_classes: bool = False

    def check(self) -> None:
        """InputError naming the fields of the first rule the request breaks."""
        if self.step is not None and self.all_steps:
            raise InputError("and {all_steps} exclude each other; give one", field="step", mentions=("all_steps",))
        if (self.slurm or self.nodes is not None) and not (self.slurm and self.nodes is not None):
            raise InputError("and {nodes} go together: {slurm} -w node[001-016]", field="slurm",
                             mentions=("nodes", "slurm"))
        if self.slurm and (self.svg or self.explain_classes or self.all_steps):
            raise InputError("reports the overlap table only; drop {svg}, {explain_classes} and {all_steps}",
                             field="slurm", mentions=("svg", "explain_classes", "all_steps"))


def check_stragglers(align: str, plan_given: bool, ranks_given: bool) -> None:
    """``trace stragglers``: ``align`` one of :data:`dsctl.trace.skew.ALIGN_MODES`; a fabric ``plan`` needs the
    rank map (``ranks``)."""
    if align not in ALIGN_MODES:
        raise InputError(f"{align!r}: expected ends or none", field="align")
    if plan_given and not ranks_given:
        raise InputError("needs {ranks} (the rank map says which node and GPU each rank ran on)", field="plan",
                         mentions=("ranks",), hint="--ranks JOB/ranks.csv --plan FABRIC/plan.json")


def check_window(from_us: float | None, to_us: float | None) -> None:
    """``trace timeline``: the window's end after its start (µs after the window start)."""
    if from_us is not None and to_us is not None and to_us <= from_us:
        raise InputError(f"{from_us:g} {{to_us}} {to_us:g}: {{to_us}} must be after {{from_us}}", field="from_us",
                         mentions=("to_us", "from_us"))
