"""Cross-rank matching: injected stragglers come out first, skew and the critical path on synthetic jobs."""

from __future__ import annotations

import pytest
import trace_builder as tb  # tests/trace_builder.py (tests/ is on sys.path via its conftest)

from dsctl.errors import InputError
from dsctl.trace import read_trace
from dsctl.trace.classify import Classifier
from dsctl.trace.skew import rank_collectives, stragglers


def parts(docs: list[dict[str, object]]):
    out = []
    for i, doc in enumerate(docs):
        out += rank_collectives(read_trace([tb.encode(doc)], f"rank{i}.json"), i, Classifier(), None)
    return out


@pytest.mark.parametrize("seq", [False, True])
def test_the_slowest_of_64_ranks_is_the_only_straggler(seq: bool) -> None:
    # rank 42 is slowed too, but rank 17 is later still at every collective: 42 made no one wait
    result = stragglers(parts(tb.job(64, {17: 1.35, 42: 1.2}, seq=seq)))
    assert result.num_ranks == 64 and result.num_matched == 30
    assert [s.rank for s in result.stragglers] == [17]
    assert result.stragglers[0].times_last == 30 and result.stragglers[0].share_of_wait == 1.0
    assert result.critical_ranks[0].rank == 17 and result.critical_ranks[0].segments == 29
    assert result.max_clock_offset_us > 500  # offsets were found and removed
    assert all(c.last_rank == 17 for c in result.collectives)


def test_skew_and_wait_on_a_hand_made_pair() -> None:
    # rank 1 arrives 30 us after rank 0 at the second all-reduce; both end together
    r0 = tb.trace([tb.compute(0, 10), tb.nccl(10, 20), tb.compute(30, 10), tb.nccl(40, 40)], rank=0)
    r1 = tb.trace([tb.compute(0, 10), tb.nccl(10, 20), tb.compute(30, 40), tb.nccl(70, 10)], rank=1)
    result = stragglers(parts([r0, r1]), align="none")
    top = result.collectives[0]
    assert (top.label, top.index, top.skew_us, top.wait_us, top.last_rank) == ("AllReduce", 1, 30.0, 30.0, 1)
    assert result.stragglers[0].rank == 1 and result.stragglers[0].wait_caused_us == 30.0
    seg = result.critical_segments[0]
    assert (seg.rank, seg.compute_us, seg.slack_us) == (1, 40.0, 30.0)


def test_clock_alignment_recovers_a_shifted_rank() -> None:
    r0 = tb.trace([tb.nccl(10, 20), tb.nccl(50, 30)], rank=0)
    r1 = tb.trace([tb.nccl(1010, 20), tb.nccl(1070, 10)], rank=1)  # same job, clock 1000 us ahead
    result = stragglers(parts([r0, r1]))
    assert result.max_clock_offset_us == pytest.approx(500.0)  # each rank half-way from the median
    assert result.collectives[0].skew_us == pytest.approx(20.0)


def test_needs_two_ranks_with_shared_collectives() -> None:
    with pytest.raises(InputError, match="at least two ranks"):
        stragglers(parts([tb.trace([tb.nccl(0, 5)], rank=0)]))
    with pytest.raises(InputError, match="no collective appears on two"):
        stragglers(parts([tb.trace([tb.nccl(0, 5, collective="AllGather")], rank=0),
                          tb.trace([tb.nccl(0, 5, collective="ReduceScatter")], rank=1)]))


def _hosted(events: list[dict[str, object]], rank: int, host: str) -> dict[str, object]:
    doc = tb.trace(events, rank=rank)
    doc["host_name"] = host
    return doc


def test_ranks_of_one_host_share_one_clock_and_broadcast_never_aligns() -> None:
    # hosts a (ranks 0, 1) and b (ranks 2, 3, clock 1000 us ahead); the all-reduce ends together on every rank,
    # the broadcast ends 700 us earlier on rank 3 (a non-root leaves before the root arrives)
    docs = []
    for rank in range(4):
        shift = 1000.0 if rank >= 2 else 0.0
        arrive = 10.0 + 5 * rank
        docs.append(_hosted([tb.nccl(arrive + shift, 100 - arrive),
                             tb.nccl(200 + shift - (700 if rank == 3 else 0), 50 + (700 if rank == 3 else 0),
                                     collective="Broadcast")], rank, "ab"[rank // 2]))
    result = stragglers(parts(docs))
    offsets = {o["rank"]: o["clock_offset_us"] for o in result.clock_offsets}
    assert offsets[1] == offsets[0] and offsets[2] == offsets[3]
    assert offsets[3] - offsets[1] == pytest.approx(1000.0)
    assert result.num_aligned == 1  # the all-reduce; the broadcast is matched but not used for the clocks
    reduce = next(c for c in result.collectives if c.label == "AllReduce")
    assert reduce.skew_us == pytest.approx(15.0) and reduce.last_rank == 3
    one_host = stragglers(parts([_hosted(d["traceEvents"][1:], r, "a") for r, d in enumerate(docs)]))
    assert one_host.max_clock_offset_us == 0.0


def test_gloo_host_collectives_are_matched_by_order() -> None:
    docs = []
    for rank in range(3):
        late = 40.0 if rank == 1 else 0.0
        docs.append(tb.trace([tb.cpu_op("aten::mm", 0, 10 + late, tid=1),
                              tb.cpu_op("c10d::allreduce_", 10 + late, 2, tid=1),
                              tb.cpu_op("gloo:all_reduce", 12 + late, 100 - late, tid=7, cat="user_annotation"),
                              tb.cpu_op("gloo:broadcast", 120, 5, tid=7, cat="user_annotation")], rank=rank))
    result = stragglers(parts(docs), align="none")
    assert result.stragglers[0].rank == 1 and result.stragglers[0].device == "cpu"
    top = result.collectives[0]
    assert (top.label, top.skew_us, top.last_rank) == ("all_reduce", 40.0, 1)
    assert result.num_matched == 2  # gloo:<op> preferred over the c10d enqueue ops: no double counting
    assert any("gloo" in n for n in result.notes)


def _comms(name: str, pg: str, seq: int) -> dict[str, object]:
    return {"Collective name": name, "Process Group Name": pg, "Seq": seq, "In msg nelems": 1024,
            "Out msg nelems": 1024, "dtype": "BFloat16", "Group size": 2}


def test_nccl_traces_match_by_group_and_seq_and_align_on_all_reduce_only() -> None:
    # NCCL: record_param_comms on the host, its args copied onto the kernel; the two ranks issue the broadcast
    # and the all-reduce of group "0" in different orders, Seq still pairs them; rank 1's clock is 500 us ahead
    docs = []
    for rank, shift in ((0, 0.0), (1, 500.0)):
        events = [tb.cpu_op("record_param_comms", 5 + shift, 1), tb.cpu_op("c10d::allreduce_", 4 + shift, 3)]
        events[0]["args"] = _comms("allreduce", "0", 7)
        reduce = tb.nccl(10 + 20 * rank + shift, 50 - 20 * rank, **_comms("allreduce", "0", 7))
        bcast = tb.nccl(100 + shift - 30 * rank, 10 + 30 * rank, collective="Broadcast",
                        **_comms("broadcast", "0", 8))
        events += [bcast, reduce] if rank else [reduce, bcast]
        docs.append(tb.trace(events, rank=rank))
    got = parts(docs)
    assert [p.basis for p in got] == ["gpu kernels", "gpu kernels"]  # kernels, not the host record
    result = stragglers(got)
    assert result.num_matched == 2 and result.num_aligned == 1
    assert result.max_clock_offset_us == pytest.approx(250.0)  # from the all-reduce ends only
    reduce = next(c for c in result.collectives if c.label.startswith("allreduce"))
    assert (reduce.index, reduce.skew_us, reduce.last_rank) == (7, pytest.approx(20.0), 1)


def test_wait_is_credited_only_to_the_rank_that_was_last() -> None:
    # three ranks, one all-reduce: rank 0 arrives at 0, rank 1 at 10, rank 2 at 40; all end at 60.
    # wait = (40 - 0) + (40 - 10) = 70 us, all caused by rank 2; rank 1 was never last and caused nothing
    # (before issue 29 it was credited 10 us, the time rank 0 "waited for it")
    docs = [tb.trace([tb.compute(0, a), tb.nccl(a, 60 - a)], rank=r) for r, a in enumerate((0.0, 10.0, 40.0))]
    docs[0] = tb.trace([tb.nccl(0, 60)], rank=0)
    result = stragglers(parts(docs), align="none")
    assert [(s.rank, s.times_last, s.wait_caused_us, s.share_of_wait) for s in result.stragglers] == [
        (2, 1, 70.0, 1.0)]


_SENDRECV = "ncclDevKernel_SendRecv(ncclDevKernelArgs4K)"


def test_point_to_point_without_peer_and_seq_is_left_out_of_the_skew() -> None:
    # pipeline: rank 0 sends to rank 1 at 0 and 100; rank 1 receives at 0 and 100 and sends to rank 2 at 50.
    # By order rank 0's second SendRecv (100) met rank 1's second (50, another transfer): a 50 us "skew".
    # Then both all-reduce together at 200.
    r0 = tb.trace([tb.kernel(_SENDRECV, 0, 10), tb.kernel(_SENDRECV, 100, 10), tb.nccl(200, 20)], rank=0)
    r1 = tb.trace([tb.kernel(_SENDRECV, 0, 10), tb.kernel(_SENDRECV, 50, 10), tb.kernel(_SENDRECV, 100, 10),
                   tb.nccl(200, 20)], rank=1)
    result = stragglers(parts([r0, r1]), align="none")
    assert [(c.label, c.skew_us) for c in result.collectives] == [("AllReduce", 0.0)]
    assert result.stragglers == []
    assert any("5 point-to-point (send/recv) events left out" in n for n in result.notes)


def test_point_to_point_is_matched_by_group_peer_pair_and_seq() -> None:
    def p2p(op: str, ts: float, seq: int, src: int, dst: int) -> dict[str, object]:
        return tb.kernel(_SENDRECV, ts, 10, stream=tb.COMM_STREAM, **{
            "Collective name": op, "Process Group Name": "0", "Seq": seq, "Src Rank": src, "Dst Rank": dst})

    r0 = tb.trace([p2p("send", 0, 0, 0, 1), p2p("send", 100, 1, 0, 1)], rank=0)
    r1 = tb.trace([p2p("recv", 30, 0, 0, 1), p2p("send", 50, 1, 1, 2), p2p("recv", 100, 1, 0, 1)], rank=1)
    result = stragglers(parts([r0, r1]), align="none")
    got = sorted((c.label, c.index, c.skew_us, c.last_rank) for c in result.collectives)
    # rank 1's send to rank 2 has no partner here; the transfer 0 -> 1 of Seq 0 started 30 us late on rank 1
    assert got == [("p2p (pg 0, ranks 0-1)", 0, 30.0, 1), ("p2p (pg 0, ranks 0-1)", 1, 0.0, 0)]
    assert not any("point-to-point" in n for n in result.notes)
