"""Shape-aware GEMM time: a roofline whose compute and memory phases do not overlap.

``t = 2 M N K / flops + ((M K + K N) in_bytes + M N out_bytes) / hbm``. Small-M or small-K GEMMs are
memory-bound and run far below the ceiling, as DeepGEMM's tables show on H800 (206-289 TFLOPS at M = 64 against
1,000+ at M = 4,096). Checked against DeepGEMM's M = 4,096 rows for DeepSeek-V3's shapes to about 15%
(docs/steptime.md).
"""

from __future__ import annotations

from dsctl.model.recipes import SCALE_BYTES, TILE_VALUES

#: bytes per element
FP8_BYTES = 1.0
BF16_BYTES = 2.0
FP32_BYTES = 4.0
#: bytes an FP8 activation element occupies with its share of the tile scale (one FP32 scale per 1x128 tile,
#: DeepSeek-V3 tech report 3.3.1; the recipes' figures), written and read with the FP8 values: 1.03125
FP8_SCALED_BYTES = FP8_BYTES + SCALE_BYTES / TILE_VALUES
#: bytes per weight-gradient element a micro-batch's wgrad GEMM moves: it reads the running FP32 gradient and
#: writes it back (gradients accumulate over micro-batches in FP32, DeepSeek-V3 tech report 3.3)
GRAD_ACCUMULATE_BYTES = 2 * FP32_BYTES


def gemm_seconds(m: float, n: float, k: float, flops: float, hbm_bytes_per_s: float,
                 in_bytes: float = FP8_BYTES, out_bytes: float = BF16_BYTES) -> float:
    """Seconds of one ``(M x K) @ (K x N)`` product at ceiling ``flops`` (FLOP/s) and ``hbm_bytes_per_s``."""
    if m <= 0 or n <= 0 or k <= 0:
        return 0.0
    compute = 2.0 * m * n * k / flops
    memory = ((m * k + k * n) * in_bytes + m * n * out_bytes) / hbm_bytes_per_s
    return compute + memory


def linear_seconds(tokens: float, n_out: float, k_in: float, flops: float, hbm_bytes_per_s: float,
                   in_bytes: float = FP8_BYTES) -> tuple[float, float, float]:
    """(forward, input-gradient, weight-gradient) seconds of a linear layer ``k_in -> n_out`` over ``tokens``.

    Forward ``(T x K) @ (K x N)``; input gradient ``(T x N) @ (N x K)``; weight gradient ``(N x T) @ (T x K)``
    accumulated into the FP32 gradient (read and written: ``GRAD_ACCUMULATE_BYTES`` per element).
    """
    forward = gemm_seconds(tokens, n_out, k_in, flops, hbm_bytes_per_s, in_bytes)
    dgrad = gemm_seconds(tokens, k_in, n_out, flops, hbm_bytes_per_s, in_bytes)
    wgrad = gemm_seconds(n_out, k_in, tokens, flops, hbm_bytes_per_s, in_bytes, GRAD_ACCUMULATE_BYTES)
    return forward, dgrad, wgrad
