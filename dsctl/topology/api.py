"""Entry points the command layer calls: build a spec from profiles, plan + files, verify from texts."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsctl.cluster.plan_file import load_plan
from dsctl.errors import InputError
from dsctl.gcpause import gc_paused
from dsctl.names import shown
from dsctl.profiles.schema import NodeProfile, SwitchProfile
from dsctl.progress_count import Report, Stages
from dsctl.topology.naming import NameTemplates
from dsctl.topology.observed_format import parse_observed
from dsctl.topology.plan import KINDS, Plan, PlanSpec, build_plan, default_planes, default_templates
from dsctl.topology.plan_files import PlanFiles
from dsctl.topology.sizing import Comparison, compare_topologies
from dsctl.topology.summary import PlanSummary, summarize
from dsctl.topology.verify import VerifyResult, verify

PLAN_FILES = ("cabling.csv", "switches.csv", "plan.json", "topology.dot", "topology.conf", "topology.yaml",
              "topology.svg", "expected-plane<P>.ibnet", "expected-plane<P>.topo", "ibnl/<TYPE>.ibnl")


def nodes_for(num_nodes: int | None, num_gpus: int | None, node: NodeProfile) -> int:
    """Node count from ``--nodes`` or ``--gpus`` (exactly one; GPUs must fill whole nodes)."""
    if (num_nodes is None) == (num_gpus is None):
        raise InputError("give exactly one of {nodes} N or {gpus} G", mentions=("nodes", "gpus"))
    if num_nodes is not None:
        if num_nodes <= 0:
            raise InputError(f"must be at least 1, got {num_nodes}", field="nodes")
        return num_nodes
    gpus = int(num_gpus or 0)
    per = node.num_gpus
    if gpus <= 0:
        raise InputError(f"must be at least 1, got {gpus}", field="gpus")
    if gpus % per:
        low, high = gpus // per * per, math.ceil(gpus / per) * per
        raise InputError(f"{gpus} does not fill whole {node.name} nodes of {per} GPUs; "
                         f"use {low or per} or {high}", field="gpus")
    return gpus // per


def make_spec(kind: str, num_nodes: int, node: NodeProfile, switch: SwitchProfile, *, planes: int | None = None,
              radix: int | None = None, oversubscription: float = 1.0,
              names: dict[str, str | None] | None = None) -> PlanSpec:
    """A PlanSpec from profiles and options; ``names`` overrides templates (keys node, nic, leaf, spine, core)."""
    kind = kind.lower()
    if kind not in KINDS:
        raise InputError(f"{shown(kind)} is not a topology kind; use one of {', '.join(KINDS)}", field="kind")
    templates = default_templates(kind)
    overrides = {k: v for k, v in (names or {}).items() if v is not None}
    if overrides:
        templates = dataclasses.replace(templates, **overrides)
    return PlanSpec(
        kind=kind, num_nodes=num_nodes, num_nics_per_node=node.num_compute_nics, num_gpus_per_node=node.num_gpus,
        num_planes=planes if planes is not None else default_planes(kind, node.num_compute_nics),
        radix=radix if radix is not None else switch.num_ports, port_gbps=min(switch.port_gbps,
                                                                              node.compute_nic_gbps),
        switch_usd=switch.cost_usd, link_usd=switch.link_cost_usd, endpoint_link_usd=switch.endpoint_link_cost_usd,
        oversubscription=oversubscription, templates=templates, node_profile=node.name,
        switch_profile=switch.name, link=switch.link)


@dataclass(frozen=True)
class PlanResult:
    """What ``dsctl topology plan`` prints: the summary, plus the folder and files written (if any)."""

    summary: PlanSummary
    out_dir: str | None = None
    files: list[str] = field(default_factory=list)

    def to_data(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self.summary), "out_dir": self.out_dir, "files": self.files}


def plan_files(plan: Plan, summary: PlanSummary) -> PlanFiles:
    """Every output file of a plan, by file name (see PLAN_FILES; one ``expected-plane<P>.ibnet`` and one
    ``expected-plane<P>.topo`` per plane, and the IBNL files the latter name), rendered when read or streamed."""
    return PlanFiles(plan, summary)


def plan_with_files(spec: PlanSpec, with_files: bool) -> tuple[PlanSummary, Mapping[str, str]]:
    """Build the plan; also its files (rendered when read or streamed) when ``with_files``."""
    plan = build_plan(spec)
    summary = summarize(plan)
    return summary, (plan_files(plan, summary) if with_files else {})


def compare(radix: int, switch_usd: float, link_usd: float, num_planes: int = 8) -> Comparison:
    return compare_topologies(radix, switch_usd, link_usd, num_planes)


def verify_texts(plan_text: str, observed_text: str | Sequence[tuple[str, str]], plan_name: str,
                 observed_name: str = "OBSERVED", *, name_map: tuple[str, str] | None = None,
                 guids: tuple[str, str] | None = None, counters: Sequence[tuple[str, str]] = (),
                 thresholds: Sequence[str] = (), report: Report | None = None) -> VerifyResult:
    """Parse every input (InputError with the file and line on malformed text) and compare.

    ``observed_text`` is one dump's text, or ``(name, text)`` per dump (one per plane). ``name_map``/``guids``:
    ``(name, text)`` of a node-name map (``--node-name-map``) and of recorded GUIDs (``--guids``, same format);
    ``counters``: ``(name, text)`` of perfquery outputs; ``thresholds``: ``NAME=VALUE`` overrides.
    ``report(done, total)`` counts the dumps' characters parsed, then their links checked (the two weigh alike:
    about 3 s each for 16,384 GPUs) and ends at the total.
    """
    with gc_paused():
        return _verify_texts(plan_text, observed_text, plan_name, observed_name, name_map, guids, counters,
                             thresholds, report)


def _verify_texts(plan_text: str, observed_text: str | Sequence[tuple[str, str]], plan_name: str,
                  observed_name: str, name_map: tuple[str, str] | None, guids: tuple[str, str] | None,
                  counters: Sequence[tuple[str, str]], thresholds: Sequence[str],
                  report: Report | None = None) -> VerifyResult:
    from dsctl.topology.counters import parse_counters, parse_thresholds
    from dsctl.topology.ibformats import parse_node_name_map
    from dsctl.topology.verify import VerifyOptions

    expected = load_plan(plan_text, plan_name)
    texts = [(observed_name, observed_text)] if isinstance(observed_text, str) else list(observed_text)
    chars = sum(len(text) for _, text in texts)
    stages = Stages(report, [chars, chars])
    parsed = stages.part(0)
    dumps = []
    start = 0
    for name, text in texts:
        dumps.append((name, parse_observed(text, name, _shifted(parsed, start, len(text), chars))))
        start += len(text)
        parsed(start, chars)
    rows = tuple(row for name, text in counters for row in parse_counters(text, name))
    options = VerifyOptions(parse_node_name_map(name_map[1], name_map[0]) if name_map else {},
                            parse_node_name_map(guids[1], guids[0]) if guids else {}, rows,
                            parse_thresholds(list(thresholds)))
    observed = dumps[0][1] if isinstance(observed_text, str) else dumps
    result = verify(expected, observed, plan_name, observed_name, options, stages.part(1))
    stages.finish()
    return result


def _shifted(report: Report, start: float, width: float, total: float) -> Report:
    """One dump's ``(done, of)`` as characters of all dumps: ``start + width * done / of`` of ``total``."""
    return lambda done, of: report(start + (width * done / of if of else width), total)


__all__ = ["PLAN_FILES", "NameTemplates", "PlanResult", "compare", "make_spec", "nodes_for", "plan_files",
           "plan_with_files", "verify_texts"]
