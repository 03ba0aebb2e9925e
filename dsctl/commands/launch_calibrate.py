"""dsctl launch calibrate: fit a node profile's achieved rates to a PyTorch profiler trace of the model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dsctl.commands._common import FormatOpt, profile_store, show
from dsctl.errors import InputError
from dsctl.output.formats import OutputFormat
from dsctl.profiles import DEFAULT_MODEL, DEFAULT_NODE_PROFILE

#: the trace is one rank's chunk pair (a few MB; train.json is 3.1 MB); larger files are refused before reading
DEFAULT_MAX_BYTES = 1024**3


def calibrate_cmd(
    trace: Annotated[Path, typer.Argument(help="PyTorch profiler trace (Chrome JSON, .json.gz) of one DualPipe "
                                          "F&B chunk pair of the model, e.g. DeepSeek's profile-data train.json.")],
    model: Annotated[str, typer.Option("--model", "-m", help="Model profile.")] = DEFAULT_MODEL,
    node_profile: Annotated[str, typer.Option("--node-profile", help="Node profile (GPUs per node, HBM).")]
    = DEFAULT_NODE_PROFILE,
    ep: Annotated[int, typer.Option("--ep", min=1, max=1 << 20, help="Expert parallelism: EP group size in GPUs.")]
    = 64,
    chunk_layers: Annotated[int, typer.Option(
        "--chunk-layers", min=1, max=1024, help="MoE layers in each traced chunk (train.json: 4).")] = 4,
    tokens_per_gpu: Annotated[int, typer.Option(
        "--tokens-per-gpu", min=1, max=1 << 24, help="Tokens per GPU of the traced micro-batch.")] = 4096,
    seq_len: Annotated[int, typer.Option("--seq-len", min=1, max=1 << 24, help="Tokens per sequence.")] = 4096,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Write the calibrated node profile here (NAME.yaml; the profile is named NAME).")]
    = None,
    max_bytes: Annotated[int, typer.Option(
        "--max-bytes", min=1, max=2**50, help="Refuse a trace over this many bytes, after gzip decompression.")]
    = DEFAULT_MAX_BYTES,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Fit the achieved rates per op class (attention, GEMMs, expert GEMMs, elementwise, communication) to the
    trace's kernel times; report the fit's residual and the pair predicted before and after."""
    from dataclasses import replace

    from dsctl.inputs import note_input
    from dsctl.output.files import atomic_write, check_target
    from dsctl.profiles.calibrated import calibrated_node_yaml
    from dsctl.runners.trace_files import open_chunks
    from dsctl.steptime.calibrate import calibrate
    from dsctl.trace import read_trace

    note_input(trace, "TRACE")  # read by the trace reader, not read_input: recorded so --out never replaces it
    if out is not None:
        if out.suffix != ".yaml":
            raise InputError(f"--out {out}: a profile file ends in .yaml (its name is the file name)",
                             hint="e.g. -o my-profiles/nodes/h800-calibrated.yaml")
        check_target(out, "--out")
    store = profile_store()
    model_profile, node = store.model(model), store.node(node_profile)
    data = read_trace(open_chunks(trace, max_bytes), str(trace), max_bytes)
    result = calibrate(data, model_profile, node, ep, chunk_layers, tokens_per_gpu, seq_len)
    if out is not None:
        header = [f"calibrated by dsctl launch calibrate from {trace.name} ({model_profile.name}, EP{ep}, "
                  f"{chunk_layers} MoE layers per chunk, {tokens_per_gpu} tokens per GPU)",
                  f"fit residual {result.residual_fraction:.1%} of the traced compute kernel time; the pair "
                  f"{result.pair_after_s * 1e3:.1f} ms predicted against {result.wall_s * 1e3:.1f} ms traced",
                  f"source profile: {node.name}"]
        atomic_write(out, calibrated_node_yaml(result.profile, out.stem, header), option="--out")
        result = replace(result, written=str(out))
    show(result, fmt, "launch calibrate")


def register_calibrate(launch_app: typer.Typer) -> None:
    """Add the ``calibrate`` command to the ``launch`` group."""
    launch_app.command("calibrate")(calibrate_cmd)
