"""The step-time prediction and the figures derived from it (tokens/day, TFLOPS, MFU, GPU hours)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dsctl.units import DAY_S


@dataclass(frozen=True)
class PhaseBreakdown:
    """One pipeline rank's step, read the way the paper's Table 4 reads it (seconds).

    ``one_f_s``: forward-only ops; ``one_b_s``: backward-only ops (full B and input-gradient I); ``one_w_s``:
    weight-gradient ops; ``overlapped_fb_s``: overlapped forward-and-backward ops; ``bubble_s``: the rank's
    idle time (pipeline makespan minus its busy time); ``optimizer_s``: ZeRO-1 collectives + AdamW.
    ``num_*``: op counts of each kind on the rank.
    """

    rank: int
    one_f_s: float
    one_b_s: float
    one_w_s: float
    overlapped_fb_s: float
    bubble_s: float
    optimizer_s: float
    num_f: int
    num_b: int
    num_w: int
    num_fb: int


@dataclass(frozen=True)
class StageCost:
    """Seconds of one stage's ops alone (F, I, W) and its forward/backward communication (in F and I)."""

    stage: int
    f_s: float
    i_s: float
    w_s: float
    comm_f_s: float
    comm_b_s: float


@dataclass(frozen=True)
class LayerCost:
    """One layer of a kind (``dense`` or ``moe``) for one micro-batch, seconds: attention and FFN blocks' forward,
    input-gradient and weight-gradient compute, the MoE all-to-alls (dispatch/combine, forward/backward) and the
    recompute share of the backward."""

    kind: str
    attention_f_s: float
    attention_i_s: float
    attention_w_s: float
    ffn_f_s: float
    ffn_i_s: float
    ffn_w_s: float
    dispatch_f_s: float
    combine_f_s: float
    dispatch_b_s: float
    combine_b_s: float
    #: forward seconds the backward redoes under the activation recipe (inside the I and a2a B seconds)
    recompute_s: float = 0.0
    #: tensor parallelism's NVLink all-gathers + reduce-scatters, forward and backward (exposed; 0 at tp 1)
    tp_f_s: float = 0.0
    tp_b_s: float = 0.0


@dataclass(frozen=True)
class StepTime:
    """A predicted training step.

    - ``step_s`` = ``pipeline_s`` (simulated schedule makespan, p2p included) + ``optimizer_s``;
    - ``breakdown``: rank 0's phases (Table 4's reading); ``max_bubble_s``: the largest idle over ranks;
    - ``tokens_per_step`` and ``world_size``; TFLOPS per GPU in two conventions: ``tflops_noncausal`` counts the
      full attention matrix, ``tflops_causal`` half of it (the paper's 432 and 385); both without MTP, as the
      paper's 250 GFLOP/token; ``mfu_*`` divide them by the BF16 dense peak;
    - ``reduce_scatter_s``, ``all_gather_s``, ``adam_s``: the optimizer tail's parts; ``p2p_s`` per boundary
      (latency + one send's bytes over the NIC; the sender waits for its sends inside its op);
    - ``stages``: each stage's op costs; ``ep_dispatch_s`` / ``ep_combine_s``: one MoE layer's forward all-to-alls;
    - ``layers``: where a layer's time goes, per layer kind the model has.
    """

    step_s: float
    pipeline_s: float
    optimizer_s: float
    breakdown: PhaseBreakdown
    max_bubble_s: float
    tokens_per_step: float
    world_size: int
    flops_per_token_noncausal: float
    flops_per_token_causal: float
    bf16_peak_flops: float
    reduce_scatter_s: float
    all_gather_s: float
    adam_s: float
    p2p_s: float
    ep_dispatch_s: float
    ep_combine_s: float
    stages: tuple[StageCost, ...]
    layers: tuple[LayerCost, ...] = ()
    #: the fabric the EP all-to-alls ran on (``dsctl.steptime.ep.fabric_name``): a plan's kind (MPFT, MRFT, ...),
    #: nodes and oversubscription, or the node profile's closed form
    fabric: str = "node profile (closed form)"

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_s

    @property
    def tokens_per_day(self) -> float:
        return self.tokens_per_s * DAY_S

    @property
    def tflops_noncausal(self) -> float:
        return self.flops_per_token_noncausal * self.tokens_per_s / self.world_size / 1e12

    @property
    def tflops_causal(self) -> float:
        return self.flops_per_token_causal * self.tokens_per_s / self.world_size / 1e12

    @property
    def mfu_noncausal(self) -> float:
        return self.tflops_noncausal * 1e12 / self.bf16_peak_flops

    @property
    def mfu_causal(self) -> float:
        return self.tflops_causal * 1e12 / self.bf16_peak_flops

    def gpu_hours(self, tokens: float) -> float:
        """GPU hours to train ``tokens`` tokens at this step time."""
        return tokens / self.tokens_per_s * self.world_size / 3600.0

    def to_data(self) -> dict[str, Any]:
        b = self.breakdown
        return {
            "step_s": self.step_s, "pipeline_s": self.pipeline_s, "optimizer_s": self.optimizer_s,
            "breakdown": {"rank": b.rank, "1f_s": b.one_f_s, "1b_s": b.one_b_s, "1w_s": b.one_w_s,
                          "overlapped_fb_s": b.overlapped_fb_s, "bubble_s": b.bubble_s, "optimizer_s": b.optimizer_s,
                          "ops": {"f": b.num_f, "b": b.num_b, "w": b.num_w, "fb": b.num_fb}},
            "max_bubble_s": self.max_bubble_s, "tokens_per_step": self.tokens_per_step,
            "tokens_per_day": self.tokens_per_day,
            "tflops_per_gpu": {"noncausal": self.tflops_noncausal, "causal": self.tflops_causal,
                               "convention": "attention FLOPs counted over the full matrix (noncausal) or its "
                                             "lower triangle (causal); MTP excluded; forward + backward = 3x "
                                             "forward"},
            "mfu": {"noncausal": self.mfu_noncausal, "causal": self.mfu_causal, "peak": "BF16 dense"},
            "optimizer": {"reduce_scatter_s": self.reduce_scatter_s, "all_gather_s": self.all_gather_s,
                          "adam_s": self.adam_s},
            "p2p_s": self.p2p_s, "ep": {"dispatch_s": self.ep_dispatch_s, "combine_s": self.ep_combine_s},
            "stages": [{"stage": s.stage, "f_s": s.f_s, "i_s": s.i_s, "w_s": s.w_s, "comm_f_s": s.comm_f_s,
                        "comm_b_s": s.comm_b_s} for s in self.stages],
            "layers": [{name: getattr(x, name) for name in LayerCost.__dataclass_fields__} for x in self.layers],
        }


#: rental price per H800 GPU hour the DeepSeek-V3 tech report's Table 1 assumes, USD
DEFAULT_GPU_HOUR_USD = 2.0


@dataclass(frozen=True)
class TokenBudget:
    """What training ``tokens`` tokens costs at a predicted step time: GPU hours, wall-clock days, dollars."""

    tokens: float
    gpu_hours: float
    days: float
    gpu_hour_usd: float
    cost_usd: float


def token_budget(step: StepTime, tokens: float, gpu_hour_usd: float = DEFAULT_GPU_HOUR_USD) -> TokenBudget:
    """GPU hours (``tokens / tokens_per_s x world / 3600``), days and cost of ``tokens`` trained tokens."""
    hours = step.gpu_hours(tokens)
    return TokenBudget(tokens, hours, hours / step.world_size / 24.0, gpu_hour_usd, hours * gpu_hour_usd)
