"""Per-stage op seconds and the overlap rule of each schedule.

A stage's forward chunk runs, per layer, attention, dispatch, FFN, combine; its backward chunk the reverse:
combine gradient, FFN backward, dispatch gradient, attention backward. Alone (F, B, I, W ops) nothing overlaps.

DualPipe's overlapped F&B op pairs the forward chunk of one stage with the backward chunk of another and runs each
chunk's all-to-all under the other chunk's compute (DeepSeek-V3 tech report Fig. 4). Layer by layer (forward
layers in order against backward layers in reverse), four slots each take the longer of their two sides:

    max(combine_b, attention_f x s) + max(ffn_b x s, dispatch_f) + max(dispatch_b, ffn_f x s)
    + max(attention_b x s, combine_f)

where ``s = sms / (sms - comm_sms)`` slows compute while communication kernels hold SMs (only in slots with
communication). Work outside layers (embedding, head, MTP projection) and tensor parallelism's NVLink collectives
add without overlap. 1F1B, ZB1P and interleaved 1F1B have no overlapped op: every all-to-all is exposed.

Pipeline sends block the rank (:func:`sends_of`): DualPipe's reference code queues an op's sends and issues them
with the next op's receives as one ``batch_isend_irecv`` whose requests it waits on before that op's compute
(deepseek-ai/DualPipe ``dualpipe.py``: ``_forward_backward_chunk`` -> ``_commit_and_wait_comm``); Megatron-LM's
1F1B does the same (``p2p_communication._communicate`` with ``batch_p2p_comm``, ``wait_on_reqs``). With NCCL the
wait holds the compute stream until the transfers end, so each op that sends an activation or a gradient to
another rank costs its compute plus ``send_s`` per send (the boundary's bytes over the GPU's NIC); the receiver
then sees the data one latency after that op ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
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

    @cached_property
    def f(self) -> float:
        """Forward chunk alone: compute + every forward all-to-all."""
        return self.outside.f + sum(x.forward_s for x in self.layers)

    @cached_property
    def w(self) -> float:
        """Weight-gradient work alone (no communication but ZeRO-2's gradient reduce-scatter)."""
        return self.outside.w + sum(x.weight_grad_s for x in self.layers) + self.grad_sync

    @cached_property
    def i(self) -> float:
        """Input-gradient backward alone (weight gradients deferred): compute + backward all-to-alls."""
        return self.outside.i + sum(x.input_grad_s for x in self.layers)

    @property
    def b(self) -> float:
        return self.i + self.w

    @cached_property
    def compute_f(self) -> float:
        return self.outside.f + sum(x.compute.f for x in self.layers)

    @cached_property
    def compute_b(self) -> float:
        return self.outside.b + sum(x.compute.b for x in self.layers)

    @cached_property
    def tp_comm(self) -> float:
        """Tensor parallelism's NVLink collectives of the layers, forward + backward (exposed)."""
        return sum(x.tp_s for x in self.layers)

    @cached_property
    def comm_f(self) -> float:
        return sum(x.comm_f for x in self.layers)

    @cached_property
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
        total += lf.tp_f + lb.tp_b  # tensor parallelism's collectives: exposed, in neither chunk's shadow
    return total


def crosses_ranks(schedule: str, num_stages: int, low_stage: int) -> bool:
    """Whether the boundary between stages ``low_stage`` and ``low_stage + 1`` lies between two ranks: always,
    except DualPipeV's turn (stages R-1 and R sit on rank R-1)."""
    return not (schedule == "dualpipev" and low_stage == num_stages // 2 - 1)


def sends_of(kind: str, fwd: int | None, bwd: int | None, num_stages: int, schedule: str) -> int:
    """Cross-rank p2p sends one op issues: the forward part's activation to stage ``fwd + 1`` (none from the last
    stage) and the backward part's gradient to stage ``bwd - 1`` (none from stage 0); W ops send nothing."""
    sends = 0
    if kind in ("F", "FB") and fwd is not None and fwd < num_stages - 1 and crosses_ranks(schedule, num_stages, fwd):
        sends += 1
    if kind in ("B", "I", "FB") and bwd is not None and bwd > 0 and crosses_ranks(schedule, num_stages, bwd - 1):
        sends += 1
    return sends


@dataclass(frozen=True)
class OpSecondsTable:
    """``seconds_of`` for the schedule simulator: op kind and stages to seconds under a schedule's overlap rule,
    plus ``send_s`` per cross-rank send the op issues (the rank waits for its sends, module docstring)."""

    stages: tuple[StageSeconds, ...]
    overlap: bool
    slowdown: float
    schedule: str = ""
    send_s: float = 0.0

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
        compute = OpCosts(f=forward.f if forward is not None else 0.0, b=backward.b if backward is not None else 0.0,
                          w=backward.w if backward is not None else 0.0, fb=fb).duration(kind)
        return compute + self.send_s * sends_of(kind, fwd, bwd, len(self.stages), self.schedule)
