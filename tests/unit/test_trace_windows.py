"""Step windows partition the GPU timeline (issue 29): a step's tail running under the next step's first kernels
is counted once, and the per-step walls add up to the GPU's span. Hand cases and hypothesis invariants checked
against a plain-Python union of intervals written here."""

from __future__ import annotations

import trace_builder as tb  # tests/trace_builder.py (tests/ is on sys.path via its conftest)
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.trace import overlap_from_bytes
from dsctl.trace.overlap import RankOverlap


def one(doc: object, **kw: object) -> RankOverlap:
    (row,) = overlap_from_bytes([("rank0.json", tb.encode(doc))], **kw).ranks  # type: ignore[arg-type]
    return row


def union_us(intervals: list[tuple[float, float]], lo: float = -1e18, hi: float = 1e18) -> float:
    """|∪ intervals ∩ [lo, hi]| by a plain sorted merge (independent of dsctl.trace.intervals)."""
    cut = sorted((max(a, lo), min(b, hi)) for a, b in intervals if min(b, hi) > max(a, lo))
    length, reach_start, reach_end = 0.0, None, None
    for a, b in cut:
        if reach_end is None or a > reach_end:
            if reach_end is not None:
                length += reach_end - reach_start
            reach_start, reach_end = a, b
        else:
            reach_end = max(reach_end, b)
    return length + (reach_end - reach_start if reach_end is not None else 0.0)


# step 1 launches a GEMM [20, 120] and its all-reduce [120, 180]; step 2's GEMM starts at 130, under that tail
TAIL = [
    tb.step(1, 0, 100), tb.step(2, 100, 100),
    tb.launch(10, correlation=1), tb.compute(20, 100, correlation=1),
    tb.launch(90, correlation=2), tb.nccl(120, 60, correlation=2),
    tb.launch(110, correlation=3), tb.compute(130, 70, correlation=3),
]


def test_a_step_tail_under_the_next_step_is_counted_once() -> None:
    row = one(tb.trace(TAIL), all_steps=True)
    m = row.metrics
    # the GPU runs [20, 200]: compute [20, 120] + [130, 200], the all-reduce [120, 180], half of it under compute.
    # Before the fix: wall 230 (160 + 70), comm 60 with overlap 0 (the tail sat in step 1's window only)
    assert (m.wall_us, m.compute_busy_us, m.comm_busy_us, m.overlapped_us, m.exposed_comm_us, m.idle_us) == (
        180, 170, 60, 50, 10, 0)
    step1, step2 = row.per_step
    assert (step1.start_us, step1.metrics.wall_us, step1.metrics.comm_busy_us) == (20, 110, 10)
    assert (step2.start_us, step2.metrics.wall_us, step2.metrics.overlapped_us) == (130, 70, 50)
    # each kernel counted once, in the step that launched it
    assert {(k.name, k.count) for k in row.kernels} == {("sm90_xmma_gemm_bf16bf16_bf16f32", 2),
                                                        ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 1)}
    only2 = one(tb.trace(TAIL), step=2)
    assert (only2.metrics.wall_us, only2.metrics.compute_busy_us, only2.metrics.comm_busy_us) == (70, 70, 50)
    assert only2.num_events == 1


def test_idle_between_steps_belongs_to_the_earlier_step() -> None:
    doc = tb.trace([tb.step(1, 0, 100), tb.step(2, 100, 100),
                    tb.launch(10, correlation=1), tb.compute(10, 50, correlation=1),
                    tb.launch(150, correlation=2), tb.compute(160, 20, correlation=2)])
    row = one(doc, all_steps=True)
    assert [(s.metrics.wall_us, s.metrics.idle_us) for s in row.per_step] == [(150, 100), (20, 0)]
    assert row.metrics.wall_us == 170  # the GPU's span [10, 180]


kernels = st.lists(st.tuples(st.integers(0, 3),                      # launching step (index)
                             st.integers(0, 400), st.integers(0, 300),  # start offset after launch, duration
                             st.booleans(), st.integers(0, 1)),         # communication?, stream
                   min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(kernels)
def test_step_windows_partition_the_gpu_span(spec: list[tuple[int, int, int, bool, int]]) -> None:
    events = [tb.step(n + 1, 1000 * n, 1000) for n in range(4)]
    intervals: list[tuple[float, float, bool]] = []
    for i, (k, offset, dur, comm, stream) in enumerate(spec):
        launch = 1000 * k + 10 * (i % 50)
        start = launch + 700 + offset  # often past the step's end: tails into the next step
        events.append(tb.launch(launch, correlation=i + 1))
        maker = tb.nccl if comm else tb.compute
        events.append(maker(start, dur, correlation=i + 1, stream=20 + stream if comm else 7 + stream))
        intervals.append((start, start + dur, comm))
    row = one(tb.trace(events), all_steps=True)
    m = row.metrics
    first = min(a for a, _, _ in intervals)
    last = max(b for _, b, _ in intervals)
    assert abs(sum(s.metrics.wall_us for s in row.per_step) - m.wall_us) < 1e-6
    assert abs(m.wall_us - (last - first)) < 1e-6  # equal to the GPU's span, never above
    starts = [s.start_us for s in row.per_step]
    assert starts == sorted(starts)
    compute = [(a, b) for a, b, c in intervals if not c]
    comm = [(a, b) for a, b, c in intervals if c]
    assert abs(m.compute_busy_us - union_us(compute)) < 1e-6
    assert abs(m.comm_busy_us - union_us(comm)) < 1e-6
    assert abs(m.idle_us - (m.wall_us - union_us(compute + comm))) < 1e-6
    both = union_us(compute) + union_us(comm) - union_us(compute + comm)
    assert abs(m.overlapped_us - both) < 1e-6
    assert abs(m.compute_busy_us + m.comm_busy_us - m.overlapped_us + m.idle_us - m.wall_us) < 1e-6
    assert sum(k.count for k in row.kernels) == len(spec)
