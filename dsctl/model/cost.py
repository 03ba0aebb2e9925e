"""Training GPU hours, wall-clock days and dollars (the V3 tech report's Table 1).

The one input that matters is throughput: trained tokens per GPU-second. It comes from, in order:

1. ``tokens_per_gpu_second`` given by the user (a measured figure) -> source ``given``;
2. the model's published measurement (the profile's ``published.training_gpu_hours_per_trillion_tokens``;
   for deepseek-v3 the tech report's 180K H800 GPU hours per trillion tokens) when no FLOP-path input is
   given -> source ``measured``;
3. the FLOP path: ``gpu_tflops * 1e12 * mfu / flops_per_token`` with 989 TFLOPS (H800 dense BF16); the MFU is
   the given one, else ``predicted_mfu`` (``dsctl.steptime``'s prediction, passed by the command: source
   ``predicted``), else 0.39 (Table 4's causal 38.94%); FLOPs per token are the given ``gflops_per_token``, else
   the profile's published Table 2 figure, else ``dsctl.model.flops`` at ``seq_len`` -> source ``flops``.
   ``predict=True`` takes the FLOP path even when no FLOP-path option is given.

gpu_hours = tokens / tokens_per_gpu_second / 3600 + extra GPU hours; days = gpu_hours / num_gpus / 24;
cost_usd = gpu_hours * gpu_hour_usd.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dsctl.errors import InputError
from dsctl.model.checks import require_finite_results, require_number
from dsctl.model.flops import training_flops
from dsctl.profiles.schema import ModelProfile

DEFAULT_GPU_TFLOPS = 989.0
DEFAULT_MFU = 0.39
TRILLION = 1e12
SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class Throughput:
    """Trained tokens per GPU-second and where the figure came from.

    ``source`` is ``given``, ``measured``, ``flops`` or ``predicted`` (the FLOP path with a predicted MFU);
    ``note`` says which publication or inputs.
    ``flops_per_token``, ``gpu_tflops`` and ``mfu`` are set on the FLOP path only (None otherwise).
    """

    tokens_per_gpu_second: float
    source: str
    note: str
    flops_per_token: float | None = None
    gpu_tflops: float | None = None
    mfu: float | None = None


def resolve_throughput(
    model: ModelProfile,
    *,
    tokens_per_gpu_second: float | None = None,
    gflops_per_token: float | None = None,
    gpu_tflops: float | None = None,
    mfu: float | None = None,
    seq_len: int = 4096,
    predicted_mfu: float | None = None,
    predicted_note: str = "",
    predict: bool = False,
) -> Throughput:
    """Pick the throughput as the module docstring describes."""
    require_number(tokens_per_gpu_second, "tokens_per_gpu_second", positive=True)
    require_number(gflops_per_token, "gflops_per_token", positive=True)
    require_number(gpu_tflops, "gpu_tflops", positive=True)
    require_number(mfu, "mfu", positive=True)
    require_number(seq_len, "seq_len", positive=True)
    if mfu is not None and mfu > 1:
        raise InputError(f"is a fraction of peak between 0 and 1, got {mfu:g}", field="mfu")
    flop_inputs = [gflops_per_token, gpu_tflops, mfu]
    if tokens_per_gpu_second is not None:
        if any(v is not None for v in flop_inputs):
            raise InputError(
                "cannot be combined with {gflops_per_token}, {gpu_tflops} or {mfu}", field="tokens_per_gpu_second",
                mentions=("gflops_per_token", "gpu_tflops", "mfu"),
                hint="give either a measured throughput or the FLOP-path inputs",
            )
        return Throughput(tokens_per_gpu_second, "given", "--tokens-per-gpu-second")
    measured_hours = model.published.training_gpu_hours_per_trillion_tokens
    if measured_hours > 0 and all(v is None for v in flop_inputs) and not predict:
        tps = TRILLION / (measured_hours * SECONDS_PER_HOUR)
        source = model.published.training_source or f"{model.name} profile: published GPU hours per trillion tokens"
        return Throughput(tps, "measured", source)
    tflops = DEFAULT_GPU_TFLOPS if gpu_tflops is None else gpu_tflops
    frac = mfu if mfu is not None else predicted_mfu if predicted_mfu is not None else DEFAULT_MFU
    if gflops_per_token is not None:
        flops, what = gflops_per_token * 1e9, "--gflops-per-token"
    elif model.published.training_gflops_per_token > 0:
        flops, what = model.published.training_gflops_per_token * 1e9, f"published {model.name} GFLOP/token"
    else:
        flops, what = training_flops(model, seq_len).flops_per_token, f"computed at seq-len {seq_len}"
    tps = tflops * 1e12 * frac / flops
    require_finite_results({"tokens per GPU-second": tps}, ["--gpu-tflops", "--mfu", "--gflops-per-token"],
                           positive=["tokens per GPU-second"])
    note = f"{tflops:g} TFLOPS x MFU {frac:.4g} / {flops / 1e9:.4g} GFLOP per token ({what})"
    if mfu is None and predicted_mfu is not None:
        return Throughput(tps, "predicted", f"{note}; {predicted_note}", flops, tflops, frac)
    return Throughput(tps, "flops", note, flops, tflops, frac)


@dataclass(frozen=True)
class CostReport:
    """GPU hours, days and dollars of a training run.

    ``gpu_hours`` = ``train_gpu_hours`` (the tokens) + ``extra_gpu_hours`` (other stages);
    ``days`` = ``gpu_hours / num_gpus / 24``; ``cost_usd`` = ``gpu_hours * gpu_hour_usd``.
    ``gpu_hours_per_trillion_tokens`` and ``days_per_trillion_tokens`` are the throughput restated.
    """

    model: str
    tokens: float
    num_gpus: int
    gpu_hour_usd: float
    tokens_per_gpu_second: float
    throughput_source: str
    throughput_note: str
    flops_per_token: float | None
    gpu_tflops: float | None
    mfu: float | None
    gpu_hours_per_trillion_tokens: float
    days_per_trillion_tokens: float
    train_gpu_hours: float
    train_days: float
    train_cost_usd: float
    extra_gpu_hours: tuple[float, ...]
    gpu_hours: float
    days: float
    cost_usd: float


def training_cost(
    model: ModelProfile,
    tokens: float,
    throughput: Throughput,
    *,
    num_gpus: int = 2048,
    gpu_hour_usd: float = 2.0,
    extra_gpu_hours: Sequence[float] = (),
) -> CostReport:
    """GPU hours, days and cost of training ``model`` on ``tokens`` tokens at ``throughput``."""
    require_number(tokens, "tokens", positive=True)
    require_number(num_gpus, "gpus", positive=True)
    require_number(gpu_hour_usd, "gpu_hour_usd", non_negative=True)
    for extra in extra_gpu_hours:
        require_number(extra, "extra_gpu_hours", non_negative=True)
    require_number(throughput.tokens_per_gpu_second, "tokens_per_gpu_second", positive=True)
    per_trillion = TRILLION / throughput.tokens_per_gpu_second / SECONDS_PER_HOUR
    train_hours = tokens / throughput.tokens_per_gpu_second / SECONDS_PER_HOUR
    total_hours = train_hours + sum(extra_gpu_hours)
    days = total_hours / num_gpus / 24.0
    cost_usd = total_hours * gpu_hour_usd
    require_finite_results(
        {"GPU hours per trillion tokens": per_trillion, "GPU hours": total_hours, "days": days, "cost": cost_usd},
        ["--tokens", "--tokens-per-gpu-second (or the FLOP-path options)", "--extra-gpu-hours", "--gpus",
         "--gpu-hour-usd"],
    )
    return CostReport(
        model=model.name,
        tokens=tokens,
        num_gpus=num_gpus,
        gpu_hour_usd=gpu_hour_usd,
        tokens_per_gpu_second=throughput.tokens_per_gpu_second,
        throughput_source=throughput.source,
        throughput_note=throughput.note,
        flops_per_token=throughput.flops_per_token,
        gpu_tflops=throughput.gpu_tflops,
        mfu=throughput.mfu,
        gpu_hours_per_trillion_tokens=per_trillion,
        days_per_trillion_tokens=per_trillion / num_gpus / 24.0,
        train_gpu_hours=train_hours,
        train_days=train_hours / num_gpus / 24.0,
        train_cost_usd=train_hours * gpu_hour_usd,
        extra_gpu_hours=tuple(float(x) for x in extra_gpu_hours),
        gpu_hours=total_hours,
        days=days,
        cost_usd=cost_usd,
    )
