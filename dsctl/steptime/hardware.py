"""Achieved GPU rates per op class, from a node profile (``gpu:`` section, docs/steptime.md).

Every rate is per GPU: FLOP/s for compute, bytes/s for memory. ``comm_slowdown`` is how much longer compute takes
while communication kernels hold ``comm_sms`` of the ``sms`` streaming multiprocessors (DeepEP's normal kernels
do: DeepSeek-V3 keeps 20 of 132 SMs for them, tech report section 3.2.2).
"""

from __future__ import annotations

from dataclasses import dataclass

from dsctl.profiles.schema import NodeProfile

#: H100/H800 SXM5 HBM3 bandwidth (NVIDIA data sheet), used when a profile gives no ``hbm_bandwidth``
DEFAULT_HBM_BYTES_PER_S = 3.35e12
#: Hopper SXM5 SM count (NVIDIA H100 whitepaper), used when a profile gives no ``sms``
DEFAULT_SMS = 132


@dataclass(frozen=True)
class GpuRates:
    """Achieved rates of one GPU.

    - ``fp8_gemm_flops`` / ``moe_gemm_flops``: FP8 dense-layer and grouped-expert GEMM ceilings, FLOP/s;
    - ``bf16_gemm_flops``: BF16 GEMM ceiling (output head, router), FLOP/s;
    - ``attention_forward_flops`` / ``attention_backward_flops``: attention core, FLOP/s of the kernel's work;
    - ``hbm_bytes_per_s``: achieved memory bandwidth for memory-bound work;
    - ``sms`` / ``comm_sms``: SMs per GPU and SMs held by communication kernels while they run.
    """

    fp8_gemm_flops: float
    moe_gemm_flops: float
    bf16_gemm_flops: float
    attention_forward_flops: float
    attention_backward_flops: float
    hbm_bytes_per_s: float
    sms: int
    comm_sms: int
    #: bytes per GEMM input element in the training precision: 1 (FP8) or 2 (BF16)
    gemm_in_bytes: float = 1.0
    #: HBM bandwidth of the GEMMs' memory phase (bytes/s); 0 = ``hbm_bytes_per_s``. The same profile figure:
    #: a field of its own so that calibration (``calibrate.py``) can tell GEMM kernels' time from elementwise
    gemm_hbm_bytes_per_s: float = 0.0
    #: NVLink bytes/s per direction per GPU that collectives achieve (the profile's
    #: ``nvlink.achievable_per_direction``): tensor parallelism's all-gathers and reduce-scatters run at it
    nvlink_bytes_per_s: float = 0.0

    @property
    def gemm_hbm(self) -> float:
        """Bytes/s of a GEMM's memory phase."""
        return self.gemm_hbm_bytes_per_s or self.hbm_bytes_per_s

    @property
    def comm_slowdown(self) -> float:
        """Compute time factor while communication kernels run: ``sms / (sms - comm_sms)`` (132/112 = 1.18)."""
        return self.sms / (self.sms - self.comm_sms)


def gpu_rates(node: NodeProfile, precision: str = "fp8") -> GpuRates:
    """Achieved rates of ``node``'s GPUs: dense peaks (TFLOPS) times the profile's achieved fractions.

    ``precision`` is the model's training precision: with "bf16" the FP8 GEMM classes run at the BF16 GEMM rate
    on 2-byte inputs.
    """
    a = node.achieved
    bf16 = node.bf16_tflops * 1e12
    fp8 = (node.fp8_tflops or 2 * node.bf16_tflops) * 1e12
    hbm = node.hbm_bytes_per_s or DEFAULT_HBM_BYTES_PER_S
    sms = node.num_sms or DEFAULT_SMS
    bf16_gemm = bf16 * a.bf16_gemm
    low = precision == "fp8"
    return GpuRates(
        fp8_gemm_flops=fp8 * a.fp8_gemm if low else bf16_gemm, moe_gemm_flops=fp8 * a.moe_gemm if low else bf16_gemm,
        bf16_gemm_flops=bf16_gemm, gemm_in_bytes=1.0 if low else 2.0,
        attention_forward_flops=bf16 * a.attention_forward, attention_backward_flops=bf16 * a.attention_backward,
        hbm_bytes_per_s=hbm * a.hbm, sms=sms, comm_sms=min(node.num_comm_sms, sms - 1),
        nvlink_bytes_per_s=node.nvlink_achievable_bytes_per_s,
    )
