"""dsctl topology plan|compare|verify|simulate."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dsctl.commands._common import FormatOpt, PlanArg, profile_store, read_input, read_text_input, show
from dsctl.errors import InputError
from dsctl.output.formats import OutputFormat
from dsctl.profiles import DEFAULT_MODEL, DEFAULT_NODE_PROFILE, DEFAULT_SWITCH

#: request field (named by the topology and eplb domains' errors) -> the option that sets it
FIELD_OPTIONS: dict[str, str] = {
    "out": "--out-dir",
    "eplb_plan": "--eplb-plan",
    "layer": "--layer",
    "stats": "--stats",
    "nodes": "--nodes",
    "gpus": "--gpus",
    "kind": "--kind",
    "radix": "--radix",
    "planes": "--planes",
    "oversubscription": "--oversubscription",
    "switch_cost": "--switch-cost",
    "link_cost": "--link-cost",
    "node_name": "--node-name",
    "nic_name": "--nic-name",
    "leaf_name": "--leaf-name",
    "spine_name": "--spine-name",
    "core_name": "--core-name",
    "threshold": "--threshold",
    "counters": "--counters",
    # dsctl.topology.sim's fields ('topology simulate'; a --jobs-file job's keys have the same names)
    **{name: "--" + name.replace("_", "-") for name in (
        "workload", "size", "routing", "seed", "fail", "fail_random", "group_size", "group_stride", "tokens_per_gpu",
        "ep", "svg_plane")},
}

app = typer.Typer(
    name="topology",
    help="Multi-plane fat-tree wiring plans, topology cost comparison, cabling export and fabric verification.",
    no_args_is_help=True,
)


@app.command("plan")
def plan(
    nodes: Annotated[int | None, typer.Option("--nodes", "-N", help="Number of nodes.")] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", help="Number of GPUs (whole nodes).")] = None,
    node_profile: Annotated[str, typer.Option("--node-profile", help="Node profile.")] = DEFAULT_NODE_PROFILE,
    switch: Annotated[str, typer.Option("--switch", help="Switch profile (ports, rate, unit costs).")] = DEFAULT_SWITCH,
    kind: Annotated[str, typer.Option("--kind", help="mpft, mrft, ft2 or ft3.")] = "mpft",
    planes: Annotated[int | None, typer.Option("--planes", help="Planes (default: NICs per node for mpft, "
                                                "else 1).")] = None,
    radix: Annotated[int | None, typer.Option("--radix", help="Ports per switch (default: from --switch).")] = None,
    oversubscription: Annotated[float, typer.Option("--oversubscription", help="Leaf down:up ratio R "
                                                    "(1 = non-blocking; two-tier kinds).")] = 1.0,
    node_name: Annotated[str | None, typer.Option("--node-name", help="Node name template, e.g. node{n:04d} "
                                                  "(names fit a 64-byte InfiniBand node description).")] = None,
    nic_name: Annotated[str | None, typer.Option("--nic-name", help="NIC name template: mlx5_{nic} (from 0) "
                                                 "or HCA-{nic1} (from 1).")] = None,
    leaf_name: Annotated[str | None, typer.Option("--leaf-name", help="Leaf name template, "
                                                  "e.g. p{plane}-leaf{leaf:02d}.")] = None,
    spine_name: Annotated[str | None, typer.Option("--spine-name", help="Spine name template, "
                                                   "e.g. p{plane}-spine{spine:02d}.")] = None,
    core_name: Annotated[str | None, typer.Option("--core-name", help="Core name template "
                                                  "(ft3), e.g. p{plane}-core{core:04d}.")] = None,
    out: Annotated[Path | None, typer.Option("--out-dir", help="Write cabling.csv, switches.csv, plan.json, "
                                             "topology.dot, topology.conf, topology.yaml, topology.svg, "
                                             "expected-plane<P>.ibnet, expected-plane<P>.topo (ibdiagnet -t) "
                                             "and ibnl/ here.")] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Plan every switch and cable of a multi-plane (or multi-rail, FT2, FT3) fat tree."""
    from dsctl.output.files import write_files
    from dsctl.topology import api

    store = profile_store()
    node = store.node(node_profile)
    sw = store.switch(switch)
    num_nodes = api.nodes_for(nodes, gpus, node)
    spec = api.make_spec(kind, num_nodes, node, sw, planes=planes, radix=radix, oversubscription=oversubscription,
                         names={"node": node_name, "nic": nic_name, "leaf": leaf_name, "spine": spine_name,
                                "core": core_name})
    summary, files = api.plan_with_files(spec, with_files=out is not None)
    written: list[str] = []
    if out is not None:
        written = [str(p) for p in write_files(out, files)]
    show(api.PlanResult(summary, str(out) if out is not None else None, written), fmt, "topology plan")


@app.command("compare")
def compare(
    radix: Annotated[int | None, typer.Option("--radix", help="Ports per switch (default: from --switch).")] = None,
    switch: Annotated[str, typer.Option("--switch", help="Switch profile for the default costs.")] = DEFAULT_SWITCH,
    switch_cost: Annotated[float | None, typer.Option("--switch-cost", help="USD per switch "
                                                      "(default: from --switch).")] = None,
    link_cost: Annotated[float | None, typer.Option("--link-cost", help="USD per switch-to-switch link "
                                                    "(default: from --switch).")] = None,
    planes: Annotated[int, typer.Option("--planes", help="Planes in the MPFT column.")] = 8,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """FT2, MPFT, FT3, Slim Fly and Dragonfly side by side (the paper's Table 3) for one radix."""
    from dsctl.topology import api

    sw = profile_store().switch(switch)
    result = api.compare(
        radix if radix is not None else sw.num_ports,
        switch_cost if switch_cost is not None else sw.cost_usd,
        link_cost if link_cost is not None else sw.link_cost_usd,
        planes,
    )
    show(result, fmt, "topology compare")


def _dump_files(paths: list[Path]) -> list[Path]:
    """The files named, a folder standing for its (non-hidden) files in name order."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
            if not inside:
                raise InputError(f"OBSERVED folder {path} holds no files", hint="put one ibnetdiscover dump per "
                                 "plane in it (ibnetdiscover -C mlx5_N -P 1 > planeN.ibnet)")
            files += inside
        else:
            files.append(path)
    if len(files) > 256:
        raise InputError(f"OBSERVED: {len(files)} files; give at most 256 (one dump per plane)")
    return files


@app.command("verify")
def verify(
    plan_dir: PlanArg,
    observed: Annotated[list[Path], typer.Argument(help="ibnetdiscover output (default or -p), an ibdiagnet "
                                                   "topology file, or a links CSV (a_device,a_port,b_device,"
                                                   "b_port); one per plane, or a folder of them.")],
    node_name_map: Annotated[Path | None, typer.Option("--node-name-map", help="GUID-to-name map "
                                                       "(infiniband-diags/opensm format: 0x<guid> \"<name>\").")]
    = None,
    guids: Annotated[Path | None, typer.Option("--guids", help="GUIDs recorded by --record-guids: a changed one "
                                               "is a guid_changed finding.")] = None,
    record_guids: Annotated[Path | None, typer.Option("--record-guids", help="Write the GUID of every matched "
                                                      "device as a node-name map.")] = None,
    counters: Annotated[list[Path] | None, typer.Option("--counters", help="perfquery output (ports by LID); "
                                                        "repeatable.")] = None,
    threshold: Annotated[list[str] | None, typer.Option("--threshold", help="Counter limit NAME=VALUE "
                                                        "(symbol_errors, rcv_errors, link_recovers, link_downed, "
                                                        "effective_ber); repeatable.")] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Compare a plan with the fabric as cabled (one dump per plane); exit 1 on any finding."""
    from dsctl.output.files import atomic_write
    from dsctl.output.progress import progress
    from dsctl.topology import api
    from dsctl.topology.ibformats import render_node_name_map

    plan_file = plan_dir / "plan.json" if plan_dir.is_dir() else plan_dir
    if plan_dir.is_dir() and not plan_file.exists():
        raise InputError(f"PLAN_DIR {plan_dir} has no plan.json",
                         hint="write one with 'dsctl topology plan --out-dir DIR'")
    if record_guids is not None and not (record_guids.parent if str(record_guids.parent) else Path(".")).is_dir():
        raise InputError(f"--record-guids {record_guids}: folder {record_guids.parent} does not exist")
    plan_text = read_text_input(plan_file, "PLAN_DIR")
    files = _dump_files(observed)
    texts = [(str(p), read_text_input(p, "OBSERVED")) for p in files]
    name_map = (str(node_name_map), read_text_input(node_name_map, "--node-name-map")) if node_name_map else None
    recorded = (str(guids), read_text_input(guids, "--guids")) if guids else None
    counter_texts = [(str(p), read_text_input(p, "--counters")) for p in counters or []]
    with progress("checking every cable against the plan (dumps parsed, links checked)", fmt, total=1) as report:
        result = api.verify_texts(plan_text, texts[0][1] if len(texts) == 1 else texts, str(plan_file),
                                  texts[0][0] if len(texts) == 1 else "OBSERVED", name_map=name_map,
                                  guids=recorded, counters=counter_texts, thresholds=threshold or [],
                                  report=report)
    if record_guids is not None:
        atomic_write(record_guids, render_node_name_map(result.guids, f"from {result.observed}"), "--record-guids")
    show(result, fmt, "topology verify")


@app.command("simulate")
def simulate(
    plan_dir: PlanArg,
    workload: Annotated[str, typer.Option("--workload", help="alltoall, permutation, allreduce, allgather, "
                                          "reducescatter, ep-dispatch or ep-combine.")] = "alltoall",
    routing: Annotated[str, typer.Option("--routing", help="static (by destination), ecmp (per-flow hash) or "
                                         "adaptive (ideal per-hop split).")] = "adaptive",
    size: Annotated[str, typer.Option("--size", help="Bytes each GPU sends (NCCL message size), e.g. '1 GiB'.")]
    = "1 GiB",
    seed: Annotated[int, typer.Option("--seed", help="Seed for ECMP hashes, permutations and random failures.")] = 0,
    fail: Annotated[list[str] | None, typer.Option("--fail", help="Fail a switch (name) or a cable "
                                                    "(DEVICE:PORT of either end); repeatable.")] = None,
    fail_random: Annotated[int, typer.Option("--fail-random", help="Fail N random switch-to-switch cables.")] = 0,
    jobs: Annotated[Path | None, typer.Option("--jobs-file", help="YAML/JSON list of jobs (name, workload, nodes or "
                                              "node_range, size, ...) run at the same time.")] = None,
    group_size: Annotated[int, typer.Option("--group-size", help="Ring collective group size (e.g. TP 8/4/2).")]
    = 8,
    group_stride: Annotated[int | None, typer.Option("--group-stride", help="GPUs between ring members "
                                                     "(default: GPUs per node).")] = None,
    nodes: Annotated[int | None, typer.Option("--nodes", "-N", help="Use the first N nodes (default: all).")] = None,
    model: Annotated[str, typer.Option("--model", "-m", help="Model profile for ep-dispatch/ep-combine.")]
    = DEFAULT_MODEL,
    tokens: Annotated[int, typer.Option("--tokens-per-gpu", help="Tokens per GPU for ep-dispatch/ep-combine.")] = 4096,
    ep: Annotated[int | None, typer.Option("--ep", help="EP group size in GPUs (whole nodes; groups on "
                                           "consecutive nodes run at once, as in a launch layout; default: "
                                           "all GPUs).")] = None,
    eplb_plan: Annotated[Path | None, typer.Option("--eplb-plan", help="Expert placement (dsctl eplb rebalance "
                                                   "--out, or SGLang JSON) for ep-*; needs --stats.")] = None,
    stats: Annotated[list[Path] | None, typer.Option("--stats", help="Routing statistics (layers x experts) "
                                                     "for --eplb-plan; repeatable (summed).")] = None,
    layer: Annotated[int, typer.Option("--layer", help="MoE layer of --stats/--eplb-plan to simulate.")] = 0,
    node_profile: Annotated[str | None, typer.Option("--node-profile", help="Node profile for the achievable NVLink "
                                                     "rate and the NIC efficiency of EP traffic (default: the "
                                                     "plan's).")] = None,
    svg: Annotated[Path | None, typer.Option("--svg", help="Write one plane, cables coloured by utilisation.")]
    = None,
    svg_plane: Annotated[int, typer.Option("--svg-plane", help="Plane drawn by --svg.")] = 0,
    reflow: Annotated[bool, typer.Option("--reflow", help="Re-solve rates as flows finish (fluid events, at most "
                                         "64 solves per plane) instead of holding the steady rates.")] = False,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Flow-level max-min simulation of a workload on a planned fabric: per-GPU bandwidth, hot links."""
    import numpy as np

    from dsctl.output import topology_simulate as _sim_views  # noqa: F401  (registers the table view)
    from dsctl.output.files import atomic_write, check_target
    from dsctl.topology import sim
    from dsctl.units import QuantityError, parse_bytes

    if svg is not None and not (svg.parent if str(svg.parent) else Path(".")).is_dir():
        raise InputError(f"--svg {svg}: folder {svg.parent} does not exist")
    if svg is not None:
        check_target(svg, "--svg")  # a link, device or FIFO: refused before the simulation
    plan_file = plan_dir / "plan.json" if plan_dir.is_dir() else plan_dir
    if plan_dir.is_dir() and not plan_file.exists():
        raise InputError(f"PLAN_DIR {plan_dir} has no plan.json",
                         hint="write one with 'dsctl topology plan --out-dir DIR'")
    plan_text = read_text_input(plan_file, "PLAN_DIR")
    profile_name, bisection = sim.plan_facts(plan_text, str(plan_file))
    store = profile_store()
    node = store.node(node_profile or profile_name or DEFAULT_NODE_PROFILE)
    try:
        size_bytes = float(parse_bytes(size))
    except QuantityError as exc:
        raise InputError(f"--size {size!r}: {exc}") from None
    prof = store.model(model)
    sim.check_options(workload, model, prof.moe is not None, nodes, ep, eplb_plan is not None, bool(stats))
    ep_model = (sim.EpModel(prof.hidden_size, prof.moe.num_experts_per_token, prof.moe.num_limited_groups)
                if prof.moe is not None else None)
    node_ids = None
    if nodes is not None:
        node_ids = tuple(range(nodes))
    share = None
    if eplb_plan is not None and stats:
        from dsctl.eplb.placement import layer_gpu_share
        from dsctl.eplb.placement_file import read_placement
        from dsctl.eplb.stats import sum_stats

        weight = sum_stats([(str(p), read_input(p, "--stats")) for p in stats])
        loaded = read_placement(f"--eplb-plan {eplb_plan}", read_text_input(eplb_plan, "--eplb-plan"), *weight.shape)
        num_gpus = ep or (nodes or 0) * node.num_gpus or loaded.num_gpus or loaded.placement.num_slots
        share = layer_gpu_share(np.asarray(weight), loaded.placement.phy2log, loaded.placement.logcnt,
                                int(num_gpus), layer)
    jobs_doc = None
    if jobs is not None:
        from dsctl.profiles.textyaml import load_yaml

        jobs_doc = load_yaml(read_text_input(jobs, "--jobs-file"), f"--jobs-file {jobs}")
    work = sim.Workload(workload, workload, size_bytes, node_ids, group_size, group_stride, tokens, share, ep)
    request = sim.SimRequest(work, routing, seed, tuple(fail or ()), fail_random, jobs_doc, f"--jobs-file {jobs}",
                             ep_model, svg_plane if svg is not None else None, reflow, node.nic_efficiency)
    from dsctl.output.progress import progress
    from dsctl.runners.pages import small_pages

    with progress(f"simulating {workload} ({routing} routing), network planes", fmt, total=1) as report, \
            small_pages():  # GBs of flow-long arrays: huge pages cost more in compaction than they save
        result = sim.run(plan_text, str(plan_file), node.nvlink_achievable_bytes_per_s, request, bisection, report)
    if svg is not None and result.svg is not None:
        atomic_write(svg, result.svg, "--svg")
    show(result, fmt, "topology simulate")
