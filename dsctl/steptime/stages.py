"""Per-stage op seconds and the overlap rule of each schedule.

A stage's forward chunk runs, per layer, attention, dispatch, FFN, combine; its backward chunk the reverse:
combine gradient, FFN backward, dispatch gradient, attention backward. Alone (F, B, I, W ops) nothing overlaps.

DualPipe's overlapped F&B op pairs the forward chunk of one stage with the backward chunk of another and runs each
chunk's all-to-all under the other chunk's compute (DeepSeek-V3 tech report Fig. 4). Layer by layer (forward
layers in order against backward layers in reverse), four slots each take the longer of their two sides:

    max(combine_b, attention_f x s) + max(ffn_b x s, dispatch_f) + max(dispatch_b, ffn_f x s)
    + max(attention_b x s, combine_f)

where ``s = sms / (sms - comm_sms)`` slows compute while communication kernels hold SMs (only in slots with
communication). Work outside layers (embedding, head, MTP projection) adds without overlap. 1F1B and ZB1P have no
overlapped op: every all-to-all is exposed.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import zip_longest

from dsctl.launch.schedule.costs import OpCosts
from dsctl.steptime.layers import BlockSeconds, LayerSeconds


@dataclass(frozen=True)
class StageSeconds:
    """Costs of one pipeline stage for one micro-batch: ``layers`` in order, ``outside`` (embedding, MTP
    projection, head, loss: compute without communication)."""

    index: int
    layers: tuple[LayerSeconds, ...]
    outside: BlockSeconds
    #: ZeRO-2: the reduce-scatter of this stage's gradients after every micro-batch's backward, exposed (added to
    #: the weight-gradient work; see dsctl.steptime.collectives)
    grad_sync: float = 0.0

    @property
    def f(self) -> float:
        """Forward chunk alone: compute + every forward all-to-all."""
        return self.outside.f + sum(x.attention.f + x.ffn.f + x.comm_f for x in self.layers)

    @property
    def w(self) -> float:
        """Weight-gradient work alone (no communication but ZeRO-2's gradient reduce-scatter)."""
        return self.outside.w + sum(x.attention.w + x.ffn.w for x in self.layers) + self.grad_sync

    @property
    def i(self) -> float:
        """Input-gradient backward alone (weight gradients deferred): compute + backward all-to-alls."""
        return self.outside.i + sum(x.attention.i + x.ffn.i + x.comm_b for x in self.layers)

    @property
    def b(self) -> float:
        return self.i + self.w

    @property
    def compute_f(self) -> float:
        return self.outside.f + sum(x.compute.f for x in self.layers)

    @property
    def compute_b(self) -> float:
        return self.outside.b + sum(x.compute.b for x in self.layers)

    @property
    def comm_f(self) -> float:
        return sum(x.comm_f for x in self.layers)

    @property
    def comm_b(self) -> float:
        return sum(x.comm_b for x in self.layers)


_NO_LAYER = LayerSeconds(BlockSeconds(), BlockSeconds())


def _slot(comm: float, compute: float, slowdown: float) -> float:
    return max(comm, compute * slowdown) if comm > 0 else compute


def overlapped_seconds(forward: StageSeconds, backward: StageSeconds, slowdown: float) -> float:
    """One DualPipe F&B op: ``forward``'s forward chunk overlapped with ``backward``'s full backward chunk."""
    total = forward.outside.f + backward.outside.b + backward.grad_sync
    for lf, lb in zip_longest(forward.layers, reversed(backward.layers), fillvalue=_NO_LAYER):
        total += _slot(lb.combine_b, lf.attention.f, slowdown)
        total += _slot(lf.dispatch_f, lb.ffn.b, slowdown)
        total += _slot(lb.dispatch_b, lf.ffn.f, slowdown)
        total += _slot(lf.combine_f, lb.attention.b, slowdown)
    return total


@dataclass(frozen=True)
class OpSecondsTable:
    """``seconds_of`` for the schedule simulator: op kind and stages to seconds under a schedule's overlap rule."""

    stages: tuple[StageSeconds, ...]
    overlap: bool
    slowdown: float

    def __call__(self, kind: str, fwd: int | None, bwd: int | None) -> float:
        """Seconds of one op; which part of its stages an op kind takes is ``OpCosts.duration``'s (one home)."""
        if kind != "F" and bwd is None:
            raise ValueError(f"op {kind} has no backward stage")  # the schedule generator gives one
        if kind == "FB" and fwd is None:
            raise ValueError("F&B op without a forward stage")
        forward = self.stages[fwd] if fwd is not None else None
        backward = self.stages[bwd] if bwd is not None else None
        fb = None
        if kind == "FB" and forward is not None and backward is not None and self.overlap:
            fb = overlapped_seconds(forward, backward, self.slowdown)
        return OpCosts(f=forward.f if forward is not None else 0.0, b=backward.b if backward is not None else 0.0,
                       w=backward.w if backward is not None else 0.0, fb=fb).duration(kind)
