"""Interleaved 1F1B (Megatron's virtual pipeline, issue 28): the generated order, its bubble against Narayanan et
al. (SC'21) exactly, its op counts, its warm-up and the in-flight peak the memory model takes from it."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.launch import rules
from dsctl.launch.layout import ParallelLayout
from dsctl.launch.memory import estimate_memory
from dsctl.launch.schedule import OpCosts, schedule_ops, simulate
from dsctl.launch.schedule.geometry import Geometry
from dsctl.launch.schedule.interleaved import interleaved_program
from dsctl.launch.schedule.program import RankProgram
from dsctl.launch.schedule.simulator import simulate_ideal
from dsctl.launch.stages import split_stages
from dsctl.model.params import count_parameters
from dsctl.profiles.loader import ProfileStore
from tests.unit.launch_messages import as_read


def _programs(ranks: int, chunks: int, micro_batches: int) -> list[RankProgram]:
    geometry = Geometry("interleaved", ranks, ranks * chunks, micro_batches)
    return [interleaved_program(geometry, r) for r in range(ranks)]


def _peak(program: RankProgram) -> int:
    live = peak = 0
    for op in program.ops:
        live += 1 if op.kind == "F" else -1
        peak = max(peak, live)
    return peak


@settings(max_examples=40, deadline=None)
@given(ranks=st.integers(2, 6), chunks=st.integers(1, 4), groups=st.integers(1, 4),
       f=st.sampled_from([0.5, 1.0, 1.5, 3.0]), b=st.sampled_from([0.5, 1.0, 2.0, 2.5]))
def test_bubble_is_p_minus_1_times_f_plus_b_over_v_exactly(ranks: int, chunks: int, groups: int, f: float,
                                                           b: float) -> None:
    """Equal op costs, no communication: every rank idles (R-1)(f+b) with f, b per chunk, i.e. (R-1)(tF+tB)/v in a
    rank's whole-model forward tF = v f and backward tB = v b; the makespan is v M (f+b) + that bubble."""
    m = groups * ranks
    timing = simulate_ideal(_programs(ranks, chunks, m), OpCosts(f=f, b=b, w=0.0))
    makespan = max(ends[-1] for ends in timing.ends)
    t_f, t_b = chunks * f, chunks * b
    assert makespan == pytest.approx(m * (t_f + t_b) + (ranks - 1) * (t_f + t_b) / chunks, abs=1e-9)
    for starts, ends in zip(timing.starts, timing.ends, strict=True):
        busy = sum(e - s for s, e in zip(starts, ends, strict=True))
        assert makespan - busy == pytest.approx((ranks - 1) * (t_f + t_b) / chunks, abs=1e-9)


@pytest.mark.parametrize(("stages", "micro_batches"), [(4, 2), (8, 8), (16, 16), (16, 24), (32, 32)])
def test_simulate_matches_the_formula_and_counts_every_op_once(stages: int, micro_batches: int) -> None:
    result = simulate("interleaved", stages, micro_batches, OpCosts(f=1.0, b=2.0, w=1.0))
    ranks = stages // 2
    assert result.num_ranks == ranks and result.formula_exact and result.formula_matches
    assert result.bubble == result.formula_bubble == (ranks - 1) * 3.0
    assert result.makespan == result.formula_makespan == 2 * micro_batches * 3.0 + (ranks - 1) * 3.0
    assert result.num_ops_per_rank == [4 * micro_batches] * ranks  # v M forwards and v M backwards
    for rank, ops in enumerate(result.ops):
        counts = Counter(ops)
        assert len(counts) == len(ops)  # each (kind, chunk, micro-batch) exactly once
        assert {name for name in ops if name.startswith("F")} == {
            f"F{c}.{m}" for c in range(2) for m in range(micro_batches)}
        assert result.busy_per_rank[rank] == 2 * micro_batches * 3.0


def test_order_is_megatrons() -> None:
    """R = 2, v = 2, M = 4: rank 0 warms up with 2(R-1) + (v-1)R = 4 forwards (chunk 0 of micro-batches 0-1,
    then chunk 1 of them), its backwards start from the last chunk; rank 1 with (v-1)R = 2."""
    ops = schedule_ops("interleaved", 4, 4)
    assert ops[0] == ["F0.0", "F0.1", "F1.0", "F1.1", "F0.2", "B1.0", "F0.3", "B1.1", "F1.2", "B0.0", "F1.3",
                      "B0.1", "B1.2", "B1.3", "B0.2", "B0.3"]
    assert ops[1][:3] == ["F0.0", "F0.1", "F1.0"] and ops[1][3] == "B1.0"


@pytest.mark.parametrize(("ranks", "chunks", "micro_batches"),
                         [(2, 2, 4), (4, 2, 8), (8, 2, 16), (8, 2, 8), (4, 3, 12), (16, 2, 32), (3, 4, 9)])
def test_warm_up_and_peak_in_flight_are_what_the_order_implies(ranks: int, chunks: int, micro_batches: int) -> None:
    programs = _programs(ranks, chunks, micro_batches)
    for rank, program in enumerate(programs):
        first_backward = next(i for i, op in enumerate(program.ops) if op.kind == "B")
        warm = rules.interleaved_warmup_forwards(ranks, chunks, rank, micro_batches)
        # the warm-up, then (unless it ran every forward) the steady state's first forward before its backward
        assert first_backward == warm + (warm < chunks * micro_batches)
        expected_peak = chunks * micro_batches if micro_batches == ranks else min(
            2 * (ranks - rank - 1) + (chunks - 1) * ranks + 1, chunks * micro_batches)
        assert _peak(program) == expected_peak
    if micro_batches > ranks:
        assert _peak(programs[0]) == chunks * ranks + ranks - 1  # Megatron's first rank: v p + p - 1


@pytest.mark.parametrize(("pp", "micro_batches"), [(2, 4), (4, 4), (4, 8), (8, 16), (16, 32)])
def test_the_memory_model_counts_the_simulated_peak(pp: int, micro_batches: int) -> None:
    """rules.activation_chunks (what estimate_memory multiplies a chunk's bytes by) equals the simulated peak of
    every rank; each chunk is one of the rank's two stages."""
    result = simulate("interleaved", 2 * pp, micro_batches)
    assert result.peak_activations_per_rank == [
        rules.activation_chunks("interleaved", pp, r, micro_batches) for r in range(pp)]
    model = ProfileStore().model("deepseek-v2-lite")
    layout = ParallelLayout(pp, 8, pp, 8, 1, 8, "interleaved")
    stages = split_stages(model, count_parameters(model), layout.num_stages)
    memory = estimate_memory(model, layout, stages, 80 * 2**30, 4096, micro_batches)
    assert [r.activation_chunks for r in memory.per_rank] == result.peak_activations_per_rank
    assert [r.stages for r in memory.per_rank] == [(r, pp + r) for r in range(pp)]
    # without M (the smallest-node-count bound): the fewest over the valid M
    assert [rules.activation_chunks("interleaved", pp, r) for r in range(pp)] == [
        min(simulate("interleaved", 2 * pp, m).peak_activations_per_rank[r] for m in (pp, 2 * pp, 3 * pp))
        for r in range(pp)]


@pytest.mark.parametrize(("stages", "micro_batches", "needle"), [
    (8, 6, "interleaved needs --micro-batches a multiple of its 4 ranks"),
    (7, 7, "interleaved needs --pp (number of stages) a multiple of 2"),
    (2, 2, "and >= 4"),
])
def test_schedule_parameters_are_checked(stages: int, micro_batches: int, needle: str) -> None:
    with pytest.raises(InputError) as info:
        simulate("interleaved", stages, micro_batches)
    assert needle in as_read(info)


def test_the_planner_rules() -> None:
    """pp counts ranks: 2 pp stages, pp >= 2, micro-batches a multiple of pp (Megatron's rule)."""
    assert rules.num_stages("interleaved", 8) == 16 and rules.stages_of_rank("interleaved", 8, 3) == (3, 11)
    assert not rules.pipeline_degree_allowed("interleaved", 1, 61)
    assert rules.pipeline_degree_allowed("interleaved", 30, 61) and not rules.pipeline_degree_allowed(
        "interleaved", 31, 61)
    rules.check_schedule_layout("interleaved", 8, 24)
    with pytest.raises(InputError, match="a multiple of pp 8"):
        rules.check_schedule_layout("interleaved", 8, 20)
    with pytest.raises(InputError, match="pp >= 2"):
        ParallelLayout(1, 8, 1, 8, 1, 8, "interleaved")


def test_the_batch_hint_rounds_to_a_multiple_of_pp() -> None:
    """V3's 15,360 sequences give 7.5 pp micro-batches per pipeline: never a multiple of pp; the hint names the
    nearest global batch that is (PP16 DP128: 128 micro-batches, 16,384 sequences)."""
    from dsctl.launch.batch import batch_suggestion, checked_batch
    from dsctl.launch.request import LaunchRequest

    assert batch_suggestion("interleaved", 16, 128, None, None) == (
        "--global-batch 16384 (dp 128 x 128 micro-batches of 1 sequence)")
    assert batch_suggestion("interleaved", 8, 4, None, 20) == "--micro-batches 24"
    assert batch_suggestion("interleaved", 8, 4, 480, 20) == (
        "--micro-batches 24 (dp 4 x 24 micro-batches x 5 sequence(s))")
    with pytest.raises(InputError) as info:
        checked_batch(LaunchRequest(256, schedule="interleaved", pp=16), "interleaved", 16, 128)
    assert "a multiple of pp 16" in info.value.text and "16384" in str(info.value.hint)
    batch, _ = checked_batch(LaunchRequest(256, schedule="interleaved", pp=16, global_batch=16384), "interleaved",
                             16, 128)
    assert batch.micro_batches == 128
