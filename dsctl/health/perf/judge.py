"""Judge perftest and nccl-tests reports against the node profile: one result per report in each file.

A result is ``slow`` when the largest message size measured below ``fraction`` x the expectation of
:mod:`dsctl.health.perf.expect` (perftest: the average bandwidth; nccl-tests: the better busbw of out-of-place and
in-place), ``wrong`` when nccl-tests counted wrong elements (``#wrong`` > 0 or out-of-bounds values), ``ok``
otherwise, and ``not judged`` (with the reason) when the sizes are too small to reach line rate, the test has no
model or the file names no ranks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from dsctl.errors import InputError
from dsctl.health.expectations import find_sku
from dsctl.health.perf.expect import (
    Expectation,
    PlanFabric,
    busbw_expectation,
    perftest_expectation,
    simulated_busbw,
)
from dsctl.health.perf.nccltests import NcclTestsRun, is_nccl_tests, parse_nccl_tests
from dsctl.health.perf.perftest import PerftestRun, is_perftest, parse_perftest
from dsctl.profiles import DEFAULT_NODE_PROFILE
from dsctl.profiles.schema import NodeProfile
from dsctl.thresholds import SLOW_FRACTION

#: the node profile when neither --node-profile nor a GPU model in the file names one
DEFAULT_PROFILE = DEFAULT_NODE_PROFILE
#: smaller perftest messages are message-rate bound (perftest's default size is 64 KiB, which reaches line rate)
MIN_PERFTEST_BYTES = 64 * 1024
#: busbw still grows with size below this (NVIDIA/nccl-tests#212: "256M is too small to reach peak bandwidth")
MIN_NCCL_BYTES = 1 << 30
VERDICTS = ("ok", "slow", "wrong", "not_judged")


@dataclass(frozen=True)
class PerfResult:
    """One report of one file, judged. Rates in bytes/s (perftest's Gb/s x 1e9 / 8, nccl-tests' GB/s x 1e9);
    ``expected_bytes_per_s`` and ``ratio`` are None when not judged; ``reason`` says how it was judged or why
    not. ``nodes`` are the hosts the file names (nccl-tests rank lines), ``devices`` the RDMA device (perftest)
    or GPU models (nccl-tests), ``path`` the rest of what the file says about where it ran."""

    file: str
    tool: str
    test: str
    nodes: tuple[str, ...]
    devices: tuple[str, ...]
    path: str
    size_bytes: int
    measured_bytes_per_s: float
    expected_bytes_per_s: float | None
    ratio: float | None
    verdict: str
    reason: str
    node_profile: str
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class PerfReport:
    """Every result, the fraction used, and the exit code (1 when a result is slow or wrong)."""

    results: tuple[PerfResult, ...]
    fraction: float

    @property
    def exit_code(self) -> int:
        return int(any(r.verdict in ("slow", "wrong") for r in self.results))

    def to_data(self) -> dict[str, object]:
        from dataclasses import asdict

        counts = {v: sum(r.verdict == v for r in self.results) for v in VERDICTS}
        return {"fraction": self.fraction, "counts": counts, "results": [asdict(r) for r in self.results]}


def _result(common: dict[str, Any], expected: float | None, ratio: float | None, verdict: str,
            reason: str) -> PerfResult:
    return PerfResult(**common, expected_bytes_per_s=expected, ratio=ratio, verdict=verdict, reason=reason)


def _verdict(measured: float, expectation: Expectation, fraction: float) -> tuple[float | None, float | None, str]:
    if expectation.bytes_per_s <= 0:
        return None, None, "not_judged"
    ratio = measured / expectation.bytes_per_s
    return expectation.bytes_per_s, ratio, "ok" if ratio >= fraction else "slow"


def _link_is_storage(run: PerftestRun, profile: NodeProfile) -> bool:
    link = {"ib": "infiniband", "ethernet": "ethernet"}.get(run.link_type.lower(), "")
    if not link or run.device in profile.compute_nic_devices or profile.num_storage_nics == 0:
        return False
    return link != profile.compute_link_layer and link == profile.storage_link_layer


def judge_perftest(run: PerftestRun, source: str, profile: NodeProfile, fraction: float) -> PerfResult:
    """One perftest report against ``line rate x nic_efficiency`` of the NIC its link type names."""
    row = run.largest
    measured = row.average_gbps * 1e9 / 8
    storage = _link_is_storage(run, profile)
    device = f"{run.device} ({run.link_type})" if run.device and run.link_type else run.device or run.link_type
    qps = f"{run.num_qps} QP{'s' if run.num_qps != 1 else ''}"
    addresses = " -> ".join(a for a in (run.local_address, run.remote_address) if a)
    path = ", ".join(x for x in (device, qps, addresses) if x)
    test = f"{run.title or 'perftest'} BW" + (" bidirectional" if run.bidirectional else "")
    base: dict[str, Any] = dict(file=source, tool="perftest", test=test, nodes=(),
                                devices=(run.device,) if run.device else (), path=path, size_bytes=row.size_bytes,
                                measured_bytes_per_s=measured, node_profile=profile.name, warnings=run.warnings)
    if row.size_bytes < MIN_PERFTEST_BYTES:
        return _result(base, None, None, "not_judged",
                       f"largest message {row.size_bytes} B is below {MIN_PERFTEST_BYTES // 1024} KiB: "
                       "message-rate bound (run with -s 65536 or larger, or -a)")
    expectation = perftest_expectation(profile, run.bidirectional, run.dual_port, storage)
    expected, ratio, verdict = _verdict(measured, expectation, fraction)
    nic = "storage NIC" if storage else "compute NIC"
    return _result(base, expected, ratio, verdict, f"{nic}: {expectation.formula}")


def judge_nccl(run: NcclTestsRun, source: str, profile: NodeProfile, fraction: float,
               fabric: PlanFabric | None = None) -> PerfResult:
    """One nccl-tests report against the busbw :func:`busbw_expectation` gives for its collective and nodes
    (simulated on ``fabric`` when one is given: :func:`simulated_busbw`)."""
    row = run.largest
    measured = row.best_busbw_bytes_per_s
    if run.ranks:
        path = (f"{run.num_nodes} node{'s' if run.num_nodes != 1 else ''} x {run.gpus_per_node} GPUs "
                f"({run.num_ranks} ranks{', rank lines elided' if run.ranks_elided else ''})")
    else:
        path = "no rank lines"
    base: dict[str, Any] = dict(file=source, tool="nccl-tests", test=run.collective or "unnamed test",
                                nodes=run.hosts, devices=run.gpu_models, path=path, size_bytes=row.size_bytes,
                                measured_bytes_per_s=measured, node_profile=profile.name)
    wrong = sum(r.wrong for r in run.rows) + (run.out_of_bounds or 0)
    if wrong:
        return _result(base, None, None, "wrong",
                       f"{wrong} wrong element(s) or out-of-bounds value(s): data corruption on the path")
    why_not = ""
    if not run.ranks:
        why_not = "the file names no ranks (no '# Rank ... on HOST device N' lines): node count unknown"
    elif row.size_bytes < MIN_NCCL_BYTES:
        why_not = (f"largest size {row.size_bytes:,} B is below 1 GiB: bus bandwidth still grows with size "
                   "(run with -e 8G)")
    if why_not:
        return _result(base, None, None, "not_judged", why_not)
    if fabric is not None:
        expectation = simulated_busbw(fabric, profile, run.collective, run.num_nodes, run.gpus_per_node,
                                      row.size_bytes, run.hosts)
    else:
        expectation = busbw_expectation(run.collective, run.num_nodes, run.gpus_per_node, run.num_ranks, profile)
    expected, ratio, verdict = _verdict(measured, expectation, fraction)
    return _result(base, expected, ratio, verdict, expectation.formula)


def profile_name_for(text_models: tuple[str, ...]) -> str | None:
    """The node profile the GPU model of a report names (``NVIDIA H800`` -> h800-hgx), None when none does."""
    for model in text_models:
        sku = find_sku(model, None)
        if sku is not None and sku.node_profile:
            return sku.node_profile
    return None


def judged_runs(files: Iterable[tuple[str, str]], profile: NodeProfile | None,
                load_profile: Callable[[str], NodeProfile], fraction: float = SLOW_FRACTION,
                fabric: PlanFabric | None = None) -> Iterator[tuple[PerfResult, PerftestRun | NcclTestsRun]]:
    """Every report in ``files`` ((name, text) pairs), judged, with the parsed run it came from. ``profile``
    (from --node-profile) wins; otherwise the GPU model of an nccl-tests report picks it, else
    ``DEFAULT_PROFILE``. ``fabric`` (--plan): expectations from the flow simulator on that plan. InputError for a
    file that holds neither a perftest nor an nccl-tests table, or a fraction outside (0, 1]."""
    if not 0 < fraction <= 1:
        raise InputError(f"{fraction:g} must be in (0, 1]", field="fraction",
                         hint="0.9 flags results below 90% of the expectation")
    for name, text in files:
        if is_perftest(text):
            chosen = profile or load_profile(DEFAULT_PROFILE)
            for test in parse_perftest(text, name):
                yield judge_perftest(test, name, chosen, fraction), test
        elif is_nccl_tests(text):
            for run in parse_nccl_tests(text, name):
                named = profile_name_for(run.gpu_models)
                chosen = profile or load_profile(named or DEFAULT_PROFILE)
                yield judge_nccl(run, name, chosen, fraction, fabric), run
        else:
            raise InputError(f"{name}: neither a perftest report ('#bytes #iterations BW peak[...]') nor an "
                             "nccl-tests table ('size count type ... time algbw busbw')",
                             hint="give the saved output of ib_write_bw/ib_read_bw/ib_send_bw or of an "
                             "nccl-tests binary such as all_reduce_perf")


def judge_files(files: Iterable[tuple[str, str]], profile: NodeProfile | None,
                load_profile: Callable[[str], NodeProfile], fraction: float = SLOW_FRACTION,
                fabric: PlanFabric | None = None) -> PerfReport:
    """Every report in ``files`` judged (:func:`judged_runs`), as one report."""
    return PerfReport(tuple(result for result, _ in judged_runs(files, profile, load_profile, fraction, fabric)),
                      fraction)
