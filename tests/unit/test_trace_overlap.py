"""dsctl.trace overlap figures on synthetic GPU traces with hand-computed answers, and on the recorded gloo trace."""

from __future__ import annotations

from pathlib import Path

import pytest
import trace_builder as tb  # tests/trace_builder.py (tests/ is on sys.path via its conftest)

from dsctl.errors import InputError
from dsctl.trace import overlap_from_bytes
from dsctl.trace.classify import CLASS_NAMES, Classifier, classify_names, collective_label, make_classifier
from dsctl.trace.overlap import OverlapResult, RankOverlap

DATA = Path(__file__).resolve().parents[1] / "data" / "trace"


def run(*docs: object, **kw: object) -> OverlapResult:
    return overlap_from_bytes([(f"rank{i}.json", tb.encode(d)) for i, d in enumerate(docs)], **kw)  # type: ignore


def one(doc: object, **kw: object) -> RankOverlap:
    result = run(doc, **kw)
    assert len(result.ranks) == 1
    return result.ranks[0]


def figures(row: RankOverlap) -> tuple[float, ...]:
    m = row.metrics
    return (m.wall_us, m.compute_busy_us, m.comm_busy_us, m.overlapped_us, m.exposed_comm_us, m.idle_us)


def test_fully_hidden_communication_has_zero_exposed() -> None:
    row = one(tb.trace([tb.compute(0, 100), tb.nccl(20, 40)]))
    assert figures(row) == (100, 100, 40, 40, 0, 0)
    assert row.metrics.overlap_ratio == 1.0 and row.metrics.exposed_comm_fraction == 0.0
    assert row.basis == "gpu_kernels" and row.device == "gpu0"


def test_fully_exposed_communication() -> None:
    row = one(tb.trace([tb.compute(0, 50), tb.nccl(50, 30), tb.compute(80, 20)]))
    assert figures(row) == (100, 70, 30, 0, 30, 0)
    assert row.metrics.overlap_ratio == 0.0
    assert row.metrics.exposed_comm_fraction == pytest.approx(0.3)


def test_partial_overlap_with_idle_gap() -> None:
    row = one(tb.trace([tb.compute(0, 50), tb.nccl(40, 30), tb.compute(90, 10)]))
    assert figures(row) == (100, 60, 30, 10, 20, 20)
    assert row.metrics.overlap_ratio == pytest.approx(1 / 3)
    assert row.metrics.compute_only_us == 50


def test_nested_and_overlapping_kernels_on_several_streams() -> None:
    events = [
        tb.compute(0, 40), tb.compute(10, 10), tb.compute(30, 30, stream=8),     # compute union [0, 60]
        tb.nccl(50, 40),                                                          # comm [50, 90]
        tb.kernel("deep_ep::intranode::dispatch<8, 1024>", 55, 10, stream=21),    # comm [55, 65], inside it
    ]
    row = one(tb.trace(list(reversed(events))))  # unsorted on purpose
    assert figures(row) == (90, 60, 40, 10, 30, 0)
    by_name = {c.name: c for c in row.collectives}
    assert by_name["AllReduce"].count == 1 and by_name["AllReduce"].total_us == 40
    assert by_name["AllReduce"].exposed_us == 30
    assert by_name["deep_ep::intranode::dispatch"].exposed_us == 5
    streams = {s.stream: s for s in row.streams}
    assert streams[7].kind == "compute" and streams[7].busy_us == 40 and streams[7].num_events == 2
    assert streams[21].kind == "comm" and streams[20].busy_us == 40


def test_two_ranks_and_the_worst_rank() -> None:
    hidden = tb.trace([tb.compute(0, 100), tb.nccl(20, 40)], rank=1)
    exposed = tb.trace([tb.compute(0, 50), tb.nccl(50, 30), tb.compute(80, 20)], rank=0)
    result = run(hidden, exposed)
    assert [r.rank for r in result.ranks] == [1, 0]
    assert result.worst_rank is not None
    assert result.worst_rank["rank"] == 0 and result.worst_rank["exposed_comm_us"] == 30
    assert result.worst_rank["source"] == "rank1.json"


def test_ranks_default_to_file_order_without_distributed_info() -> None:
    result = run(tb.trace([tb.compute(0, 10)]), tb.trace([tb.compute(0, 10)]))
    assert [r.rank for r in result.ranks] == [0, 1]
    assert result.ranks[0].metrics.overlap_ratio is None  # no communication at all


def test_several_devices_in_one_trace_are_reported_separately() -> None:
    row0, row1 = run(tb.trace([tb.compute(0, 100), tb.nccl(0, 10, device=1), tb.compute(50, 10, device=1)])).ranks
    assert (row0.device, row1.device) == ("gpu0", "gpu1")
    assert figures(row1) == (60, 10, 10, 0, 10, 40)


def test_memcpy_counts_as_neither_but_peer_copies_are_communication() -> None:
    row = one(tb.trace([
        tb.compute(0, 10),
        tb.kernel("Memcpy HtoD (Pageable -> Device)", 10, 10, cat="gpu_memcpy"),
        tb.kernel("Memcpy PtoP (Device -> Device)", 20, 10, cat="gpu_memcpy", stream=30),
    ]))
    assert figures(row) == (30, 10, 10, 0, 10, 10)


def test_steps_assign_kernels_by_their_launch_and_select_one_step() -> None:
    events = [
        tb.step(1, 0, 100), tb.step(2, 100, 100),
        tb.launch(10, correlation=1), tb.compute(20, 100, correlation=1),   # runs [20, 120], launched in step 1
        tb.launch(90, correlation=2), tb.nccl(120, 30, correlation=2),      # launched in step 1, runs [120, 150]
        tb.launch(110, correlation=3), tb.compute(150, 50, correlation=3),  # step 2: [150, 200]
        tb.launch(120, correlation=4), tb.nccl(160, 20, correlation=4),     # step 2: hidden
    ]
    doc = tb.trace(events)
    row = one(doc, all_steps=True)
    assert row.steps == [1, 2]
    step1, step2 = row.per_step
    assert (step1.step, step1.metrics.wall_us, step1.metrics.exposed_comm_us) == (1, 130, 30)
    assert (step2.step, step2.metrics.wall_us, step2.metrics.overlapped_us) == (2, 50, 20)
    assert row.metrics.wall_us == 180 and row.metrics.exposed_comm_us == 30
    only = one(doc, step=2)
    assert only.steps == [2] and only.per_step == [] and figures(only) == (50, 50, 20, 20, 0, 0)


def test_unknown_step_lists_the_steps_present() -> None:
    doc = tb.trace([tb.step(3, 0, 10), tb.compute(0, 10)])
    with pytest.raises(InputError, match=r"^step 7: rank0.json has no ProfilerStep#7; steps present: 3$"):
        run(doc, step=7)
    with pytest.raises(InputError, match="no ProfilerStep#N annotations"):
        run(tb.trace([tb.compute(0, 10)]), step=1)


def test_comm_patterns_can_be_replaced() -> None:
    doc = tb.trace([tb.kernel("my_a2a_kernel", 0, 10), tb.nccl(0, 10)])
    default = one(doc)
    assert default.metrics.comm_busy_us == 10 and default.metrics.compute_busy_us == 10
    custom = one(doc, classifier=make_classifier(["^my_a2a"]))
    assert [c.name for c in custom.collectives] == ["my_a2a_kernel"]
    assert custom.metrics.overlapped_us == 10
    with pytest.raises(InputError, match=r"--comm-pattern '\(': not a valid regular expression"):
        make_classifier(["("])


def test_default_classifier() -> None:
    def is_comm(names: list[str]) -> list[bool]:
        codes, _ = classify_names(names, Classifier())
        return [CLASS_NAMES[c] == "comm" for c in codes.tolist()]

    comm = ["ncclDevKernel_AllGather_RING_LL", "ncclKernel_AllReduce_RING_LL_Sum_float", "dispatch", "combine",
            "deep_ep::internode::combine<true, 8>", "notify_dispatch", "Memcpy PtoP (Device -> Device)",
            "c10d::allreduce_", "gloo:all_reduce", "record_param_comms", "nccl:all_reduce",
            "void deep_ep::intranode::dispatch<8, 768, 6144>(int4*, float*)", "userbuffers_fp16_sum_inplace_gpu_rw_ag",
            "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"]
    compute = ["sm90_xmma_gemm_bf16bf16_bf16f32", "flash_fwd_kernel", "moe_dispatch_kernel_fused",
               "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
               "Memcpy HtoD (Pageable -> Device)", "aten::mm", "combine_kernel_fp8"]
    assert all(is_comm(comm))
    assert not any(is_comm(compute))
    assert collective_label("ncclDevKernel_AllGather_RING_LL") == "AllGather"
    assert collective_label("ncclDevKernel_Generic", "allreduce") == "allreduce"
    assert collective_label("void deep_ep::internode::combine<true, 8>(int4*)") == "deep_ep::internode::combine"


def test_collective_name_argument_labels_the_kernel() -> None:
    row = one(tb.trace([tb.nccl(0, 10, collective="Generic", **{"Collective name": "reduce_scatter"})]))
    assert [c.name for c in row.collectives] == ["reduce_scatter"]


def test_recorded_gloo_trace_end_to_end() -> None:
    files = [(p.name, p.read_bytes()) for p in sorted(DATA.glob("gloo_rank*.json.gz"))]
    result = overlap_from_bytes(files)
    assert [(r.rank, r.device, r.basis) for r in result.ranks] == [(0, "cpu", "cpu_ops"), (1, "cpu", "cpu_ops")]
    for row in result.ranks:
        m = row.metrics
        assert row.steps == [1, 2, 3]
        assert m.wall_us > 0 and m.comm_busy_us > 0 and m.compute_busy_us > 0
        assert m.exposed_comm_us + m.overlapped_us == pytest.approx(m.comm_busy_us, abs=1e-2)
        assert m.compute_busy_us + m.comm_busy_us - m.overlapped_us + m.idle_us == pytest.approx(m.wall_us, abs=1e-2)
        assert {c.name for c in row.collectives} == {"gloo:all_reduce", "c10d::allreduce_"}
        assert next(c for c in row.collectives if c.name == "gloo:all_reduce").count == 6
        assert any("no GPU kernels" in n for n in row.notes)
    assert result.worst_rank is not None
    assert result.worst_rank["exposed_comm_us"] == max(r.metrics.exposed_comm_us for r in result.ranks)


def test_dualpipe_style_pairing_hides_the_expert_all_to_all() -> None:
    serial, overlapped = run(tb.ep_step(False, rank=0), tb.ep_step(True, rank=1)).ranks
    assert figures(serial) == (1360, 880, 480, 0, 480, 0)
    assert figures(overlapped) == (940, 880, 480, 420, 60, 0)
    assert overlapped.metrics.overlap_ratio == pytest.approx(0.875)
    assert {c.name: c.exposed_us for c in overlapped.collectives} == {
        "deep_ep::intranode::combine": 60, "deep_ep::intranode::dispatch": 0}


def test_one_kernel_name_for_several_collectives_is_split_by_the_argument() -> None:
    row = one(tb.trace([
        tb.nccl(0, 10, collective="Generic", **{"Collective name": "allreduce"}),
        tb.nccl(20, 30, collective="Generic", **{"Collective name": "all_gather"}),
        tb.nccl(60, 5, collective="Generic"),
    ]))
    assert {(c.name, c.count, c.total_us) for c in row.collectives} == {
        ("allreduce", 1, 10), ("all_gather", 1, 30), ("Generic", 1, 5)}
