"""dsctl model kv-cache|flops|cost|ep-speed-limit|memory: the arithmetic behind the paper's tables."""

from __future__ import annotations

from typing import Annotated

import typer

from dsctl.commands._common import FormatOpt, RecipeOpt, profile_store, show
from dsctl.errors import InputError
from dsctl.output.formats import OutputFormat
from dsctl.profiles import DEFAULT_MODEL, DEFAULT_NODE_PROFILE

#: request field (named by dsctl.model's errors) -> the option that sets it
FIELD_OPTIONS: dict[str, str] = {
    **{name: "--" + name.replace("_", "-") for name in (
        "seq_len", "tokens_per_gpu_second", "gflops_per_token", "gpu_tflops", "mfu", "tokens", "gpus",
        "gpu_hour_usd", "extra_gpu_hours", "bandwidth_bytes_per_s", "nic_gbps", "tokens_per_device", "hidden",
        "experts_per_token", "dispatch_bytes", "combine_bytes", "layers", "micro_batches", "context", "batch")},
    "link_bandwidth": "--bandwidth-bytes-per-s/--nic-gbps",
    "dtype_bytes": "--dtype",
    "dtype": "--dtype",
}

app = typer.Typer(
    name="model",
    help="The arithmetic behind the paper's tables: KV cache, training FLOPs, GPU hours and cost, "
    "EP speed limit, memory.",
    no_args_is_help=True,
)

TABLE1_MODELS = ["deepseek-v3", "qwen2.5-72b", "llama3.1-405b"]
ModelOpt = Annotated[str, typer.Option("--model", "-m", help="Model profile name (see 'dsctl profiles list').")]


def _count(text: str, option: str, *, integer: bool = False) -> float:
    from dsctl.model.checks import require_number
    from dsctl.units import QuantityError, parse_count

    try:
        value = parse_count(text)
    except QuantityError as exc:
        raise InputError(f"{option}: {exc}", hint=f"e.g. {option} 14.8T or {option} 4096") from None
    require_number(value, option, text=text)
    if integer and not float(value).is_integer():
        raise InputError(f"{option}: {text!r} is not a whole number")
    return value


@app.command("kv-cache")
def kv_cache(
    models: Annotated[
        list[str] | None,
        typer.Option("--model", "-m", help="Model profile; repeat for several (ratios are to the first). "
                     "Default: the paper's Table 1 trio " + ", ".join(TABLE1_MODELS) + "."),
    ] = None,
    context: Annotated[
        str, typer.Option("--context", help="Tokens per sequence, e.g. 4096 or 128K (= 128,000; 131072 for 2^17).")
    ] = "4096",
    dtype: Annotated[str, typer.Option("--dtype", help="Cache dtype: bf16, fp16, fp8 or fp32.")] = "bf16",
    batch: Annotated[int, typer.Option("--batch", help="Number of sequences.")] = 1,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """KV-cache bytes per token, per sequence and per batch (Table 1: MLA vs GQA)."""
    from dsctl.model.dtypes import dtype_bytes
    from dsctl.model.kvcache import kv_cache_report

    store = profile_store()
    profiles = [store.model(name) for name in (models or TABLE1_MODELS)]
    report = kv_cache_report(
        profiles,
        dtype=dtype.lower(),
        dtype_bytes=dtype_bytes(dtype),
        context_tokens=int(_count(context, "--context", integer=True)),
        batch=batch,
    )
    show(report, fmt, "model kv-cache")


@app.command("flops")
def flops(
    model: ModelOpt = DEFAULT_MODEL,
    seq_len: Annotated[int, typer.Option("--seq-len", help="Training sequence length in tokens.")] = 4096,
    non_causal: Annotated[
        bool, typer.Option("--non-causal", help="Count the full attention matrix (Megatron convention).")
    ] = False,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Training FLOPs per token, forward + backward (Table 2); causal attention counting by default."""
    from dsctl.model.flops import training_flops

    report = training_flops(profile_store().model(model), seq_len, causal=not non_causal)
    show(report, fmt, "model flops")


@app.command("cost")
def cost(
    tokens: Annotated[str, typer.Option("--tokens", help="Trained tokens, e.g. 14.8T.")],
    model: ModelOpt = DEFAULT_MODEL,
    gpus: Annotated[int, typer.Option("--gpus", help="GPUs in the run (for days).")] = 2048,
    gpu_tflops: Annotated[
        float | None, typer.Option("--gpu-tflops", help="Dense BF16 peak per GPU; default 989 (H800) on the FLOP path.")
    ] = None,
    mfu: Annotated[
        float | None, typer.Option("--mfu", help="Model FLOPs utilisation, 0-1; default on the FLOP path: "
                                   "predicted by dsctl's step-time model for --gpus of --node-profile.")
    ] = None,
    predict: Annotated[
        bool, typer.Option("--predict", help="Take the FLOP path with the predicted MFU instead of the model's "
                           "published measurement.")
    ] = False,
    node_profile: Annotated[
        str, typer.Option("--node-profile", help="Node profile the MFU is predicted on.")
    ] = DEFAULT_NODE_PROFILE,
    gflops_per_token: Annotated[
        float | None,
        typer.Option("--gflops-per-token", help="Training GFLOP per token; default the published figure, "
                     "else 'dsctl model flops' at --seq-len."),
    ] = None,
    tokens_per_gpu_second: Annotated[
        float | None, typer.Option("--tokens-per-gpu-second", help="Measured throughput; skips the FLOP path.")
    ] = None,
    seq_len: Annotated[int, typer.Option("--seq-len", help="Sequence length for computed FLOPs.")] = 4096,
    gpu_hour_usd: Annotated[float, typer.Option("--gpu-hour-usd", help="Rental price per GPU hour.")] = 2.0,
    extra_gpu_hours: Annotated[
        list[str] | None,
        typer.Option("--extra-gpu-hours", help="GPU hours of other stages, e.g. 119K; repeatable."),
    ] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """GPU hours, days and dollars of a training run (V3 tech report Table 1).

    Throughput: --tokens-per-gpu-second if given; else the model's published measurement (deepseek-v3:
    180K GPU hours per trillion tokens) unless a FLOP-path option or --predict is given; else
    gpu-tflops x mfu / GFLOP per token, the MFU predicted (dsctl launch's step time) when --mfu is not given.
    """
    from dsctl.model.cost import resolve_throughput, training_cost

    store = profile_store()
    profile = store.model(model)
    flop_path = predict or any(v is not None for v in (gpu_tflops, gflops_per_token))
    predicted = None
    if flop_path and mfu is None and tokens_per_gpu_second is None:
        from dsctl.steptime.mfu import predicted_mfu

        predicted = predicted_mfu(profile, store.node(node_profile), gpus, seq_len)
    throughput = resolve_throughput(
        profile,
        tokens_per_gpu_second=tokens_per_gpu_second,
        gflops_per_token=gflops_per_token,
        gpu_tflops=gpu_tflops,
        mfu=mfu,
        seq_len=seq_len,
        predicted_mfu=predicted.mfu if predicted else None,
        predicted_note=predicted.note if predicted else "",
        predict=predict,
    )
    report = training_cost(
        profile,
        _count(tokens, "--tokens"),
        throughput,
        num_gpus=gpus,
        gpu_hour_usd=gpu_hour_usd,
        extra_gpu_hours=[_count(x, "--extra-gpu-hours") for x in extra_gpu_hours or []],
    )
    show(report, fmt, "model cost")


@app.command("ep-speed-limit")
def ep_speed_limit_command(
    nic_gbps: Annotated[float, typer.Option("--nic-gbps", help="NIC line rate in Gb/s (400 = 50 GB/s).")] = 400.0,
    bandwidth_bytes_per_s: Annotated[
        float | None, typer.Option("--bandwidth-bytes-per-s",
                                   help="Link bandwidth in bytes/s (900e9 = NVL72's 900 GB/s); overrides --nic-gbps.")
    ] = None,
    tokens_per_device: Annotated[int, typer.Option("--tokens-per-device", help="Tokens per device per step.")] = 32,
    hidden: Annotated[int, typer.Option("--hidden", help="Hidden size (the paper rounds 7168 to 7000).")] = 7000,
    experts_per_token: Annotated[
        int, typer.Option("--experts-per-token", help="Destinations per token (8 routed + 1 shared).")
    ] = 9,
    dispatch_bytes: Annotated[float, typer.Option("--dispatch-bytes", help="Bytes per dispatched value (FP8).")] = 1.0,
    combine_bytes: Annotated[float, typer.Option("--combine-bytes", help="Bytes per combined value (BF16).")] = 2.0,
    layers: Annotated[int, typer.Option("--layers", help="Layers with EP all-to-all (58 = MoE layers only).")] = 61,
    micro_batches: Annotated[
        int, typer.Option("--micro-batches", help="Overlapped micro-batches (comm rounds per layer).")
    ] = 2,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Network-bound ceiling on EP decode speed (section 2.3.2): time per output token, tokens/s."""
    from dsctl.model.ep import ep_speed_limit, link_bandwidth_bytes_per_s

    report = ep_speed_limit(
        bandwidth_bytes_per_s=link_bandwidth_bytes_per_s(nic_gbps, bandwidth_bytes_per_s),
        tokens_per_device=tokens_per_device,
        hidden=hidden,
        experts_per_token=experts_per_token,
        dispatch_bytes=dispatch_bytes,
        combine_bytes=combine_bytes,
        layers=layers,
        micro_batches=micro_batches,
    )
    show(report, fmt, "model ep-speed-limit")


@app.command("memory")
def memory(
    model: ModelOpt = DEFAULT_MODEL,
    dtypes: Annotated[
        list[str] | None,
        typer.Option("--dtype", help="Weight dtype(s): fp32, bf16, fp16, fp8; repeatable. Default fp32, bf16, fp8."),
    ] = None,
    recipe: RecipeOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Total and active parameters, weight bytes per dtype, bytes per routed expert, and the activations one layer
    keeps per token under an activation recipe."""
    from dsctl.model.memory import memory_report

    report = memory_report(profile_store().model(model), dtypes or ["fp32", "bf16", "fp8"],
                           recipe.value if recipe is not None else None)
    show(report, fmt, "model memory")
