"""The layout search's shortcuts give the answers of the long way (issue: launch search speed): the memory rule
asked of an estimate without its per-rank rows, the lower bound's shared stage seconds, and the ideal schedule
timing over a recorded op order."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from dsctl.launch import memory as memory_module
from dsctl.launch.candidates import PlanInputs
from dsctl.launch.layout import ParallelLayout
from dsctl.launch.memory import MemoryAssumptions, estimate_memory
from dsctl.launch.request import LaunchRequest
from dsctl.launch.schedule.api import rank_programs
from dsctl.launch.schedule.simulator import plan_ideal, simulate_ideal_timed, simulate_planned
from dsctl.launch.search import SearchOptions, attach_memory, enumerate_trials, search_space, with_rows
from dsctl.launch.stages import split_stages
from dsctl.model.params import count_parameters
from dsctl.model.recipes import DEEPSEEK, searchable_recipes
from dsctl.profiles.loader import ProfileStore
from dsctl.profiles.schema import ModelProfile
from dsctl.steptime import predict as predict_module
from dsctl.steptime import step_lower_bound
from dsctl.steptime.collectives import stage_collectives
from dsctl.steptime.hardware import gpu_rates
from dsctl.steptime.layers import layer_seconds

STORE = ProfileStore()
H800 = STORE.node("h800-hgx")


def _trials(model: str, nodes: int) -> tuple[PlanInputs, list]:  # type: ignore[type-arg]
    m = STORE.model(model)
    inputs = PlanInputs(m, H800, LaunchRequest(nodes, global_batch=256).checked(m, H800.num_gpus), count_parameters(m),
                        MemoryAssumptions())
    return inputs, enumerate_trials(inputs, search_space(inputs, SearchOptions()))[0]


@pytest.mark.parametrize(("model", "nodes"), [("deepseek-v2-lite", 2), ("qwen2.5-72b", 2), ("deepseek-v2", 8)])
def test_the_memory_rule_without_rows_keeps_and_rejects_what_the_full_estimate_does(model: str, nodes: int) -> None:
    inputs, trials = _trials(model, nodes)
    kept, rejected = attach_memory(inputs, trials)
    lean_kept, lean_rejected = attach_memory(inputs, trials, rows=False)
    assert kept and rejected == lean_rejected  # the same reasons, totals and order
    assert [with_rows(inputs, t) for t in lean_kept] == kept
    assert all(not t.memory.per_rank for t in lean_kept)  # type: ignore[union-attr]


@pytest.mark.parametrize("model", ["deepseek-v2-lite", "llama3.1-405b"])
def test_an_estimate_without_rows_has_every_other_field_of_the_full_one(model: str) -> None:
    """Every schedule, ZeRO stage, tp and recipe on a few layouts and batches; the worst rank is the first of
    equals (DualPipe's mirrored ranks tie)."""
    m = STORE.model(model)
    counts = count_parameters(m)
    seen_ties = 0
    for schedule, pp in (("dualpipe", 4), ("dualpipev", 2), ("1f1b", 4), ("zb1p", 2), ("interleaved", 2)):
        num_stages = pp * (2 if schedule in ("dualpipe", "dualpipev", "interleaved") else 1)
        stages = split_stages(m, counts, num_stages)
        for zero in (1, 2, 3):
            for tp in (1, 2):
                for recipe in searchable_recipes(m):
                    layout = ParallelLayout(4, 8, pp, 1, tp, 32 // (pp * tp), schedule, zero)
                    for tokens, micro_batches in ((4096, 2 * pp), (8192, 64)):
                        full = estimate_memory(m, layout, stages, H800.usable_hbm_bytes, tokens, micro_batches,
                                               None, recipe, H800.hbm_bytes)
                        lean = estimate_memory(m, layout, stages, H800.usable_hbm_bytes, tokens, micro_batches,
                                               None, recipe, H800.hbm_bytes, rows=False)
                        assert lean == replace(full, per_rank=())
                        totals = [r.total_bytes for r in full.per_rank]
                        seen_ties += totals.count(max(totals)) > 1
    assert seen_ties  # the first-of-equals rule was exercised


@pytest.mark.parametrize("model", ["deepseek-v3", "qwen2.5-72b"])
def test_the_worst_rank_sought_among_undominated_ranks_is_the_worst_of_all(model: str) -> None:
    """Deep pipelines (where most ranks are dominated by an earlier one), micro-batches below, at and above pp
    (chunks capped or not): the estimate without rows names the full estimate's worst rank and total."""
    m = STORE.model(model)
    counts = count_parameters(m)
    pruned = 0
    for schedule, pp in (("dualpipe", 8), ("dualpipev", 8), ("1f1b", 16), ("zb1p", 8), ("interleaved", 8)):
        dual = schedule in ("dualpipe", "dualpipev", "interleaved")
        stages = split_stages(m, counts, pp * (2 if dual else 1))
        for zero in (1, 3):
            for recipe in searchable_recipes(m)[:2]:
                layout = ParallelLayout(16, 8, pp, 8, 1, 128 // pp, schedule, zero)
                for tokens, micro_batches in ((4096, pp // 2), (4096, pp), (16384, 4 * pp)):
                    full = estimate_memory(m, layout, stages, H800.usable_hbm_bytes, tokens, micro_batches,
                                           None, recipe, H800.hbm_bytes)
                    lean = estimate_memory(m, layout, stages, H800.usable_hbm_bytes, tokens, micro_batches,
                                           None, recipe, H800.hbm_bytes, rows=False)
                    assert (lean.worst_pp_rank, lean.max_total_bytes) == (full.worst_pp_rank, full.max_total_bytes)
                    assert lean == replace(full, per_rank=())
                    static = memory_module._rank_static(m, layout, stages, MemoryAssumptions(), recipe)
                    pruned += len(static[3]) < pp
    assert pruned  # the shortcut was taken


def _without_twins(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rank's terms computed afresh (no rank borrows an earlier rank's), caches emptied."""
    split = memory_module._rank_split

    def every_rank_its_own(*args: object) -> tuple[object, ...]:
        rows, terms, _ = split(*args)  # type: ignore[arg-type]
        return rows, terms, tuple(range(len(rows)))

    memory_module._STATIC.clear()
    monkeypatch.setattr(memory_module, "_rank_split", every_rank_its_own)


@pytest.mark.parametrize("model", ["deepseek-v3", "deepseek-v2-lite", "llama3.1-405b"])
def test_ranks_with_the_same_figures_share_terms_only_where_they_are_the_same(model: str) -> None:
    """Every schedule, ZeRO stage, tp and recipe on deep pipelines: the full estimate is the one whose every
    rank's terms are computed afresh."""
    m = STORE.model(model)
    counts = count_parameters(m)
    cases = []
    for schedule, pp in (("dualpipe", 8), ("dualpipev", 4), ("1f1b", 16), ("zb1p", 8), ("interleaved", 4)):
        stages = split_stages(m, counts, pp * (2 if schedule in ("dualpipe", "dualpipev", "interleaved") else 1))
        for zero in (1, 2, 3):
            for tp in (1, 2):
                for recipe in searchable_recipes(m):
                    layout = ParallelLayout(16, 8, pp, 8, tp, 128 // (pp * tp), schedule, zero)
                    cases.append((layout, stages, recipe))
    memory_module._STATIC.clear()
    memory_module._SPLITS.clear()
    twinned = 0
    estimates = []
    for layout, stages, recipe in cases:
        estimates.append(estimate_memory(m, layout, stages, H800.usable_hbm_bytes, 4096, 64, None, recipe,
                                         H800.hbm_bytes))
        twins = memory_module._rank_split(m, stages, layout.schedule, layout.pp, layout.tp, recipe)[2]
        twinned += twins != tuple(range(layout.pp))
    with pytest.MonkeyPatch.context() as patch:
        _without_twins(patch)
        afresh = [estimate_memory(m, layout, stages, H800.usable_hbm_bytes, 4096, 64, None, recipe, H800.hbm_bytes)
                  for layout, stages, recipe in cases]
    memory_module._STATIC.clear()
    assert estimates == afresh
    assert twinned  # the shortcut was taken


def test_ranks_share_terms_only_when_every_figure_is_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """Made-up ranks that differ from rank 0 in one figure each (dense, routed, GEMM, per-layer shares, activation
    bytes): only the exact copies borrow rank 0's terms, and the terms are those computed afresh."""
    m = STORE.model("deepseek-v2-lite")
    act = memory_module.all_stage_activations(m, split_stages(m, count_parameters(m), 2), DEEPSEEK)
    dense, routed, gemm, per_layer = 1_000_000, 6_400_000, 900_000, ((1000.0, 8000.0),)
    rows = [((0,), dense, routed, gemm, per_layer, act[0]), ((1,), dense, routed, gemm, per_layer, act[0]),
            ((2,), dense + 64, routed, gemm, per_layer, act[0]), ((3,), dense, routed + 64, gemm, per_layer, act[0]),
            ((4,), dense, routed, gemm + 64, per_layer, act[0]),
            ((5,), dense, routed, gemm, ((1000.0, 8064.0),), act[0]), ((6,), dense, routed, gemm, per_layer, act[1]),
            ((7,), dense, routed, gemm, per_layer, act[0])]
    twins = memory_module._twins(rows)  # type: ignore[arg-type]
    assert twins == (0, 0, 2, 3, 4, 5, 6, 0)
    stages = split_stages(m, count_parameters(m), 8)
    layout = ParallelLayout(8, 8, 8, 8, 1, 8, "1f1b", 2)  # ZeRO-2: each figure changes a term
    terms = memory_module._rank_split(m, stages, "1f1b", 8, 1, DEEPSEEK)[1]
    for shared in (twins, tuple(range(8))):
        memory_module._STATIC.clear()
        monkeypatch.setattr(memory_module, "_rank_split", lambda *args, s=shared: (tuple(rows), terms, s))
        static = memory_module._rank_static(m, layout, stages, MemoryAssumptions(), DEEPSEEK)
        if shared == twins:
            borrowed = static
    memory_module._STATIC.clear()
    assert borrowed[:2] == static[:2] and len({row[1:] for row in static[0]}) == 6


def _worst_of(rows: list[tuple[int, float, float, float]], chunks: list[int], tokens: float,
              ranks: list[int] | tuple[int, ...]) -> tuple[int, int]:
    """The first rank of ``ranks`` with the largest total (the loop of ``memory._worst_rank``)."""
    worst, worst_rank = 0, -1
    for r in ranks:
        held_bytes, values, scales, lse = rows[r]
        held = chunks[r] * tokens
        total = held_bytes + int(held * values) + int(held * scales) + int(held * lse)
        if worst_rank < 0 or total > worst:
            worst, worst_rank = total, r
    return worst_rank, worst


def test_undominated_ranks_keep_the_first_largest_total_under_falling_chunks() -> None:
    """Random rows with many ties and dominated ranks, random chunks that never grow: the answer over the kept
    ranks is the answer over all; a negative figure keeps every rank."""
    rng = random.Random(7)
    dropped = 0
    for _ in range(3000):
        pp = rng.randint(1, 12)
        rows = [(rng.choice((0, 5, 10, 10)) * 1000, rng.choice((0.0, 1.5, 3.0)), rng.choice((0.0, 0.25)),
                 rng.choice((0.0, 2.0))) for _ in range(pp)]
        chunks = sorted((rng.randint(1, 6) for _ in range(pp)), reverse=True)
        kept = memory_module._undominated(rows)
        assert list(kept) == sorted(kept) and (not rows or kept[0] == 0)
        dropped += len(kept) < pp
        for tokens in (0.0, 1.0, 1000.0, 4096.0 / 3):
            assert _worst_of(rows, chunks, tokens, kept) == _worst_of(rows, chunks, tokens, range(pp))
    assert dropped
    assert memory_module._undominated([(10, 1.0, 0.0, 0.0), (5, -1.0, 0.0, 0.0)]) == (0, 1)
    assert memory_module._undominated([(10, 1.0, 0.0, 0.0), (10, 1.0, 0.0, 0.0), (11, 0.5, 0.0, 0.0)]) == (0, 2)


def test_chunks_that_grow_from_a_rank_to_the_next_take_every_rank() -> None:
    assert memory_module._chunks_fall("1f1b", 8, 64) and memory_module._chunks_fall("1f1b", 8, 3)
    assert all(memory_module._chunks_fall(s, 8, m) for s in ("dualpipe", "dualpipev", "zb1p", "interleaved")
               for m in (8, 16, 64))
    # why the rule needs falling chunks: a later rank with more chunks outweighs its dominator
    rows = [(10, 1.0, 0.0, 0.0), (10, 1.0, 0.0, 0.0)]
    assert _worst_of(rows, [1, 2], 100.0, memory_module._undominated(rows)) != _worst_of(rows, [1, 2], 100.0,
                                                                                         range(2))


def test_an_estimate_with_chunks_that_grow_takes_every_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    """Were a schedule to give a later rank more chunks, its mirrored (dominated) ranks must still be weighed."""
    m = STORE.model("deepseek-v2-lite")
    stages = split_stages(m, count_parameters(m), 16)
    layout = ParallelLayout(16, 8, 8, 8, 1, 16, "dualpipe", 1)
    monkeypatch.setattr(memory_module, "_chunks", lambda schedule, pp, micro_batches: tuple(range(1, pp + 1)))
    monkeypatch.setattr(memory_module, "_chunks_fall", memory_module._chunks_fall.__wrapped__)
    full = estimate_memory(m, layout, stages, H800.usable_hbm_bytes, 4096, 64, None, DEEPSEEK, H800.hbm_bytes)
    lean = estimate_memory(m, layout, stages, H800.usable_hbm_bytes, 4096, 64, None, DEEPSEEK, H800.hbm_bytes,
                           rows=False)
    assert full.worst_pp_rank == 7 and lean == replace(full, per_rank=())


def _bound_afresh(model: ModelProfile, layout: ParallelLayout, micro_batches: int) -> float:
    """``step_lower_bound`` (4,096 tokens per micro-batch, balanced, the DeepSeek recipe, no all-to-all model)
    computed from the layout's own groups with nothing shared."""
    rates = gpu_rates(H800, model.training_precision)
    stages = split_stages(model, count_parameters(model), layout.num_stages)
    kinds = {moe: layer_seconds(model, moe, 4096.0, 4096, True, layout.ep, rates, None, 1.0, DEEPSEEK, layout.tp)
             for moe in (False, True)}
    link_rate, latency = predict_module._link(H800)
    dual = layout.schedule in ("dualpipe", "dualpipev")
    costs = predict_module._zero_stage_costs(model, count_parameters(model), stages, 4096.0, rates, kinds,
                                             layout.zero_stage, layout, dual, link_rate, latency)
    work = []
    for stage, cost in zip(stages, costs, strict=True):
        sync = stage_collectives(predict_module._tp_dense(model, stage, layout.tp),
                                 stage.routed_expert_params / layout.ep, layout.dp, layout.expert_dp, link_rate,
                                 latency)[0] if layout.zero_stage >= 2 else 0.0
        busy, comm = cost.compute_f + cost.compute_b + cost.tp_comm + sync, cost.comm_f + cost.comm_b
        work.append(max(busy, comm) if dual else busy + comm)
    return micro_batches * max(sum(work[s] / holders for s, holders in rank)
                               for rank in predict_module._rank_shares(layout.schedule, layout.pp))


def test_the_lower_bound_shares_stage_seconds_only_where_they_are_the_same() -> None:
    """The cached bound (stage seconds shared by ZeRO-1 and 2, and by every dp under them) against the bound
    from each layout's own groups, across ZeRO stages, dp, tp, schedules and EP degrees, in an order that
    meets each shared entry from both sides."""
    m = STORE.model("deepseek-v2-lite")
    for schedule, pp in (("dualpipe", 2), ("1f1b", 2), ("interleaved", 2), ("zb1p", 4)):
        for zero in (3, 1, 2, 3):
            for nodes, ep, tp in ((2, 8, 1), (4, 8, 1), (4, 16, 1), (8, 1, 1), (4, 8, 2)):
                if (nodes * 8 // pp) % ep:
                    continue
                layout = ParallelLayout(nodes, 8, pp, ep, tp, nodes * 8 // (pp * tp), schedule, zero)
                cached = step_lower_bound(m, H800, layout, 4 * pp)
                assert cached == _bound_afresh(m, layout, 4 * pp), (schedule, zero, nodes, ep, tp)


@pytest.mark.parametrize(("schedule", "num_stages", "micro_batches"), [
    ("dualpipe", 4, 10), ("dualpipev", 8, 12), ("1f1b", 4, 7), ("zb1p", 3, 6), ("interleaved", 4, 4),
    ("interleaved", 6, 9),
])
def test_the_recorded_order_times_every_op_as_the_event_walk(schedule: str, num_stages: int,
                                                             micro_batches: int) -> None:
    programs = rank_programs(schedule, num_stages, micro_batches)
    plan = plan_ideal(programs)
    assert plan is not None
    rng = random.Random(7)
    for transfer in (0.0, 0.37):
        seconds = [[rng.choice((0.0, rng.uniform(0.1, 3.0))) for _ in p.ops] for p in programs]
        assert simulate_planned(plan, seconds, transfer) == simulate_ideal_timed(programs, seconds, transfer)
