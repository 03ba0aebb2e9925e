"""How a model's layers, embedding, output head and MTP modules are split over pipeline stages.

Rule (documented in docs/launch.md):

- The model is a sequence of ``L + D`` *slots*: its ``L`` transformer layers in order, then its ``D`` MTP modules
  (each an extra transformer layer of the MoE kind plus a small projection).
- ``S`` stages get ``base = (L + D) // S`` slots each; the ``(L + D) % S`` leftover slots go one each to the
  middle stages ``1 .. S-2`` first (stage 0 also carries the embedding table and the last stage the output head,
  so they are kept one slot lighter), then to stage 0.
- The embedding is on stage 0; the final norm, the output head and every MTP module are on the last stage. MTP
  shares the embedding with the main model, so the last stage keeps a copy of it (unless it is stage 0 itself).

DeepSeek-V3 (61 layers incl. 3 dense, 1 MTP) over 16 stages: stage 0 = embedding + the 3 dense layers,
stages 1-14 = 4 MoE layers each, stage 15 = layers 59-60 + MTP + head: 3 + 56 + 2 = 61.
"""

from __future__ import annotations

from dataclasses import dataclass

from dsctl.model.params import ParameterCounts
from dsctl.profiles.schema import ModelProfile


@dataclass(frozen=True)
class Stage:
    """One pipeline stage.

    - ``first_layer`` .. ``last_layer`` (inclusive; ``last_layer = first_layer - 1`` when it holds none).
    - ``num_dense_layers`` / ``num_moe_layers``: the kinds of those layers; ``num_mtp_modules`` on the last stage.
    - ``has_embedding`` (stage 0), ``has_head`` (last stage), ``has_embedding_copy`` (last stage with MTP).
    - ``dense_params``: every parameter of the stage except routed experts (full, not divided by anything).
    - ``routed_expert_params``: all routed-expert parameters of the stage (every expert of every MoE layer,
      MTP included); a GPU holds ``1/ep`` of them.
    - ``num_moe_blocks``: MoE layers + MTP modules (the layers whose routed experts are split by EP).
    """

    index: int
    first_layer: int
    last_layer: int
    num_dense_layers: int
    num_moe_layers: int
    num_mtp_modules: int
    has_embedding: bool
    has_head: bool
    has_embedding_copy: bool
    dense_params: int
    routed_expert_params: int
    embedding_params: int

    @property
    def num_layers(self) -> int:
        return self.last_layer - self.first_layer + 1

    @property
    def num_moe_blocks(self) -> int:
        return self.num_moe_layers + (self.num_mtp_modules if self.routed_expert_params else 0)

    def describe(self) -> str:
        """``emb + L0-2 (3 dense)`` style text."""
        parts = []
        if self.has_embedding:
            parts.append("emb")
        if self.num_layers:
            span = f"L{self.first_layer}" if self.num_layers == 1 else f"L{self.first_layer}-{self.last_layer}"
            kinds = []
            if self.num_dense_layers:
                kinds.append(f"{self.num_dense_layers} dense")
            if self.num_moe_layers:
                kinds.append(f"{self.num_moe_layers} MoE")
            parts.append(f"{span} ({', '.join(kinds)})")
        if self.num_mtp_modules:
            parts.append("MTP" if self.num_mtp_modules == 1 else f"{self.num_mtp_modules} MTP")
        if self.has_head:
            parts.append("head")
        if self.has_embedding_copy:
            parts.append("emb copy")
        return " + ".join(parts)


def slots_per_stage(num_slots: int, num_stages: int) -> list[int]:
    """Slots (layers + MTP modules) per stage under the rule of the module docstring; sums to ``num_slots``."""
    base, extra = divmod(num_slots, num_stages)
    counts = [base] * num_stages
    order = [*range(1, num_stages - 1), 0, num_stages - 1]
    for stage in order[:extra]:
        counts[stage] += 1
    return counts


def split_stages(model: ModelProfile, counts: ParameterCounts, num_stages: int) -> tuple[Stage, ...]:
    """Split ``model`` into ``num_stages`` stages (validated elsewhere: ``num_stages <= model.num_layers``)."""
    num_layers = model.num_layers
    num_mtp = model.num_mtp_modules
    slots = slots_per_stage(num_layers + num_mtp, num_stages)
    experts_per_layer = model.moe.num_routed_experts if model.moe else 0
    routed_per_moe_layer = experts_per_layer * counts.routed_expert
    mtp_routed = num_mtp * routed_per_moe_layer
    stages: list[Stage] = []
    start = 0
    for index, n_slots in enumerate(slots):
        last = index == num_stages - 1
        n_layers = min(n_slots, num_layers - start) if not last else num_layers - start
        layer_ids = range(start, start + n_layers)
        n_dense = sum(1 for i in layer_ids if i < model.num_dense_layers or model.moe is None)
        n_moe = n_layers - n_dense
        layer_params = sum(counts.per_layer[i] for i in layer_ids)
        routed = n_moe * routed_per_moe_layer
        dense = layer_params - routed
        embedding = counts.embedding if index == 0 else 0
        emb_copy = last and num_mtp > 0 and index != 0
        if last:
            dense += counts.final_norm + counts.head + counts.mtp - mtp_routed
            routed += mtp_routed
            if emb_copy:
                embedding += counts.embedding
        dense += embedding
        stages.append(Stage(
            index=index, first_layer=start, last_layer=start + n_layers - 1,
            num_dense_layers=n_dense, num_moe_layers=n_moe, num_mtp_modules=num_mtp if last else 0,
            has_embedding=index == 0, has_head=last, has_embedding_copy=emb_copy,
            dense_params=dense, routed_expert_params=routed, embedding_params=embedding,
        ))
        start += n_layers
    return tuple(stages)
