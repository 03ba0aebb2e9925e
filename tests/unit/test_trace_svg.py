"""dsctl.trace.svg: lanes per rank, exposed communication drawn, size bounded by pixels rather than events."""

from __future__ import annotations

import json
import re
import xml.dom.minidom

import numpy as np

from dsctl.trace.classify import Classifier
from dsctl.trace.overlap import analyse
from dsctl.trace.parse import parse_trace
from dsctl.trace.svg import EXPOSED, timeline_svg


def _events(n: int, seed: int = 3) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    starts = np.cumsum(rng.uniform(1, 20, n))
    events: list[dict[str, object]] = []
    for i, t in enumerate(starts.tolist()):
        name = "ncclDevKernel_AllReduce_RING_LL" if i % 3 == 0 else "gemm_kernel"
        events.append({"ph": "X", "cat": "kernel", "name": name, "ts": t, "dur": float(rng.uniform(1, 15)),
                       "args": {"device": 0, "stream": 20 if i % 3 == 0 else 7}})
    return events


def test_svg_is_valid_xml_with_one_row_per_rank_and_exposed_comm() -> None:
    traces = [parse_trace([json.dumps({"traceEvents": _events(300, seed)}).encode()], f"r{seed}.json")
              for seed in (1, 2)]
    result = analyse(traces, Classifier(), keep_lanes=True)
    text = timeline_svg(result)
    xml.dom.minidom.parseString(text)  # well-formed
    assert "rank 0 gpu0" in text and "rank 1 gpu0" in text
    assert f'fill="{EXPOSED}"' in text


def test_svg_size_is_bounded_by_pixels_not_events() -> None:
    trace = parse_trace([json.dumps({"traceEvents": _events(60_000)}).encode()], "big.json")
    result = analyse([trace], Classifier(), keep_lanes=True)
    text = timeline_svg(result)
    rects = len(re.findall(r"<rect ", text))
    assert rects < 3 * 1000 + 20  # three kinds of lanes, at most about one rectangle per pixel each
    assert len(text) < 600_000


def test_timeline_axis_ticks_are_one_two_five_steps() -> None:
    from dsctl.trace.timeline import _tick_step_us

    assert _tick_step_us(4_715.0) == 500.0   # 4.7 ms -> ticks every 0.5 ms (10 ticks at most)
    assert _tick_step_us(1_000.0) == 100.0
    assert _tick_step_us(12_000.0) == 2_000.0
    assert _tick_step_us(0.0) == 1.0
    for span in (1.0, 37.0, 999.0, 1e6, 3.3e7):
        step = _tick_step_us(span)
        assert span / step <= 10 and span / step > 1.9
