"""dsctl trace timeline draws every rank on one clock (issue 29): a collective that ends together on every rank
is drawn ending together, whatever each host's clock and each rank's first kernel."""

from __future__ import annotations

import re

import pytest
import trace_builder as tb  # tests/trace_builder.py (tests/ is on sys.path via its conftest)

from dsctl.trace import read_trace
from dsctl.trace.classify import Classifier
from dsctl.trace.timeline import LABEL_W, rank_lanes, timeline


def _comm_right_edges(svg: str) -> list[float]:
    """Right edge (x + width, pixels) of every communication rectangle, in drawing order."""
    rects = re.findall(r'<rect x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)" height="[0-9.]+" fill="#e69138">', svg)
    return [float(x) + float(w) for x, w in rects]


def _draw(docs: list[dict[str, object]]) -> str:
    lanes = [rank_lanes(read_trace([tb.encode(d)], f"rank{i}.json"), i, Classifier(), None, None, None)
             for i, d in enumerate(docs)]
    return timeline(lanes, "t")


def test_an_all_reduce_that_ends_together_is_drawn_ending_together() -> None:
    # true time: rank 0 computes from 0, rank 1 from 50; the all-reduce ends at 200 on both. Rank 1's host clock
    # is 1000 us ahead. Before: each rank from its own first kernel, the ends drawn 50 us (300 px) apart
    r0 = tb.trace([tb.compute(0, 100), tb.nccl(100, 100)], rank=0)
    r1 = tb.trace([tb.compute(1050, 100), tb.nccl(1150, 50)], rank=1)
    svg = _draw([r0, r1])
    ends = _comm_right_edges(svg)
    assert len(ends) == 2 and ends[0] == pytest.approx(ends[1], abs=0.01)
    assert ends[0] == pytest.approx(LABEL_W + 1200, abs=0.01)  # the span is [0, 200]: the end is the right edge
    assert "ranks on one clock" in svg


def test_without_a_synchronising_collective_each_rank_keeps_its_own_start() -> None:
    r0 = tb.trace([tb.compute(0, 100)], rank=0)
    r1 = tb.trace([tb.compute(1050, 100)], rank=1)
    assert "each rank from its own window start" in _draw([r0, r1])
