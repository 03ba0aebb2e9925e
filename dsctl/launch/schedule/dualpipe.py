"""DualPipe and DualPipeV per-rank programs, in the order DeepSeek's reference code runs them.

Each rank runs eight phases written in *local* phases: phase 0 ("near") is the direction in which the rank is
early, phase 1 ("far") the other one (dualpipe-facts.md §3). With ``n`` half the ranks (DualPipeV: all ``R``
ranks), ``h`` the rank's distance from its nearer end (DualPipeV: the rank), ``k = n - h - 1``:

1. ``2k`` near forwards;  2. ``h + 1`` x (near F, far F);  3. ``k`` x (far I, W, far F);
4. ``C/2 - PP + h + 1`` (DualPipeV: ``C - 2R + r + 1``) x (near F & far B, far F & near B), the middle rank's
   first pair run unoverlapped;  5. ``k`` x (far B, far F & near B);  6. ``h + 1`` x (far B, near B), the last
   ``h + 1`` of these split;  7. ``k`` x (W, near I);  8. ``h + 1`` W.

The p2p calls (where receives are posted and sends queued) follow the reference code too, so that the batched
timing model can replay them.
"""

from __future__ import annotations

from dsctl.launch.schedule.geometry import Geometry
from dsctl.launch.schedule.program import RankProgram


class _Chunks(RankProgram):
    """The reference code's chunk helpers: post receives, commit, compute, queue sends."""

    def forward_chunk(self, phase: int, recv: bool = True, send: bool = True) -> None:
        if recv:
            self.recv_forward(phase)
        self.commit()
        self.compute_forward(phase)
        if send:
            self.send_forward(phase)

    def backward_chunk(self, phase: int, split: bool = False, send: bool = True) -> None:
        self.recv_backward(phase)
        self.commit()
        self.compute_backward(phase, split)
        if send:
            self.send_backward(phase)

    def forward_backward_chunk(self, phase0: int, phase1: int, recv0: bool = True) -> None:
        if recv0:
            self.recv_forward(phase0)
        self.recv_backward(phase1)
        self.commit()
        self.compute_forward_backward(phase0, phase1)
        self.send_forward(phase0)
        self.send_backward(phase1)

    def weight_chunk(self) -> None:
        self.commit()
        self.compute_weight()


def dualpipe_program(geometry: Geometry, rank: int, record_comm: bool = True) -> RankProgram:
    """Program of ``rank`` for ``geometry.placement`` "dualpipe" (PP ranks) or "dualpipev" (R ranks, 2R stages).

    Preconditions (checked by ``check_schedule_params``): DualPipe PP even, C even, C >= 2 PP;
    DualPipeV C >= 2R. ``record_comm=False`` leaves out the p2p calls (the ideal model does not need them).
    """
    v_shape = geometry.placement == "dualpipev"
    num_ranks = geometry.num_ranks
    num_chunks = geometry.num_micro_batches
    if v_shape:
        n, h, swap = num_ranks, rank, 0
        num_main = num_chunks - 2 * num_ranks + rank + 1
    else:
        n = num_ranks // 2
        h = min(rank, num_ranks - 1 - rank)
        swap = 1 if rank >= n else 0
        num_main = num_chunks // 2 - num_ranks + h + 1
    mid = h == n - 1
    k = n - h - 1
    p = _Chunks(geometry, rank, swap, record_comm)

    # 1: near forwards only
    for _ in range(2 * k):
        p.forward_chunk(0)
    # 2: near F, far F. The next near input is received before each far forward's commit.
    p.recv_forward(0)
    for i in range(h + 1):
        p.forward_chunk(0, recv=False, send=mid and not v_shape)
        p.recv_forward(0)
        p.forward_chunk(1, send=not mid or i < h)
        if v_shape or not mid:
            p.send_forward(0)
    # 3: far I, W, far F (the far input is received before the W's commit)
    for _ in range(k):
        p.backward_chunk(1, split=True)
        p.recv_forward(1)
        p.weight_chunk()
        p.forward_chunk(1, recv=False)
    # 4: steady state; the middle rank runs its first pair unoverlapped
    for i in range(num_main):
        if i == 0 and mid:
            p.forward_chunk(0, recv=False, send=False)
            p.send_forward(1)
            p.backward_chunk(1, send=False)
            p.send_forward(0)
            p.send_backward(1)
        else:
            p.forward_backward_chunk(0, 1, recv0=i > 0)
        p.forward_backward_chunk(1, 0)
    # 5: far backward catch-up
    for _ in range(k):
        p.backward_chunk(1)
        p.forward_backward_chunk(1, 0)
    # 6: backward-backward; splitting starts halfway through the 2(h+1) backwards
    split = False
    for i in range(h + 1):
        if i == (h + 1) // 2 and h % 2 == 1:
            split = True
        p.backward_chunk(1, split=split)
        if i == (h + 1) // 2 and h % 2 == 0:
            split = True
        p.backward_chunk(0, split=split)
    # 7: W then near I
    for _ in range(k):
        p.weight_chunk()
        p.backward_chunk(0, split=True)
    # 8: drain the weight-gradient queue
    for _ in range(h + 1):
        p.weight_chunk()
    p.commit()
    return p
