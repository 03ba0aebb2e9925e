"""A rank's program: its compute ops in order and, for the DualPipe family, the p2p calls around them.

Instructions are ``(code, value)`` pairs: ``RECV key`` and ``SEND key`` queue a receive or a send of one data
item (see ``Geometry.key``), ``COMMIT`` issues the queued batch and waits for it, ``OP index`` runs ``ops[index]``.
The ideal timing model reads only the ops; the batched ("commit") model reads the instructions.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from dsctl.launch.schedule.geometry import Geometry
from dsctl.launch.schedule.ops import Op

RECV, SEND, COMMIT, OP = 0, 1, 2, 3


@dataclass
class RankProgram:
    """Ops (and instructions) of one rank, built by a generator through the helpers below."""

    geometry: Geometry
    rank: int
    #: 1 when local phase 0 ("near") is direction 1 (DualPipe ranks in the second half), else 0
    swap: int = 0
    #: record the p2p calls (needed only by the batched model)
    record_comm: bool = True
    ops: list[Op] = field(default_factory=list)
    instructions: list[tuple[int, int]] = field(default_factory=list)
    _count: dict[str, list[int]] = field(default_factory=dict)
    _weights: deque[tuple[int, int]] = field(default_factory=deque)

    def _next(self, counter: str, phase: int) -> tuple[int, int, int, int]:
        """(direction, micro-batch, chain, stage) of the next item of ``counter`` in local ``phase``."""
        counts = self._count.setdefault(counter, [0, 0])
        m = counts[phase]
        counts[phase] += 1
        d = phase ^ self.swap
        geo = self.geometry
        return d, m, geo.chain(d, m), geo.stage(self.rank, d)

    def _remote(self, d: int, stage: int) -> bool:
        geo = self.geometry
        return 0 <= stage < geo.num_stages and geo.rank_of(d, stage) != self.rank

    # -- p2p calls -------------------------------------------------------------------------------------
    def recv_forward(self, phase: int) -> None:
        if not self.record_comm:
            return
        d, _, chain, s = self._next("recv_f", phase)
        if self._remote(d, s - 1):
            self.instructions.append((RECV, self.geometry.key(False, chain, s - 1)))

    def send_forward(self, phase: int) -> None:
        if not self.record_comm:
            return
        d, _, chain, s = self._next("send_f", phase)
        if self._remote(d, s + 1):
            self.instructions.append((SEND, self.geometry.key(False, chain, s)))

    def recv_backward(self, phase: int) -> None:
        if not self.record_comm:
            return
        d, _, chain, s = self._next("recv_b", phase)
        if self._remote(d, s + 1):
            self.instructions.append((RECV, self.geometry.key(True, chain, s + 1)))

    def send_backward(self, phase: int) -> None:
        if not self.record_comm:
            return
        d, _, chain, s = self._next("send_b", phase)
        if self._remote(d, s - 1):
            self.instructions.append((SEND, self.geometry.key(True, chain, s)))

    def commit(self) -> None:
        self.instructions.append((COMMIT, 0))

    # -- compute ---------------------------------------------------------------------------------------
    def _op(self, op: Op) -> None:
        self.instructions.append((OP, len(self.ops)))
        self.ops.append(op)

    def compute_forward(self, phase: int) -> None:
        d, m, _, _ = self._next("f", phase)
        self._op(Op("F", fwd=(d, m)))

    def compute_backward(self, phase: int, split: bool = False) -> None:
        """Full backward, or with ``split`` an input-gradient-only I whose weight work is queued (FIFO)."""
        d, m, _, _ = self._next("b", phase)
        if split:
            self._weights.append((d, m))
        self._op(Op("I" if split else "B", bwd=(d, m)))

    def compute_forward_backward(self, phase0: int, phase1: int) -> None:
        d0, m0, _, _ = self._next("f", phase0)
        d1, m1, _, _ = self._next("b", phase1)
        self._op(Op("FB", fwd=(d0, m0), bwd=(d1, m1)))

    def compute_chunk(self, forward: bool, d: int, m: int) -> None:
        """A forward (or full backward) of micro-batch ``m`` through the rank's stage of direction ``d``, given
        explicitly (the interleaved order picks the chunk of each op itself)."""
        self._op(Op("F", fwd=(d, m)) if forward else Op("B", bwd=(d, m)))

    def compute_weight(self) -> None:
        if not self._weights:
            raise RuntimeError(f"rank {self.rank}: W op with no queued weight gradient (generator bug)")
        self._op(Op("W", bwd=self._weights.popleft()))

    @property
    def pending_weights(self) -> int:
        return len(self._weights)
