"""dsctl eplb rebalance|simulate: expert placement from routing statistics (DeepSeek's EPLB and better)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dsctl.commands._common import FormatOpt, profile_store, read_input, read_text_input, show
from dsctl.errors import InputError
from dsctl.output.formats import OutputFormat
from dsctl.profiles import DEFAULT_NODE_PROFILE

if TYPE_CHECKING:
    from dsctl.eplb.move_time import MoveFabric
    from dsctl.profiles.schema import ModelProfile

#: request field (dsctl.eplb.request and the eplb domain's errors) -> the option that sets it: the one place the
#: eplb commands' flags meet the domain's field names
FIELD_OPTIONS: dict[str, str] = {
    "replicas": "--replicas",
    "gpus": "--gpus",
    "nodes": "--nodes",
    "groups": "--groups",
    "deployment": "--deployment",
    "policy": "--policy",
    "algorithm": "--algorithm",
    "prove": "--prove",
    "prove_with": "--prove-with",
    "prove_time_s": "--prove-time-s",
    "previous": "--previous",
    "tolerance": "--tolerance",
    "max_moves": "--max-moves",
    "max_move_bytes": "--max-move-bytes",
    "min_gain": "--min-gain",
    "fabric": "--plan",
    "step_time_s": "--step-time-s",
    "bytes_per_param": "--bytes-per-param",
    "sglang_out": "--sglang-out",
    "intervals": "--interval-windows",
    "total_slots": "--total-slots",
}

app = typer.Typer(
    name="eplb",
    help="Expert-parallel load balancing: replicate hot experts and place replicas on GPUs from routing statistics.",
    no_args_is_help=True,
)


def _model(name: str | None) -> ModelProfile | None:
    return None if name is None else profile_store().model(name)


def _all_models() -> list[ModelProfile]:
    from dsctl.profiles.schema import ProfileKind

    store = profile_store()
    return [store.model(n) for n in store.names(ProfileKind.MODEL)]


def _check_outputs(outputs: dict[str, Path | None]) -> None:
    """Validate every output file path before anything is computed or written (all-or-nothing output).

    ``outputs`` maps the option name to its path (None = not given). Raises InputError naming the option.
    """
    seen: dict[Path, str] = {}
    for option, path in outputs.items():
        if path is None:
            continue
        parent = path.parent if str(path.parent) else Path(".")
        if path.is_dir():
            example = path / ("sglang.json" if option == "--sglang-out" else "plan.json")
            raise InputError(f"{option} {path}: is a folder; give a file path, e.g. {example}")
        from dsctl.output.files import check_target

        check_target(path, option)  # a link, device or FIFO: refused before any work
        if not parent.is_dir():
            what = "is not a folder" if parent.exists() else "does not exist"
            raise InputError(f"{option} {path}: cannot write there, folder {parent} {what}")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise InputError(f"{option} {path}: cannot write there, folder {parent} is not writable")
        key = path.resolve()
        if key in seen:
            raise InputError(f"{option} {path}: same file as {seen[key]}; give two different files")
        seen[key] = option


def _write_all(contents: list[tuple[Path, str | bytes, str | None]]) -> None:
    """Write the files together: every one replaced or none (``dsctl.output.files.write_together``)."""
    from dsctl.output.files import write_together

    write_together(contents)


def _fabric(plan: Path, node_profile: str | None) -> MoveFabric:
    """--plan: the plan.json text (a file, or the folder 'topology plan --out-dir' wrote) and its NVLink bandwidth."""
    from dsctl.eplb.move_time import MoveFabric
    from dsctl.topology import sim

    plan_file = plan / "plan.json" if plan.is_dir() else plan
    if plan.is_dir() and not plan_file.exists():
        raise InputError(f"--plan {plan} has no plan.json", hint="write one with 'dsctl topology plan --out-dir DIR'")
    text = read_text_input(plan_file, "--plan")
    profile_name, _ = sim.plan_facts(text, str(plan_file))
    node = profile_store().node(node_profile or profile_name or DEFAULT_NODE_PROFILE)
    return MoveFabric(text, str(plan_file), node.nvlink_bytes_per_s / 2)


StatsArg = Annotated[list[Path], typer.Argument(
    help="Routing statistics, layers x experts: .json (2-D list or {\"load\": ...}), .csv (one row per layer) "
    "or .npy; several are summed.")]


@app.command("rebalance")
def rebalance_cmd(
    stats: StatsArg,
    replicas: Annotated[int | None, typer.Option("--replicas", "-r", help="Physical expert slots per layer (experts "
                                                 "+ redundant; default: the model's deployment).")] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", "-g", help="GPUs in the expert-parallel group (slots split "
                                             "evenly; default: the model's deployment).")] = None,
    nodes: Annotated[int | None, typer.Option("--nodes", "-N", help="Nodes (fast intra-node links) the GPUs span "
                                              "(default: the model's deployment).")] = None,
    groups: Annotated[int | None, typer.Option("--groups", help="Expert groups (default: the model's, else 1).")] \
    = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model profile supplying experts, groups and "
                                              "the deployment, e.g. deepseek-v3 (default: inferred from the "
                                              "statistics' shape).")] = None,
    deployment: Annotated[str, typer.Option("--deployment", help="Published deployment used for missing layout "
                                            "numbers: prefill or decode.")] = "prefill",
    policy: Annotated[str, typer.Option("--policy", help="auto (hierarchical iff groups % nodes == 0), "
                                         "hierarchical or global.")] = "auto",
    algorithm: Annotated[str, typer.Option("--algorithm", help="reference (DeepSeek's EPLB, exact) or balanced.")]
    = "reference",
    prove: Annotated[bool, typer.Option("--prove", help="Small instances: search for the exact optimum per layer "
                                        "(take it if better) and report which layers are proved optimal.")] = False,
    prove_with: Annotated[str, typer.Option("--prove-with", help="With --prove: search (branch and bound, no "
                                            "dependency), milp (HiGHS: pip install 'dsctl[milp]') or auto (the "
                                            "search, then the MILP on layers it left open if HiGHS is "
                                            "installed).")] = "search",
    prove_time_s: Annotated[float | None, typer.Option("--prove-time-s", help="With --prove-with milp or auto: "
                                                       "seconds the MILP may spend over all layers (default "
                                                       "60).")] = None,
    previous: Annotated[Path | None, typer.Option("--previous", help="Current placement (dsctl or SGLang JSON): "
                                                  "move as few replicas as possible.")] = None,
    tolerance: Annotated[float | None, typer.Option("--tolerance", help="With --previous: allowed loss of "
                                                    "balancedness against the unconstrained plan (fraction; "
                                                    "default 0.01).")] = None,
    max_moves: Annotated[int | None, typer.Option("--max-moves", help="With --previous: at most this many "
                                                  "replicas moved (all layers).")] = None,
    max_move_bytes: Annotated[int | None, typer.Option("--max-move-bytes", help="With --previous: at most this "
                                                       "many bytes of expert weights moved.")] = None,
    min_gain: Annotated[float | None, typer.Option("--min-gain", help="With --previous: below this relative drop "
                                                   "of the max GPU load per step, keep the current placement "
                                                   "(default 0.02).")] = None,
    plan: Annotated[Path | None, typer.Option("--plan", help="With --previous: planned fabric (plan.json or the "
                                              "folder of 'dsctl topology plan --out-dir'): time the moves on it, "
                                              "simulated as 'topology simulate' does.")] = None,
    step_time_s: Annotated[float | None, typer.Option("--step-time-s", help="With --plan: seconds per step that "
                                                      "scale with the max GPU load (the MoE part), for the "
                                                      "break-even number of steps.")] = None,
    node_profile: Annotated[str | None, typer.Option("--node-profile", help="With --plan: node profile for the "
                                                     "NVLink bandwidth (default: the plan's).")] = None,
    bytes_per_param: Annotated[float, typer.Option("--bytes-per-param", help="Expert weight bytes per parameter for "
                                                   "bytes moved (1 = FP8, 2 = BF16).")] = 1.0,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write the placement JSON (phy2log, log2phy, logcnt, "
                                             "metrics) to this file.")] = None,
    sglang_out: Annotated[Path | None, typer.Option("--sglang-out", help="Write SGLang's --init-expert-location "
                                                    "JSON to this file (name must end in .json).")] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Plan expert replicas and their GPUs from routing statistics; report balancedness before/after and the gap
    to the lower bound (and to the exact optimum with --prove)."""
    from dsctl.eplb.placement_file import read_placement
    from dsctl.eplb.rebalance import rebalance
    from dsctl.eplb.request import RebalanceRequest
    from dsctl.eplb.result import check_sglang_name, sglang_export, sglang_server_args
    from dsctl.eplb.stats import sum_stats
    from dsctl.output.emit import envelope, render_json, stderr_console
    from dsctl.output.progress import progress

    _check_outputs({"--out": out, "--sglang-out": sglang_out})
    if sglang_out is not None:
        check_sglang_name(str(sglang_out))
    profile = _model(model)
    # the model profiles are read only when the model matters: missing layout numbers or an SGLang export
    needs_model = None in (replicas, gpus, nodes) or sglang_out is not None
    weight = sum_stats([(str(p), read_input(p, "statistics file")) for p in stats])
    fabric = None if plan is None else _fabric(plan, node_profile)
    previous_placement = None
    if previous is not None:
        text = read_text_input(previous, "--previous")
        previous_placement = read_placement(f"--previous {previous}", text, *weight.shape)
    request = RebalanceRequest(
        replicas=replicas, gpus=gpus, nodes=nodes, groups=groups, model=profile, deployment=deployment,
        policy=policy, algorithm=algorithm, prove=prove, prove_with=prove_with, prove_time_s=prove_time_s,
        previous=previous_placement, tolerance=tolerance,
        max_moves=max_moves, max_move_bytes=max_move_bytes, min_gain=min_gain, fabric=fabric,
        node_profile=node_profile, step_time_s=step_time_s, bytes_per_param=bytes_per_param,
        sources=tuple(str(p) for p in stats))
    with progress(f"{algorithm} placement", fmt, total=1) as report:
        result = rebalance(weight, request, progress=report,
                           candidate_models=_all_models() if profile is None and needs_model else ())
    contents: list[tuple[Path, str | bytes, str | None]] = []  # render everything before writing anything
    if out is not None:
        contents.append((out, render_json(envelope(result, "eplb rebalance")), "--out"))
    if sglang_out is not None:
        contents.append((sglang_out, json.dumps(sglang_export(result, str(sglang_out))) + "\n", "--sglang-out"))
    _write_all(contents)
    show(result, fmt, "eplb rebalance")
    err = stderr_console()
    if out is not None:
        err.print(f"wrote {out}")
    if sglang_out is not None:
        err.print(f"wrote {sglang_out}; SGLang: {sglang_server_args(result.layout, str(sglang_out))}")


@app.command("simulate")
def simulate_cmd(
    stats: Annotated[Path, typer.Argument(help="Routing statistics to replay (.json, .csv or .npy).")],
    placement: Annotated[Path, typer.Argument(help="Placement JSON: dsctl's --out file or SGLang's "
                                              "--init-expert-location file.")],
    more_stats: Annotated[list[Path] | None, typer.Option("--stats", help="More statistics files, summed with STATS.")]
    = None,
    gpus: Annotated[int | None, typer.Option("--gpus", "-g", help="GPUs the placement spans (needed for SGLang "
                                             "files; default: the file's).")] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Per-GPU loads and balancedness an existing placement yields on (other) statistics."""
    from dsctl.eplb.placement_file import read_placement
    from dsctl.eplb.simulate import simulate
    from dsctl.eplb.stats import sum_stats

    files = [stats, *(more_stats or [])]
    weight = sum_stats([(str(p), read_input(p, "statistics file")) for p in files])
    text = read_text_input(placement, "placement")
    loaded = read_placement(str(placement), text, *weight.shape)
    show(simulate(weight, loaded, gpus, tuple(str(p) for p in files)), fmt, "eplb simulate")


@app.command("replay")
def replay_cmd(
    windows: Annotated[list[Path], typer.Argument(help="Statistics windows in time order (one file each: .json, "
                                                  ".csv, .npy or SGLang .pt).")],
    replicas: Annotated[int | None, typer.Option("--replicas", "-r", help="Slots per layer (default: the model's "
                                                 "deployment).")] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", "-g", help="GPUs (default: the model's deployment).")] = None,
    nodes: Annotated[int | None, typer.Option("--nodes", "-N", help="Nodes (default: the model's deployment).")]
    = None,
    groups: Annotated[int | None, typer.Option("--groups", help="Expert groups (default: the model's, else 1).")] \
    = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model profile (default: inferred from the "
                                              "statistics' shape).")] = None,
    deployment: Annotated[str, typer.Option("--deployment", help="prefill or decode.")] = "prefill",
    algorithm: Annotated[str, typer.Option("--algorithm", help="reference or balanced.")] = "balanced",
    interval: Annotated[list[int] | None, typer.Option("--interval-windows", help="Re-planning intervals in windows "
                                                       "(repeatable; default 1 2 4 8).")] = None,
    min_gain: Annotated[float, typer.Option("--min-gain", help="A re-plan pays off when it lowers the next "
                                            "window's max GPU load by at least this fraction.")] = 0.02,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Plan on window t, score on window t+1: the balancedness plans deliver and the best re-planning interval."""
    from dsctl.eplb.rebalance import LayoutRequest, resolve_layout, resolve_model
    from dsctl.eplb.stats import parse_stats
    from dsctl.eplb.windows import DEFAULT_INTERVALS, replay_windows
    from dsctl.output.progress import progress

    weights = [parse_stats(str(p), read_input(p, "statistics file")) for p in windows]
    first = weights[0]
    shape = (int(first.shape[0]), int(first.shape[1]))
    missing = None in (replicas, gpus, nodes)
    profile = resolve_model(shape, _model(model), _all_models() if model is None else (), missing)
    r, g, n, grp, _ = resolve_layout(LayoutRequest(replicas, gpus, nodes, groups, deployment), profile)
    with progress("planning windows", fmt, total=len(weights)) as report:
        result = replay_windows(weights, num_replicas=r, num_gpus=g, num_nodes=n, num_groups=grp,
                                algorithm=algorithm, intervals=tuple(interval or DEFAULT_INTERVALS),
                                min_gain=min_gain, sources=tuple(str(p) for p in windows), progress=report)
    show(result, fmt, "eplb replay")


@app.command("budget")
def budget_cmd(
    stats: StatsArg,
    total_slots: Annotated[int | None, typer.Option("--total-slots", help="Slots over all MoE layers (memory "
                                                    "budget; default: layers x the deployment's slots).")] = None,
    replicas: Annotated[int | None, typer.Option("--replicas", "-r", help="Uniform slots per layer compared "
                                                 "with (default: the model's deployment).")] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", "-g", help="GPUs (default: the model's deployment).")] = None,
    nodes: Annotated[int | None, typer.Option("--nodes", "-N", help="Nodes (default: the model's deployment).")]
    = None,
    groups: Annotated[int | None, typer.Option("--groups", help="Expert groups (default: the model's, else 1).")] \
    = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model profile (default: inferred).")] = None,
    deployment: Annotated[str, typer.Option("--deployment", help="prefill or decode.")] = "prefill",
    policy: Annotated[str, typer.Option("--policy", help="auto, hierarchical or global.")] = "auto",
    algorithm: Annotated[str, typer.Option("--algorithm", help="reference or balanced.")] = "balanced",
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Spend a total slot budget per layer where it lowers the max GPU load most, against the uniform count."""
    from dsctl.eplb.budget import allocate_slots
    from dsctl.eplb.rebalance import LayoutRequest, resolve_layout, resolve_model
    from dsctl.eplb.stats import sum_stats

    weight = sum_stats([(str(p), read_input(p, "statistics file")) for p in stats])
    shape = (int(weight.shape[0]), int(weight.shape[1]))
    missing = None in (replicas, gpus, nodes)
    profile = resolve_model(shape, _model(model), _all_models() if model is None else (), missing)
    r, g, n, grp, _ = resolve_layout(LayoutRequest(replicas, gpus, nodes, groups, deployment), profile)
    total = total_slots if total_slots is not None else r * shape[0]
    show(allocate_slots(weight, total_slots=total, num_gpus=g, num_nodes=n, num_groups=grp, policy=policy,
                        algorithm=algorithm), fmt, "eplb budget")
