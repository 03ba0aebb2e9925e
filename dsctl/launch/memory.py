"""Per-GPU training memory of a launch layout against the node's usable HBM, one named term per line (issue 28).

For pipeline rank ``r`` (every dp/ep/tp rank of one pipeline rank holds the same amount)::

    params(r)      = sum over the stages rank r holds of  dense_params / tp (+ the replicated norms and router
                     whole) + routed_expert_params / ep        (tensor parallelism: dsctl.launch.tensor_parallel)
                     (DualPipe: stages r and pp-1-r, i.e. 2 copies of the weights; DualPipeV: r and 2pp-1-r;
                     interleaved 1F1B: r and pp+r; 1F1B/ZB1P: stage r; an embedding copy is counted once if the
                     rank holds both ends)
    shard(x B)     = dense x B / dp + routed x B / expert_dp  (one copy of every parameter spread over its
                     data-parallel group: dense parameters over dp, this GPU's experts over expert_dp)
    unit           = the largest held stage's parameters per GPU / its layers (MTP modules count as layers):
                     one layer's share, what ZeRO-2 reduce-scatters and ZeRO-3 gathers at a time
    weights        = params x weight_bytes                    (BF16 working copy, 2 B; ZeRO-1/2)
                   = shard(weight_bytes) + 2 x unit x weight_bytes
                                                              (ZeRO-3: the shard, and the gathered layer and the
                                                              next one prefetched)
    gradients      = params x grad_bytes                      (FP32 accumulation, 4 B; ZeRO-1 does not shard them)
                   = shard(grad_bytes) + 2 x unit x grad_bytes
                                                              (ZeRO-2/3: the accumulated shard, and two layer
                                                              buckets: one being reduce-scattered, one filling)
    optimizer      = shard(opt_bytes)
                     (opt_bytes = FP32 master 4 B + AdamW moments 2 x BF16 = 8 B; each DualPipe copy
                     keeps its own shard, the conservative reading)
    fp8 weights    = GEMM params x (1 + 4 / 128^2)            (recipes that keep FP8 weight copies: 1 B per weight
                     and one FP32 scale per 128x128 block; embedding and head stay BF16; ZeRO-3: of the two
                     gathered layers only, 2 x unit x (1 + 4 / 128^2))
    activations    = chunks(r) x tokens x max over held stages of the stage's kept bytes per token, split into
                     values, FP8/E5M6 tile scales (4 B per 128 values) and the attention log-sum-exp (4 B per head);
                     chunks = pp_stages + 1 for DualPipe/DualPipeV (README table), pp - r for 1F1B/ZB1P,
                     interleaved 1F1B its warm-up forwards + 1 (``rules.activation_chunks``; a chunk is one of
                     the rank's two half-size stages), never more than the micro-batches of a step
    backward temp  = tokens x one layer's plain-BF16 saved bytes (the layer being differentiated, recomputed or
                     dequantised, and its gradients; one layer at a time)
    (tp > 1)       = activations, scales, log-sum-exp and backward temporaries over tp: sequence parallelism
                     splits every saved tensor of a layer (Korthikanti et al. 2022, "Reducing Activation
                     Recomputation in Large Transformer Models": s b h (34/t + 5 a s / (h t)) per layer)
    DeepEP buffers = 2e9 NVLink + 1e9 RDMA bytes when the model has experts and ep > 1 (the normal-mode buffer
                     DeepEP's own tests/test_internode.py allocates)
    CUDA + NCCL    = CUDA context and NCCL communicators: 1 GiB (an estimate; measure with nvidia-smi on idle ranks)
    total          = the sum of the above; it fits when total <= the node profile's usable HBM (``hbm_usable``,
                     nvidia-smi's total: 79.6 GiB of an 80 GB H800), not the nominal 80 GiB

Activation bytes per token and layer come from the activation recipe (``dsctl.model.recipes``; docs/launch.md
lists every recipe's tensors). Per stage: its layers, each MTP module (one MoE layer + its ``eh_proj`` input,
``4h``) and on the last stage the final norm input (``2h``); the output logits are not kept (fused cross-entropy).
The figures are estimates for planning; the recipes are checked within 5% against PyTorch's saved tensors of a
reduced layer (tests/unit/test_recipes_torch.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise

from dsctl.launch import rules
from dsctl.launch.layout import ParallelLayout
from dsctl.launch.rank_params import rank_gemm_parameters, rank_parameters, stage_layers
from dsctl.launch.stages import Stage
from dsctl.launch.tensor_parallel import dense_per_tp_rank, replicated_params
from dsctl.model.recipes import (
    DEEPSEEK,
    ActivationBytes,
    ActivationRecipe,
    backward_working_bytes_per_token,
    head_activations,
    layer_activations,
    mtp_extra_activations,
    recompute_flops_per_token,
)
from dsctl.profiles.schema import ModelProfile
from dsctl.units import GIB

#: DeepEP normal-mode buffer: NVLink and RDMA bytes (deepseek-ai/DeepEP tests/test_internode.py: Buffer(group,
#: int(2e9), int(1e9)))
DEEPEP_BUFFER_BYTES = 2_000_000_000 + 1_000_000_000
#: CUDA context and NCCL communicators per GPU (estimate)
RUNTIME_BYTES = 1 * GIB
#: one FP32 scale per 128x128 block of an FP8 weight
FP8_WEIGHT_BYTES = 1.0 + 4.0 / (128 * 128)


@dataclass(frozen=True)
class MemoryAssumptions:
    """Bytes per value of each kind of training state, and the fixed buffers per GPU."""

    weight_bytes: float = 2.0
    grad_bytes: float = 4.0
    master_bytes: float = 4.0
    moment_bytes: float = 4.0  # two AdamW moments in BF16
    deepep_buffer_bytes: int = DEEPEP_BUFFER_BYTES
    runtime_bytes: int = RUNTIME_BYTES

    @property
    def optimizer_bytes(self) -> float:
        """Optimizer state per parameter before ZeRO-1 sharding (master weights + moments)."""
        return self.master_bytes + self.moment_bytes


_DEFAULT_ASSUMPTIONS = MemoryAssumptions()


@dataclass(frozen=True)
class RankMemory:
    """Memory of one pipeline rank's GPUs, in bytes (parameters in counts); each ``*_bytes`` is one term."""

    pp_rank: int
    stages: tuple[int, ...]
    params: int
    dense_params: int
    routed_params: int
    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    fp8_weights_bytes: int
    activation_chunks: int
    activation_chunk_bytes: int
    activations_bytes: int
    activation_scales_bytes: int
    attention_lse_bytes: int
    backward_temporaries_bytes: int
    deepep_buffers_bytes: int
    runtime_bytes: int
    total_bytes: int
    headroom_bytes: int


#: the terms of :class:`RankMemory` in the order the table lists them, with their labels
MEMORY_TERMS: tuple[tuple[str, str], ...] = (
    ("weights_bytes", "weights (BF16)"),
    ("gradients_bytes", "gradients (FP32)"),
    ("optimizer_bytes", "optimizer states (sharded)"),
    ("fp8_weights_bytes", "FP8 weight copies"),
    ("activations_bytes", "activations"),
    ("activation_scales_bytes", "FP8/E5M6 tile scales"),
    ("attention_lse_bytes", "attention log-sum-exp"),
    ("backward_temporaries_bytes", "backward temporaries"),
    ("deepep_buffers_bytes", "DeepEP buffers"),
    ("runtime_bytes", "CUDA context + NCCL"),
)


@dataclass(frozen=True)
class MemoryEstimate:
    """Per-rank memory and the verdict.

    ``fits`` is True when every rank's ``total_bytes <= hbm_bytes`` (the usable HBM); ``headroom_bytes`` is the
    smallest ``hbm_bytes - total_bytes`` over ranks (negative = short by that much), on ``worst_pp_rank``.
    ``nominal_hbm_bytes`` is the data-sheet size; ``recipe`` the activation recipe's name and
    ``recompute_flops_per_token_layer`` the forward FLOPs one MoE (else dense) layer redoes per token.
    ``per_rank`` is empty in an estimate made without its rows (:func:`estimate_memory`'s ``rows``).
    """

    hbm_bytes: int
    tokens_per_micro_batch: int
    activation_bytes_per_token_layer: int
    fits: bool
    worst_pp_rank: int
    max_total_bytes: int
    headroom_bytes: int
    per_rank: tuple[RankMemory, ...]
    recipe: str = DEEPSEEK.name
    nominal_hbm_bytes: int = 0
    recompute_flops_per_token_layer: float = 0.0

    @property
    def worst(self) -> RankMemory:
        return self.per_rank[self.worst_pp_rank]


def stage_activations(model: ModelProfile, stage: Stage, recipe: ActivationRecipe = DEEPSEEK) -> ActivationBytes:
    """Bytes per token of one micro-batch held by ``stage`` between its forward and backward."""
    return all_stage_activations(model, (stage,), recipe)[0]


@lru_cache(maxsize=64)
def all_stage_activations(model: ModelProfile, stages: tuple[Stage, ...],
                          recipe: ActivationRecipe = DEEPSEEK) -> tuple[ActivationBytes, ...]:
    """:func:`stage_activations` of every stage (the layer figures computed once; cached: a layout search asks
    again for every layout of a stage split)."""
    moe_layer = layer_activations(model, recipe, True)
    dense_layer = layer_activations(model, recipe, False)
    mtp = moe_layer + mtp_extra_activations(model)
    head = head_activations(model)
    out = []
    for stage in stages:
        total = dense_layer * stage.num_dense_layers + moe_layer * stage.num_moe_layers + mtp * stage.num_mtp_modules
        out.append(total + head if stage.has_head else total)
    return tuple(out)


def stage_activation_bytes_per_token(model: ModelProfile, stage: Stage, recipe: ActivationRecipe = DEEPSEEK) -> float:
    """All kept bytes per token of ``stage`` (values, scales and log-sum-exp together)."""
    return stage_activations(model, stage, recipe).total


def activation_chunks(layout: ParallelLayout, pp_rank: int, num_micro_batches: int) -> int:
    """Peak micro-batch stage-chunks in flight on ``pp_rank`` (README table; 1F1B: ``pp - r``)."""
    return rules.activation_chunks(layout.schedule, layout.pp, pp_rank, num_micro_batches)


def _identity_key(objects: tuple[object, ...], values: tuple[object, ...]) -> tuple[object, ...]:
    return tuple(map(id, objects)) + values


class _IdentityCache:
    """A bounded cache keyed by plain values and the identity of objects (hashing a model or a stage tuple at
    every estimate of a layout search costs more than the figures): a hit needs the very objects it was stored
    with, so an id reused after one was freed never answers; full, it starts again empty."""

    def __init__(self, limit: int) -> None:
        self._entries: dict[tuple[object, ...], tuple[tuple[object, ...], object]] = {}
        self._limit = limit

    def get(self, objects: tuple[object, ...], values: tuple[object, ...]) -> object | None:
        hit = self._entries.get(_identity_key(objects, values))
        if hit is None or any(a is not b for a, b in zip(hit[0], objects, strict=True)):
            return None
        return hit[1]

    def clear(self) -> None:
        self._entries.clear()

    def put(self, objects: tuple[object, ...], values: tuple[object, ...], result: object) -> None:
        if len(self._entries) >= self._limit:
            self.clear()
        self._entries[_identity_key(objects, values)] = (objects, result)


#: per-rank figures of a stage split that no batch, EP degree or ZeRO stage changes
_SPLITS = _IdentityCache(4096)

_RankSplit = tuple[tuple[int, ...], int, int, int, tuple[tuple[float, float], ...], ActivationBytes]
_ModelTerms = tuple[float, int, float]


def _rank_split(model: ModelProfile, stages: tuple[Stage, ...], schedule: str, pp: int, tp: int,
                recipe: ActivationRecipe) -> tuple[tuple[_RankSplit, ...], _ModelTerms, tuple[int, ...]]:
    """Per pipeline rank: (stages held, dense parameters per GPU (over ``tp`` but the replicated ones), all
    routed parameters, dense GEMM parameters per GPU, per held stage (dense per GPU, routed) parameters per
    layer, the largest held stage's activation bytes per token); the model's terms of :func:`_rank_static`
    (they depend on the model, recipe and ``tp`` only); and per rank the first rank with the same figures (all
    but the stages held; DualPipe's mirrored ranks, stages of equal layers), whose terms are its terms. Cached,
    as a layout search asks for the same split under many EP degrees, batches and ZeRO stages."""
    hit = _SPLITS.get((model, stages, recipe), (schedule, pp, tp))
    if hit is not None:
        return hit  # type: ignore[return-value]
    per_stage = all_stage_activations(model, stages, recipe)
    out = []
    for r in range(pp):
        held = rules.stages_of_rank(schedule, pp, r)
        dense, routed_full = rank_parameters(stages, held)
        if tp > 1:
            dense = int(dense_per_tp_rank(dense, sum(replicated_params(model, stages[s]) for s in held), tp))
        per_layer = tuple((stages[s].dense_params / tp / max(1, stage_layers(stages[s])),
                           stages[s].routed_expert_params / max(1, stage_layers(stages[s]))) for s in held)
        out.append((held, dense, routed_full, rank_gemm_parameters(model, stages, held, 1, tp) - routed_full,
                    per_layer, max((per_stage[s] for s in held), key=lambda x: x.total)))
    moe = model.moe is not None
    terms = (backward_working_bytes_per_token(model), int(layer_activations(model, recipe, moe).total / tp),
             recompute_flops_per_token(model, recipe, moe))
    twins = _twins(out)
    _SPLITS.put((model, stages, recipe), (schedule, pp, tp), (tuple(out), terms, twins))
    return tuple(out), terms, twins


def _twins(rows: list[_RankSplit]) -> tuple[int, ...]:
    """Per rank of ``rows`` (:func:`_rank_split`'s), the first rank with the same figures: all but the stages
    held, every input of :func:`_rank_static`'s terms."""
    first: dict[tuple[object, ...], int] = {}
    return tuple(first.setdefault(row[1:], r) for r, row in enumerate(rows))


#: per-rank terms of a layout that no batch changes (parameters, weights, gradients, optimizer, FP8 copies);
#: small: a search meets a layout's micro-batch sizes one after another
_STATIC = _IdentityCache(512)

_RankStatic = tuple[tuple[int, ...], int, int, int, int, int, int, int, int, ActivationBytes]
_RankSum = tuple[int, float, float, float]
_Static = tuple[tuple[_RankStatic, ...], tuple[_RankSum, ...], tuple[float, int, float], tuple[int, ...]]


def _rank_static(model: ModelProfile, layout: ParallelLayout, stages: tuple[Stage, ...], a: MemoryAssumptions,
                 recipe: ActivationRecipe) -> _Static:
    """Per pipeline rank: (stages held, params, dense, routed, weights, gradients, optimizer and FP8 weight bytes,
    their sum, the largest held stage's activation bytes per token): the terms of :func:`estimate_memory` that
    no batch changes; per rank (that sum, activation values, scales and log-sum-exp bytes per token) for
    :func:`_worst_rank`; and the model's (backward temporaries per token, the estimate's activation bytes per
    token and layer, recompute FLOPs per token and layer). Cached: a layout search asks for them under every
    micro-batch size."""
    ep, dp, edp, zero, schedule, pp, tp = (layout.ep, layout.dp, layout.expert_dp, layout.zero_stage,
                                           layout.schedule, layout.pp, layout.tp)
    objects, values = (model, stages, recipe, a), (schedule, pp, tp, ep, dp, edp, zero)
    hit = _STATIC.get(objects, values)
    if hit is not None:
        return hit  # type: ignore[return-value]
    optimizer_bytes, weight_bytes, grad_bytes = a.optimizer_bytes, a.weight_bytes, a.grad_bytes
    out: list[_RankStatic] = []
    sums: list[_RankSum] = []
    split, terms, twins = _rank_split(model, stages, schedule, pp, tp, recipe)
    fp8_copies = recipe.fp8_weight_copies
    for r, (held, dense, routed_full, gemm_dense, per_layer, per_token) in enumerate(split):
        twin = twins[r]
        if twin != r:  # the same figures as an earlier rank: the same terms
            out.append((held, *out[twin][1:]))
            sums.append(sums[twin])
            continue
        routed = routed_full // ep
        params = dense + routed
        # one layer's share (rank_params.layer_unit_parameters): ZeRO-2/3 only; a shard is over the parameter's dp group
        unit = int(max([d + x / ep for d, x in per_layer])) if zero >= 2 else 0
        weights = (int(dense * weight_bytes / dp + routed * weight_bytes / edp) + int(2 * unit * weight_bytes)
                   if zero >= 3 else int(params * weight_bytes))
        grads = (int(dense * grad_bytes / dp + routed * grad_bytes / edp) + int(2 * unit * grad_bytes)
                 if zero >= 2 else int(params * grad_bytes))
        optim = int(dense * optimizer_bytes / dp + routed * optimizer_bytes / edp)
        fp8 = 0
        if fp8_copies:
            fp8 = int((2 * unit if zero >= 3 else gemm_dense + routed) * FP8_WEIGHT_BYTES)  # rank_gemm_parameters
        held_bytes = weights + grads + optim + fp8
        out.append((held, params, dense, routed, weights, grads, optim, fp8, held_bytes, per_token))
        sums.append((held_bytes, per_token.values, per_token.scales, per_token.lse))
    rows = (tuple(out), tuple(sums), terms, _undominated(sums))
    _STATIC.put(objects, values, rows)
    return rows


@lru_cache(maxsize=4096)
def _chunks(schedule: str, pp: int, num_micro_batches: int) -> tuple[int, ...]:
    """:func:`activation_chunks` of every pipeline rank."""
    return tuple(rules.activation_chunks(schedule, pp, r, num_micro_batches) for r in range(pp))


@lru_cache(maxsize=4096)
def _chunks_fall(schedule: str, pp: int, num_micro_batches: int) -> bool:
    """Whether :func:`_chunks` never grows from a rank to the next and is never negative (what
    :func:`_undominated` needs)."""
    chunks = _chunks(schedule, pp, num_micro_batches)
    return chunks[-1] >= 0 and all(a >= b for a, b in pairwise(chunks))


def _undominated(sums: list[_RankSum]) -> tuple[int, ...]:
    """The pipeline ranks of ``sums`` (per rank: held bytes, activation values, scales and log-sum-exp bytes per
    token) that no earlier rank dominates (every figure at least as large), or every rank when a figure is
    negative or NaN. With chunks that never grow from a rank to the next (:func:`_chunks_fall`) and tokens >= 0, a
    dominated rank's total is at most its earlier dominator's, so :func:`_worst_rank`, which keeps the first of
    equals, never picks it: its answer over these ranks is its answer over all."""
    kept: list[int] = []
    seen: set[_RankSum] = set()
    for r, row in enumerate(sums):
        held_bytes, values, scales, lse = row
        if not (held_bytes >= 0 and values >= 0 and scales >= 0 and lse >= 0):  # NaN too
            return tuple(range(len(sums)))
        if row in seen:
            continue
        seen.add(row)
        for k in kept:
            other = sums[k]
            if other[0] >= held_bytes and other[1] >= values and other[2] >= scales and other[3] >= lse:
                break
        else:
            kept.append(r)
    return tuple(kept)


def _fixed_bytes(model: ModelProfile, layout: ParallelLayout, tokens: float, a: MemoryAssumptions,
                 backward_bytes_per_token: float) -> tuple[int, int, int]:
    """(backward temporaries, DeepEP buffers, their sum with the runtime): the terms every rank holds."""
    temporaries = int(backward_bytes_per_token * tokens)
    deepep = a.deepep_buffer_bytes if model.moe is not None and layout.ep > 1 else 0
    return temporaries, deepep, temporaries + deepep + a.runtime_bytes


def _worst_rank(static: _Static, layout: ParallelLayout, tokens: float, num_micro_batches: int,
                fixed: int) -> tuple[int, int]:
    """(the pipeline rank with the largest total, the first of equals; that total): :func:`estimate_memory`'s
    integer terms without building its rows. ``tokens`` per TP rank; ``fixed`` the terms every rank holds."""
    worst, worst_rank = 0, -1
    schedule, pp = layout.schedule, layout.pp
    chunks_of = _chunks(schedule, pp, num_micro_batches)
    sums = static[1]
    ranks = static[3] if tokens >= 0 and _chunks_fall(schedule, pp, num_micro_batches) else range(len(sums))
    for r in ranks:
        held_bytes, values, scales, lse = sums[r]
        held = chunks_of[r] * tokens  # chunks * tokens * x as estimate_memory evaluates it, left to right
        total = held_bytes + int(held * values) + int(held * scales) + int(held * lse)
        if worst_rank < 0 or total > worst:
            worst, worst_rank = total, r
    return worst_rank, worst + fixed  # the fixed terms are every rank's: the largest sum is the largest total


def estimate_memory(model: ModelProfile, layout: ParallelLayout, stages: tuple[Stage, ...], hbm_bytes: int,
                    tokens_per_micro_batch: int, num_micro_batches: int,
                    assumptions: MemoryAssumptions | None = None, recipe: ActivationRecipe = DEEPSEEK,
                    nominal_hbm_bytes: int = 0, rows: bool = True) -> MemoryEstimate:
    """Memory of every pipeline rank of ``layout`` (``stages`` from :func:`~dsctl.launch.stages.split_stages`)
    under ``recipe`` against ``hbm_bytes`` of usable HBM per GPU (``nominal_hbm_bytes``: the data-sheet size).
    ``rows`` False leaves ``per_rank`` empty (every other field the same): the verdict of a layout search's
    many layouts, most of which nobody reads the rows of."""
    a = assumptions or _DEFAULT_ASSUMPTIONS
    tokens = tokens_per_micro_batch / layout.tp  # sequence parallelism: each TP rank keeps 1/tp of every saved tensor
    static = _rank_static(model, layout, stages, a, recipe)
    temporaries, deepep, fixed = _fixed_bytes(model, layout, tokens, a, static[2][0])
    if not rows:
        worst_rank, worst_total = _worst_rank(static, layout, tokens, num_micro_batches, fixed)
        return _estimate(static, recipe, hbm_bytes, tokens_per_micro_batch, worst_rank, worst_total, (),
                         nominal_hbm_bytes)
    runtime = a.runtime_bytes
    out = []
    for r, ((held, params, dense, routed, weights, grads, optim, fp8, held_bytes, per_token), chunks) in enumerate(
            zip(static[0], _chunks(layout.schedule, layout.pp, num_micro_batches), strict=True)):
        values = int(chunks * tokens * per_token.values)
        scales = int(chunks * tokens * per_token.scales)
        lse = int(chunks * tokens * per_token.lse)
        total = held_bytes + values + scales + lse + fixed
        out.append(RankMemory(
            pp_rank=r, stages=held, params=params, dense_params=dense, routed_params=routed,
            weights_bytes=weights, gradients_bytes=grads, optimizer_bytes=optim, fp8_weights_bytes=fp8,
            activation_chunks=chunks, activation_chunk_bytes=int(per_token.total * tokens), activations_bytes=values,
            activation_scales_bytes=scales, attention_lse_bytes=lse, backward_temporaries_bytes=temporaries,
            deepep_buffers_bytes=deepep, runtime_bytes=runtime, total_bytes=total,
            headroom_bytes=hbm_bytes - total,
        ))
    worst = max(out, key=lambda row: row.total_bytes)
    return _estimate(static, recipe, hbm_bytes, tokens_per_micro_batch, worst.pp_rank, worst.total_bytes,
                     tuple(out), nominal_hbm_bytes)


def _estimate(static: _Static, recipe: ActivationRecipe, hbm_bytes: int, tokens_per_micro_batch: int,
              worst_rank: int, worst_total: int, per_rank: tuple[RankMemory, ...],
              nominal_hbm_bytes: int) -> MemoryEstimate:
    """The estimate of :func:`estimate_memory` from its worst rank and rows."""
    _, activation_bytes, recompute_flops = static[2]
    return MemoryEstimate(
        hbm_bytes=hbm_bytes,
        tokens_per_micro_batch=tokens_per_micro_batch,
        activation_bytes_per_token_layer=activation_bytes,
        fits=worst_total <= hbm_bytes,
        worst_pp_rank=worst_rank,
        max_total_bytes=worst_total,
        headroom_bytes=hbm_bytes - worst_total,
        per_rank=per_rank,
        recipe=recipe.name,
        nominal_hbm_bytes=nominal_hbm_bytes or hbm_bytes,
        recompute_flops_per_token_layer=recompute_flops,
    )
