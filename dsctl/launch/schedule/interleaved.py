"""Interleaved 1F1B (Megatron-LM's virtual pipeline; Narayanan et al., SC'21, section 2.2.2).

``R`` ranks each hold ``v`` model chunks: the model is cut into ``v R`` stages and chunk ``c`` of rank ``r`` is
stage ``c R + r``, so a micro-batch passes every rank ``v`` times. Each rank runs ``v M`` forwards and ``v M``
full backwards in the order of Megatron-LM's ``forward_backward_pipelining_with_interleaving``
(``megatron/core/pipeline_parallel/schedules.py``):

- the ``k``-th forward of a rank is chunk ``(k mod vR) // R`` of micro-batch ``(k // vR) R + k mod R`` (groups of
  ``R`` micro-batches go through chunk 0, then chunk 1, ...); the ``k``-th backward the same micro-batch of chunk
  ``v - 1 - (k mod vR) // R``;
- rank ``r`` first runs ``warm(r) = min(2 (R - r - 1) + (v - 1) R, v M)`` forwards; when ``M = R`` all ``v M``
  (Megatron's special case); then pairs (forward ``k + warm``, backward ``k``) and the remaining backwards.

Megatron requires ``M`` to be a multiple of ``R`` (groups of ``R`` micro-batches per chunk). With equal op costs
per chunk and no communication the bubble is ``(R - 1)(f + b)`` per rank, ``(R - 1)(F + B) / v`` in terms of a
rank's whole forward ``F = v f`` and backward ``B = v b``: ``v`` times smaller than 1F1B's.

The warm-up count and the peak in flight it implies live in ``dsctl.launch.rules`` (the memory model reads them
there); tests/unit/test_schedule_interleaved.py checks them against this order.
"""

from __future__ import annotations

from dsctl.launch.rules import INTERLEAVED_CHUNKS, interleaved_warmup_forwards
from dsctl.launch.schedule.geometry import Geometry
from dsctl.launch.schedule.program import RankProgram


def _chunk_and_micro_batch(k: int, num_ranks: int, chunks: int, forward: bool) -> tuple[int, int]:
    group, within = divmod(k, num_ranks * chunks)
    chunk = within // num_ranks
    return (chunk if forward else chunks - 1 - chunk), group * num_ranks + k % num_ranks


def interleaved_program(geometry: Geometry, rank: int) -> RankProgram:
    """Program of ``rank`` (``geometry.placement`` "interleaved"; ``v = num_stages / num_ranks``). Precondition
    (``check_schedule_params``): the micro-batches are a multiple of the ranks."""
    p = RankProgram(geometry, rank, record_comm=False)
    ranks, chunks, mb = geometry.num_ranks, geometry.num_directions, geometry.num_micro_batches
    total = chunks * mb
    warm = interleaved_warmup_forwards(ranks, chunks, rank, mb)
    for k in range(warm):
        p.compute_chunk(True, *_chunk_and_micro_batch(k, ranks, chunks, True))
    for k in range(total - warm):
        p.compute_chunk(True, *_chunk_and_micro_batch(k + warm, ranks, chunks, True))
        p.compute_chunk(False, *_chunk_and_micro_batch(k, ranks, chunks, False))
    for k in range(total - warm, total):
        p.compute_chunk(False, *_chunk_and_micro_batch(k, ranks, chunks, False))
    return p


__all__ = ["INTERLEAVED_CHUNKS", "interleaved_program"]
