"""Op grammar of the pipeline schedules: one compute op on one rank.

Names (the ``ops`` lists of ``dsctl launch schedule --format json``):

- ``F{d}.{m}``: forward of micro-batch ``m`` of direction (or leg) ``d`` through this rank's stage for ``d``;
- ``B{d}.{m}``: full backward (input gradient and weight gradient);
- ``I{d}.{m}``: input-gradient-only backward; its weight gradient is queued for a later ``W``;
- ``W{d}.{m}``: the queued weight-gradient work of micro-batch ``m`` (popped first-in first-out);
- ``F{d}.{m}&B{e}.{k}``: a forward and a full backward of two micro-batches run overlapped as one op.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dsctl.errors import InputError

#: op kinds; "FB" is the overlapped forward + full backward
KINDS = ("F", "B", "I", "W", "FB")

_PART = re.compile(r"([FBIW])([0-9]{1,9})\.([0-9]{1,9})")  # bounded before int(): a longer run is a bad name


@dataclass(frozen=True, slots=True)
class Op:
    """One compute op. ``fwd``/``bwd`` are ``(direction, micro_batch)`` of the forward and the backward part.

    ``kind`` F has only ``fwd``; B, I and W only ``bwd`` (for W: the micro-batch whose queued weight gradient it
    runs); FB has both.
    """

    kind: str
    fwd: tuple[int, int] | None = None
    bwd: tuple[int, int] | None = None

    @property
    def name(self) -> str:
        if self.kind == "FB" and self.fwd is not None and self.bwd is not None:
            return f"F{self.fwd[0]}.{self.fwd[1]}&B{self.bwd[0]}.{self.bwd[1]}"
        part = self.fwd if self.kind == "F" else self.bwd
        if part is None:
            return self.kind
        return f"{self.kind}{part[0]}.{part[1]}"

    @property
    def has_forward(self) -> bool:
        return self.kind in ("F", "FB")

    @property
    def has_backward(self) -> bool:
        """True when the op frees an activation chunk (B, I or the backward of FB)."""
        return self.kind in ("B", "I", "FB")


def parse_op(text: str) -> Op:
    """Parse an op name of the grammar above; raises ``InputError`` naming the bad text."""
    parts = text.strip().split("&")
    if len(parts) == 2:
        a, b = (_PART.fullmatch(p) for p in parts)
        if a and b and a.group(1) == "F" and b.group(1) == "B":
            return Op("FB", (int(a.group(2)), int(a.group(3))), (int(b.group(2)), int(b.group(3))))
    elif len(parts) == 1:
        a = _PART.fullmatch(parts[0])
        if a:
            part = (int(a.group(2)), int(a.group(3)))
            return Op("F", fwd=part) if a.group(1) == "F" else Op(a.group(1), bwd=part)
    raise InputError(f"bad op name {text!r}: expected F<d>.<m>, B<d>.<m>, I<d>.<m>, W<d>.<m> or F<d>.<m>&B<e>.<k>")
