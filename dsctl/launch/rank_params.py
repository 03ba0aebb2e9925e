"""Parameters one GPU of a pipeline rank holds: the stages it holds (``dsctl.launch.rules.stages_of_rank``) split
over tensor parallelism (dense GEMMs over ``tp``, ``dsctl.launch.tensor_parallel``) and expert parallelism
(routed experts over ``ep``). The memory model (``dsctl.launch.memory``) and the smallest-node-count bound
(``dsctl.launch.minnodes``) count from these."""

from __future__ import annotations

from dsctl.launch.stages import Stage
from dsctl.profiles.schema import ModelProfile


def rank_parameters(stages: tuple[Stage, ...], held: tuple[int, ...]) -> tuple[int, int]:
    """``(dense, routed)`` parameters of the stages a pipeline rank holds (``routed``: all routed experts, before
    the EP split). One rank holding both ends counts the MTP embedding copy once: it is the same tensor as the
    stage-0 table."""
    dense = sum(stages[s].dense_params for s in held)
    routed = sum(stages[s].routed_expert_params for s in held)
    if len(held) == 2 and stages[held[0]].embedding_params and stages[held[1]].embedding_params:
        dense -= min(stages[held[0]].embedding_params, stages[held[1]].embedding_params)
    return dense, routed


def layer_unit_parameters(stages: tuple[Stage, ...], held: tuple[int, ...], ep: int, tp: int = 1) -> int:
    """One layer's share of a pipeline rank's parameters per GPU: the largest held stage's parameters per GPU
    over its layers (MTP modules count as layers; embedding and head spread over them): what ZeRO-2
    reduce-scatters, and ZeRO-3 gathers, at a time (dense parameters over ``tp``: the replicated norms and
    router are a rounding error here)."""
    def per_layer(s: Stage) -> float:
        return (s.dense_params / tp + s.routed_expert_params / ep) / max(1, stage_layers(s))

    return int(max(per_layer(stages[s]) for s in held))


def rank_gemm_parameters(model: ModelProfile, stages: tuple[Stage, ...], held: tuple[int, ...], ep: int,
                         tp: int = 1) -> int:
    """Parameters of GEMM weights one GPU of a pipeline rank holds (FP8 copies): its parameters without the
    embedding tables and the output head (dense GEMMs over ``tp``)."""
    dense, routed = rank_parameters(stages, held)
    embedding = max((stages[s].embedding_params for s in held), default=0) if len(held) == 2 and all(
        stages[s].embedding_params for s in held) else sum(stages[s].embedding_params for s in held)
    head = 0 if model.tie_word_embeddings else model.vocab_size * model.hidden_size
    heads = sum(1 for s in held if stages[s].has_head)
    return max(0, dense - embedding - heads * head) // tp + routed // ep


def stage_layers(stage: Stage) -> int:
    """Layers of ``stage`` a layer-at-a-time term counts: transformer layers and MTP modules."""
    return stage.num_dense_layers + stage.num_moe_layers + stage.num_mtp_modules
