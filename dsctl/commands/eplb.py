"""dsctl eplb rebalance|simulate: expert placement from routing statistics (DeepSeek's EPLB and better)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dsctl.commands._common import FormatOpt, profile_store, read_input, read_text_input, show
from dsctl.errors import InputError
from dsctl.output.formats import OutputFormat

if TYPE_CHECKING:
    from dsctl.profiles.schema import ModelProfile

app = typer.Typer(
    name="eplb",
    help="Expert-parallel load balancing: replicate hot experts and place replicas on GPUs from routing statistics.",
    no_args_is_help=True,
)


def _model(name: str | None) -> ModelProfile | None:
    if name is None:
        return None
    model = profile_store().model(name)
    if model.moe is None:
        raise InputError(f"--model {name} has no MoE layers; EPLB needs a mixture-of-experts model")
    return model


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


def _zero_rows_warning(weight: Any, profile: ModelProfile | None) -> str | None:
    """A warning for statistics rows that are all zero (no token was routed: usually dense layers given as rows)."""
    import numpy as np

    zero = [int(i) for i in np.flatnonzero(weight.sum(axis=1) == 0)]
    if not zero:
        return None
    rows = ", ".join(map(str, zero[:8])) + (", ..." if len(zero) > 8 else "")
    text = f"statistics rows {rows} are all zero ({len(zero)} of {weight.shape[0]}): their placement is arbitrary"
    if profile is not None and profile.num_dense_layers and weight.shape[0] == profile.num_layers:
        moe_rows = profile.num_layers - profile.num_dense_layers
        return (f"{text}; {profile.name} has {profile.num_layers} layers of which the first "
                f"{profile.num_dense_layers} are dense: give only its {moe_rows} MoE layers' rows "
                f"(model layers {profile.num_dense_layers}-{profile.num_layers - 1})")
    return text + "; were dense layers (no experts) included?"


StatsArg = Annotated[list[Path], typer.Argument(
    help="Routing statistics, layers x experts: .json (2-D list or {\"load\": ...}), .csv (one row per layer) "
    "or .npy; several are summed.")]


@app.command("rebalance")
def rebalance_cmd(
    stats: StatsArg,
    replicas: Annotated[int, typer.Option("--replicas", "-r",
                                          help="Physical expert slots per layer (experts + redundant).")],
    gpus: Annotated[int, typer.Option("--gpus", "-g", help="GPUs in the expert-parallel group (slots split evenly).")],
    nodes: Annotated[int, typer.Option("--nodes", "-N", help="Nodes (fast intra-node links) the GPUs span.")],
    groups: Annotated[int | None, typer.Option("--groups", help="Expert groups (default: the model's, else 1).")] \
    = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model profile supplying experts and groups, "
                                              "e.g. deepseek-v3.")] = None,
    policy: Annotated[str, typer.Option("--policy", help="auto (hierarchical iff groups % nodes == 0), "
                                         "hierarchical or global.")] = "auto",
    algorithm: Annotated[str, typer.Option("--algorithm", help="reference (DeepSeek's EPLB, exact) or balanced.")]
    = "reference",
    previous: Annotated[Path | None, typer.Option("--previous", help="Current placement (dsctl or SGLang JSON): "
                                                  "move as few replicas as possible.")] = None,
    tolerance: Annotated[float | None, typer.Option("--tolerance", help="With --previous: allowed loss of "
                                                    "balancedness against the unconstrained plan (fraction; "
                                                    "default 0.01).")] = None,
    bytes_per_param: Annotated[float, typer.Option("--bytes-per-param", help="Expert weight bytes per parameter for "
                                                   "bytes moved (1 = FP8, 2 = BF16).")] = 1.0,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write the placement JSON (phy2log, log2phy, logcnt, "
                                             "metrics) to this file.")] = None,
    sglang_out: Annotated[Path | None, typer.Option("--sglang-out", help="Write SGLang's --init-expert-location "
                                                    "JSON to this file.")] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Plan expert replicas and their GPUs from routing statistics; report balancedness before/after."""
    from dsctl.eplb.export import read_placement, sglang_expert_location, sglang_server_args
    from dsctl.eplb.rebalance import expert_size_bytes, rebalance
    from dsctl.eplb.stats import sum_stats
    from dsctl.output.emit import envelope, render_json, stderr_console
    from dsctl.output.progress import progress

    _check_outputs({"--out": out, "--sglang-out": sglang_out})
    profile = _model(model)
    moe = profile.moe if profile is not None else None
    weight = sum_stats([(str(p), read_input(p, "statistics file")) for p in stats])
    if moe is not None and weight.shape[1] != moe.num_routed_experts:
        raise InputError(f"statistics have {weight.shape[1]} experts per layer but --model {model} has "
                         f"{moe.num_routed_experts} routed experts")
    dense = 0
    if profile is not None and weight.shape[0] == profile.num_layers - profile.num_dense_layers:
        dense = profile.num_dense_layers
    zero_warning = _zero_rows_warning(weight, profile)
    previous_placement = None
    if previous is not None:
        text = read_text_input(previous, "--previous")
        previous_placement = read_placement(f"--previous {previous}", text, *weight.shape)
    with progress(f"{algorithm} placement", fmt, total=1) as report:
        result = rebalance(
            weight, num_replicas=replicas, num_gpus=gpus, num_nodes=nodes,
            num_groups=groups if groups is not None else (moe.num_expert_groups if moe is not None else 1),
            policy=policy, algorithm=algorithm, previous=previous_placement, tolerance=tolerance,
            expert_bytes=expert_size_bytes(profile, bytes_per_param) if profile is not None else None,
            sources=tuple(str(p) for p in stats), num_dense_layers=dense, progress=report,
        )
    if zero_warning:
        result = dataclasses.replace(result, warnings=(*result.warnings, zero_warning))
    contents: list[tuple[Path, str | bytes, str | None]] = []  # render everything before writing anything
    if out is not None:
        contents.append((out, render_json(envelope(result, "eplb rebalance", 0)), "--out"))
    if sglang_out is not None:
        contents.append((sglang_out, json.dumps(sglang_expert_location(result.placement, dense)) + "\n",
                         "--sglang-out"))
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
    from dsctl.eplb.export import read_placement
    from dsctl.eplb.simulate import simulate
    from dsctl.eplb.stats import sum_stats

    files = [stats, *(more_stats or [])]
    weight = sum_stats([(str(p), read_input(p, "statistics file")) for p in files])
    text = read_text_input(placement, "placement")
    loaded = read_placement(str(placement), text, *weight.shape)
    show(simulate(weight, loaded, gpus, tuple(str(p) for p in files)), fmt, "eplb simulate")
