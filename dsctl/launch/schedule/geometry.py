"""Where each micro-batch's stages live: the map (rank, direction) -> stage and back.

A *chain* is one micro-batch's path through the model's ``num_stages`` stages. Its forward at stage ``s`` needs
the forward at ``s - 1``; its backward at ``s`` needs the backward at ``s + 1`` (at the last stage: the forward
there, which computes the loss).
"""

from __future__ import annotations

from dataclasses import dataclass

#: placements: "linear" (1F1B, ZB1P: rank r = stage r), "dualpipe" (two mirrored directions),
#: "dualpipev" (V shape: rank r holds stages r and 2R-1-r of the same micro-batch), "interleaved" (Megatron's
#: virtual pipeline: ``v = num_stages / num_ranks`` model chunks per rank, chunk c of rank r is stage c R + r)
PLACEMENTS = ("linear", "dualpipe", "dualpipev", "interleaved")


@dataclass(frozen=True)
class Geometry:
    """Stage placement of one schedule.

    ``num_ranks`` devices; ``num_stages`` stages on each chain; ``num_micro_batches`` in total (both directions
    for DualPipe). DualPipe direction 0 enters at rank 0, direction 1 at the last rank, ``num_micro_batches / 2``
    each; DualPipeV leg 0 runs down the ranks and leg 1 back up on the same micro-batch. Interleaved: the
    "direction" ``d`` of an op is the rank's model chunk (``0..v-1``), every chunk on the same micro-batches.
    """

    placement: str
    num_ranks: int
    num_stages: int
    num_micro_batches: int

    @property
    def num_chains(self) -> int:
        """Independent micro-batch chains (each one ``num_stages`` long)."""
        return self.num_micro_batches

    @property
    def per_direction(self) -> int:
        """Micro-batches per direction index ``d`` (``m`` runs over ``0..per_direction-1``)."""
        return self.num_micro_batches // 2 if self.placement == "dualpipe" else self.num_micro_batches

    @property
    def num_directions(self) -> int:
        """Values of an op's direction ``d``: 1 (linear), 2 (DualPipe, DualPipeV) or ``v`` (interleaved chunks)."""
        if self.placement == "interleaved":
            return self.num_stages // self.num_ranks
        return 1 if self.placement == "linear" else 2

    def chain(self, d: int, m: int) -> int:
        """Chain id of micro-batch ``m`` of direction ``d``."""
        if self.placement == "dualpipe":
            return d * (self.num_micro_batches // 2) + m
        return m

    def stage(self, rank: int, d: int) -> int:
        """Stage that ``rank`` runs for direction/leg ``d``."""
        if self.placement == "interleaved":
            return d * self.num_ranks + rank
        if d == 0:
            return rank
        if self.placement == "dualpipe":
            return self.num_ranks - 1 - rank
        return 2 * self.num_ranks - 1 - rank

    def rank_of(self, d: int, stage: int) -> int:
        """Rank holding ``stage`` of a direction-``d`` chain."""
        if self.placement == "dualpipe":
            return stage if d == 0 else self.num_ranks - 1 - stage
        if self.placement == "dualpipev":
            return stage if stage < self.num_ranks else 2 * self.num_ranks - 1 - stage
        if self.placement == "interleaved":
            return stage % self.num_ranks
        return stage

    def key(self, backward: bool, chain: int, stage: int) -> int:
        """Integer id of a data item: the forward output (or the input gradient) of ``chain`` at ``stage``."""
        return ((1 if backward else 0) * self.num_chains + chain) * self.num_stages + stage

    @property
    def num_keys(self) -> int:
        return 2 * self.num_chains * self.num_stages
