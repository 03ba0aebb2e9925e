"""The kernel classification table on real kernel names, and overlap figures checked by an independent sweep.

DeepSeek's published training trace (deepseek-ai/profile-data ``train.json``) has no licence file, so it is not
shipped: ``train_like`` rebuilds its shape (the same DeepEP and compute kernel names, the communication stream 27
and compute streams 7/23, one ProfilerStep) with generated timings. Set ``DSCTL_TRACE_TRAIN_JSON`` to a
downloaded copy to run the same checks on the real file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trace_builder as tb  # tests/trace_builder.py (tests/ is on sys.path via its conftest)

from dsctl.errors import InputError
from dsctl.trace import overlap_from_bytes
from dsctl.trace.classify import CLASS_NAMES, Classifier, classify_names, make_classifier
from dsctl.trace.explain import explain
from dsctl.trace.kernels import FAMILIES

# kernel names as they appear in train.json (cut before the parameter list where it is very long)
EP_COMM = [
    "void dpsk::ep::internode::cached_notify<false>(int, int, int, int, int*, int, int, int const*, int const*, "
    "int*, void*, void**, int**, int, int, int, bool, int, int)",
    "void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*, float*, bool const*, int4 "
    "const*, float const*, int4 const*, int4 const*, void const*, int const*, int const*, int, int, int, int)",
    "void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*, long*, float*, "
    "dpsk::ep::internode::SourceMeta*, int4 const*, float const*, long const*, float const*)",
    "void dpsk::ep::internode::dispatch<false, 8, false, 8>(int4*, float*, long*, float*, "
    "dpsk::ep::internode::SourceMeta*, int4 const*, float const*, long const*, float const*)",
    "void dpsk::ep::internode::notify_dispatch<false, 8>(int const*, long*, int, int const*, int*, int const*, "
    "int*, int, bool const*, int, int, int, int, int)",
]
EP_LAYOUT = "void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, int, int, " \
            "int, int)"
COMPUTE = [
    "void cutlass::device_kernel<dpsk::grouped_gemm::cuda::fp8_dptp128c_acc::GemmKernel>"
    "(dpsk::grouped_gemm::cuda::fp8_dptp128c_acc::GemmKernel::Params)",
    "void cuda::per_token_cast_to_fp8_with_channels<__nv_bfloat16, 128, false, 128, false>(__nv_bfloat16 const*, "
    "int, unsigned char*, float*, int, int, int, int, bool, float, __nv_fp8_interpretation_t)",
    "rotary_kernel",
    "sm90_xmma_gemm_bf16f32_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
    "__5x_cublas",
    "void cuda::reduce_fused_impl<__nv_bfloat16, false, false>(int4 const*, float const*, int const*, int4*, int, "
    "int, int, __nv_fp8_interpretation_t, float)",
    "cuda::expand_to_fused_with_scales_impl(int4 const*, int4*, float const*, float*, int const*, int const*, int, "
    "int, int, int, int)",
    "void cuda::topk_sum_and_topk_idx<16, 64>(float const*, long*, int, int, int, int, int)",
    EP_LAYOUT,
]
MEMORY = ["Memset (Device)", "Memcpy DtoD (Device -> Device)"]


def classes(names: list[str], classifier: Classifier | None = None) -> dict[str, tuple[str, str]]:
    codes, rules = classify_names(names, classifier or Classifier())
    return {n: (CLASS_NAMES[c], r) for n, c, r in zip(names, codes.tolist(), rules, strict=True)}


@pytest.mark.parametrize("family", FAMILIES, ids=[f.name for f in FAMILIES])
def test_every_family_classifies_its_real_kernel_names(family) -> None:
    got = classes(list(family.examples))
    assert got == {n: (family.cls, family.name) for n in family.examples}


def test_train_json_names_deepep_comm_except_the_layout_kernel() -> None:
    got = classes(EP_COMM + COMPUTE + MEMORY)
    assert {n for n, (c, _) in got.items() if c == "comm"} == set(EP_COMM)
    assert got[EP_LAYOUT] == ("compute", "deepep-layout")
    assert {got[n][0] for n in MEMORY} == {"memory"}


def test_compute_pattern_wins_and_comm_pattern_replaces_the_table() -> None:
    forced = classes(EP_COMM[:1], make_classifier(compute_pattern=["cached_notify"]))
    assert forced[EP_COMM[0]] == ("compute", "--compute-pattern")
    replaced = classes(EP_COMM[:2] + MEMORY[:1], make_classifier(["combine<"]))
    assert replaced[EP_COMM[0]] == ("compute", "default")
    assert replaced[EP_COMM[1]] == ("comm", "--comm-pattern")
    assert replaced[MEMORY[0]] == ("memory", "memory")


@pytest.mark.parametrize(("pattern", "message"), [
    ("(a+)+$", "contains another repeat"),
    ("(x*y*)*", "contains another repeat"),
    (r"(a)\1", "backreferences"),
    (".*a.*b.*c", "3 unbounded quantifiers"),
    ("a" * 201, "at most 200"),
    ("", "empty pattern"),
    ("(", "not a valid regular expression"),
])
def test_unsafe_or_invalid_patterns_are_refused(pattern: str, message: str) -> None:
    with pytest.raises(InputError, match="--compute-pattern") as info:
        make_classifier(compute_pattern=[pattern])
    assert message in str(info.value)


def train_like(seed: int = 11) -> dict[str, Any]:
    """One EP64 rank's step shaped like train.json: compute on streams 7/23, DeepEP on stream 27 (+ the layout
    kernel there too), memsets on 7, launches with correlation ids, one ProfilerStep; timings generated."""
    rng = np.random.default_rng(seed)
    events: list[dict[str, Any]] = [tb.step(1, 0.0, 20_000.0)]
    corr = 0

    def add(name: str, ts: float, dur: float, stream: int, cat: str = "kernel") -> None:
        nonlocal corr
        corr += 1
        events.append(tb.kernel(name, round(ts, 3), round(dur, 3), stream=stream, correlation=corr, cat=cat))
        events.append(tb.launch(max(0.0, round(ts - 5.0, 3)), corr))

    t = 10.0
    for _ in range(60):
        add(COMPUTE[int(rng.integers(0, len(COMPUTE) - 1))], t, float(rng.uniform(5, 200)), 7)
        if rng.random() < 0.4:
            add(EP_COMM[int(rng.integers(0, len(EP_COMM)))], t + float(rng.uniform(-20, 150)),
                float(rng.uniform(20, 400)), 27)
        if rng.random() < 0.15:
            add(EP_LAYOUT, t + 3.0, float(rng.uniform(2, 30)), 27)
        if rng.random() < 0.1:
            add(COMPUTE[0], t + 7.0, float(rng.uniform(50, 300)), 23)
        if rng.random() < 0.1:
            add(MEMORY[int(rng.integers(0, 2))], t + float(rng.uniform(0, 100)), 3.0, 7, cat="gpu_memset")
        t += float(rng.uniform(20, 260))
    return tb.trace(events, rank=0, world_size=64)


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Plain-Python merge (independent of dsctl's numpy sweep)."""
    out: list[list[float]] = []
    for s, e in sorted(i for i in intervals if i[1] > i[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _length(intervals: list[tuple[float, float]]) -> float:
    return sum(e - s for s, e in intervals)


def _intersection(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0.0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def independent(doc: dict[str, Any], comm_names: set[str]) -> dict[str, float]:
    """Compute, comm, overlapped and exposed time over every device event, with the table's classes spelled
    out by name here (comm = ``comm_names``, memory = Memcpy/Memset, the rest compute)."""
    comm, compute = [], []
    for ev in doc["traceEvents"]:
        if ev.get("ph") != "X" or ev.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        interval = (float(ev["ts"]), float(ev["ts"]) + float(ev.get("dur", 0)))
        if ev["name"] in comm_names:
            comm.append(interval)
        elif not ev["name"].startswith(("Memcpy", "Memset")):
            compute.append(interval)
    cu, mu = _union(compute), _union(comm)
    both = _intersection(cu, mu)
    return {"compute_busy_us": _length(cu), "comm_busy_us": _length(mu), "overlapped_us": both,
            "exposed_comm_us": _length(mu) - both}


def _check_against_independent(doc: dict[str, Any], comm_names: set[str]) -> None:
    row = overlap_from_bytes([("t.json", json.dumps(doc).encode())]).ranks[0]
    expected = independent(doc, comm_names)
    for key, value in expected.items():
        assert getattr(row.metrics, key) == pytest.approx(value, abs=2e-3), key
    explained = explain([row], [], [])
    ep = {r.name: r.cls for r in explained.names if "::ep::" in r.name}
    assert {n for n, c in ep.items() if c == "comm"} == {n for n in comm_names if "::ep::" in n}
    assert all(c == "compute" for n, c in ep.items() if "get_dispatch_layout" in n)


def test_train_like_figures_equal_an_independent_interval_computation() -> None:
    doc = train_like()
    _check_against_independent(doc, set(EP_COMM))
    row = overlap_from_bytes([("t.json", json.dumps(doc).encode())]).ranks[0]
    cats = {c.category: c for c in row.categories}
    assert set(cats) == {"computation", "communication", "memory", "idle"}
    assert cats["communication"].busy_us == row.metrics.comm_busy_us
    assert row.top_kernels[0].total_us >= row.top_kernels[-1].total_us


@pytest.mark.skipif(not os.environ.get("DSCTL_TRACE_TRAIN_JSON"), reason="set DSCTL_TRACE_TRAIN_JSON to train.json")
def test_real_train_json_against_an_independent_interval_computation() -> None:
    doc = json.loads(Path(os.environ["DSCTL_TRACE_TRAIN_JSON"]).read_text())
    names = {ev["name"] for ev in doc["traceEvents"] if ev.get("cat") == "kernel"}
    comm = {n for n in names if "dpsk::ep::internode::" in n}
    assert len(comm) == 5
    _check_against_independent(doc, comm)
    row = overlap_from_bytes([("train.json", json.dumps(doc).encode())]).ranks[0]
    # the figures docs/trace.md publishes: communication 113.030 ms, of it 4.162 ms exposed
    assert (row.metrics.comm_busy_us, row.metrics.exposed_comm_us) == (113030.0, 4162.0)


def test_docs_table_lists_every_family() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "trace.md").read_text()
    for family in FAMILIES:
        assert f"| `{family.name}` |" in doc, family.name


def test_symmetric_memory_all_reduce_is_communication_in_the_overlap() -> None:
    """A tensor-parallel step of vLLM/SGLang with torch SymmetricMemory: GEMM [0, 100], then the one-shot
    all-reduce [100, 130] with nothing under it. Before issue 29 it was compute: comm 0, compute 130."""
    name = ("void (anonymous namespace)::one_shot_all_reduce_kernel<c10::BFloat16, 16, 8>(c10::BFloat16**, "
            "c10::BFloat16*, c10::BFloat16*, unsigned long, unsigned long, unsigned int**, unsigned long, "
            "unsigned long)")
    doc = tb.trace([tb.compute(0, 100), tb.kernel(name, 100, 30),
                    tb.kernel("void vllm::cross_device_reduce_2stage<half, 8>(vllm::RankData*)", 140, 10)])
    row = overlap_from_bytes([("tp.json", json.dumps(doc).encode())]).ranks[0]
    m = row.metrics
    assert (m.compute_busy_us, m.comm_busy_us, m.exposed_comm_us, m.idle_us) == (100, 40, 40, 10)
