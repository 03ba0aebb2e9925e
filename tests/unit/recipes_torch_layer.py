"""The reduced DeepSeek-V3-style layer of tests/unit/test_recipes_torch.py and its saved-tensor measurement, in
PyTorch (imported only by that test's fixture, so that collecting the default test run never imports torch).

Each activation recipe is a way of running the same modules: plain autograd; a recomputed region that keeps only
its inputs; an FP8/E5M6 cache that keeps a quantized input with FP32 1x128 tile scales; FlashAttention's contract
of keeping q, k, v, o and the log-sum-exp; a fused RMSNorm's of keeping its input and rstd.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tests.unit.test_recipes_torch import (
    EXPERTS,
    HEADS,
    INTER,
    KV_LORA,
    NOPE,
    Q_LORA,
    ROPE,
    SHARED,
    TILE,
    TOKENS,
    TOP_K,
    V_DIM,
    H,
)

F = torch.nn.functional


# ------------------------------------------------------------------------------------------ recipe building blocks


class Recompute(torch.autograd.Function):  # type: ignore[misc]
    """Run ``fn`` without keeping its internals; keep only its tensor inputs and run it again in the backward."""

    @staticmethod
    def forward(ctx: Any, fn: Callable[..., Any], *inputs: Any) -> Any:
        ctx.fn = fn
        ctx.save_for_backward(*inputs)
        with torch.no_grad():
            return fn(*inputs)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        inputs = [x.detach().requires_grad_(x.requires_grad) for x in ctx.saved_tensors]
        with torch.enable_grad():
            out = ctx.fn(*inputs)
        outs = out if isinstance(out, tuple) else (out,)
        pairs = [(o, g) for o, g in zip(outs, grads, strict=True) if g is not None and o.requires_grad]
        torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, *[x.grad for x in inputs])


def quantize(x: Any, fmt: str) -> tuple[Any, Any]:
    """``x`` stored in ``fmt`` with one FP32 scale per 1x128 tile: (payload, scales)."""
    tiles = x.detach().float().reshape(-1, TILE)
    scales = tiles.abs().amax(dim=1).clamp(min=1e-12) / 448.0
    if fmt == "fp8":
        return (tiles / scales[:, None]).to(torch.float8_e4m3fn).reshape(x.shape), scales
    # E5M6: 12 bits per value, 3 bytes per 2 values (no native dtype: the payload is packed bytes)
    return torch.empty(x.numel() * 3 // 2, dtype=torch.uint8), scales


class Cached(torch.autograd.Function):  # type: ignore[misc]
    """``fn(x, *rest)`` keeping ``x`` quantized to ``fmt`` (FP8 or E5M6, tile-scaled) and ``rest`` as they are;
    the backward dequantizes ``x`` and runs ``fn`` again."""

    @staticmethod
    def forward(ctx: Any, fn: Callable[..., Any], fmt: str, x: Any, *rest: Any) -> Any:
        payload, scales = quantize(x, fmt)
        ctx.fn, ctx.fmt, ctx.shape, ctx.dtype = fn, fmt, x.shape, x.dtype
        ctx.save_for_backward(payload, scales, *rest)
        with torch.no_grad():
            return fn(x, *rest)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        payload, scales, *rest = ctx.saved_tensors
        if ctx.fmt == "fp8":
            x = (payload.float().reshape(-1, TILE) * scales[:, None]).reshape(ctx.shape).to(ctx.dtype)
        else:
            x = torch.zeros(ctx.shape, dtype=ctx.dtype)
        x = x.requires_grad_()
        rest = [r.detach().requires_grad_(r.requires_grad) for r in rest]
        with torch.enable_grad():
            out = ctx.fn(x, *rest)
        outs = out if isinstance(out, tuple) else (out,)
        pairs = [(o, g) for o, g in zip(outs, grads, strict=True) if g is not None]
        torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None, x.grad, *[r.grad for r in rest])


def attention_core(q: Any, k: Any, v: Any) -> tuple[Any, Any]:
    """Causal attention over ``(heads, T, d)``: output and FP32 log-sum-exp per head and token."""
    scores = (q.float() @ k.float().transpose(-1, -2)) / q.shape[-1] ** 0.5
    mask = torch.ones(q.shape[1], q.shape[1], dtype=torch.bool).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    return (torch.exp(scores - lse[..., None]) @ v.float()).to(q.dtype), lse


class FlashAttention(torch.autograd.Function):  # type: ignore[misc]
    """FlashAttention's contract (Dao 2023, algorithm 1): keep q, k, v, the output and the log-sum-exp."""

    @staticmethod
    def forward(ctx: Any, q: Any, k: Any, v: Any) -> Any:
        with torch.no_grad():
            out, lse = attention_core(q, k, v)
            out = out.transpose(0, 1).reshape(TOKENS, -1)  # token-major, as the output projection reads it
        ctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        q, k, v, _, _ = (t.detach() for t in ctx.saved_tensors)
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        with torch.enable_grad():
            out = attention_core(q, k, v)[0].transpose(0, 1).reshape(TOKENS, -1)
        torch.autograd.backward(out, grad)
        return q.grad, k.grad, v.grad


class UpProjectedAttention(torch.autograd.Function):  # type: ignore[misc]
    """DeepSeek's MLA region: keep the compressed latents and the log-sum-exp; q, k, v are recomputed by the
    up-projections in the backward, the output is kept by the next GEMM's cache."""

    @staticmethod
    def forward(ctx: Any, layer: Layer, q_c: Any, kv: Any) -> Any:
        with torch.no_grad():
            out, lse = attention_core(*layer.up_project(q_c, kv))
        ctx.layer = layer
        ctx.save_for_backward(q_c, kv, lse)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        q_c, kv, _ = (t.detach().requires_grad_() for t in ctx.saved_tensors)
        with torch.enable_grad():
            out, _ = attention_core(*ctx.layer.up_project(q_c, kv))
        torch.autograd.backward(out, grad)
        return None, q_c.grad, kv.grad


# ----------------------------------------------------------------------------------------------- the layer


class RMSNorm(torch.autograd.Function):  # type: ignore[misc]
    """A fused RMSNorm kernel's contract (Apex/Transformer Engine): keep the input and one FP32 rstd per row."""

    @staticmethod
    def forward(ctx: Any, x: Any, weight: Any) -> Any:
        rstd = torch.rsqrt(x.float().pow(2).mean(-1) + 1e-6)
        ctx.save_for_backward(x, rstd, weight)
        return (x.float() * rstd[..., None]).to(x.dtype) * weight

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        x, rstd, weight = ctx.saved_tensors
        normed = x.float() * rstd[..., None]
        g = grad.float() * weight.float()
        dx = rstd[..., None] * (g - normed * (g * normed).mean(-1, keepdim=True))
        return dx.to(x.dtype), (grad.float() * normed).reshape(-1, x.shape[-1]).sum(0).to(weight.dtype)


def rms_norm(x: Any, weight: Any) -> Any:
    return RMSNorm.apply(x, weight)


class Layer(torch.nn.Module):  # type: ignore[misc]
    """One MLA + MoE layer (reference structure), BF16."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)

        def lin(n_in: int, n_out: int) -> Any:
            return torch.nn.Linear(n_in, n_out, bias=False, dtype=torch.bfloat16)

        self.attn_norm = torch.nn.Parameter(torch.ones(H, dtype=torch.bfloat16))
        self.wq_a, self.q_norm = lin(H, Q_LORA), torch.nn.Parameter(torch.ones(Q_LORA, dtype=torch.bfloat16))
        self.wq_b = lin(Q_LORA, HEADS * (NOPE + ROPE))
        self.wkv_a, self.kv_norm = lin(H, KV_LORA + ROPE), torch.nn.Parameter(torch.ones(KV_LORA, dtype=torch.bfloat16))
        self.wkv_b = lin(KV_LORA, HEADS * (NOPE + V_DIM))
        self.wo = lin(HEADS * V_DIM, H)
        self.ffn_norm = torch.nn.Parameter(torch.ones(H, dtype=torch.bfloat16))
        self.gate = torch.nn.Parameter(torch.randn(EXPERTS, H, dtype=torch.bfloat16) * 0.05)
        self.experts = torch.nn.ModuleList(
            torch.nn.ModuleList([lin(H, INTER), lin(H, INTER), lin(INTER, H)]) for _ in range(EXPERTS + SHARED))
        angles = torch.arange(TOKENS)[:, None] * torch.arange(1, ROPE // 2 + 1)[None, :] * 0.01
        self.register_buffer("freqs_cos", torch.cos(angles).to(torch.bfloat16))
        self.register_buffer("freqs_sin", torch.sin(angles).to(torch.bfloat16))

    def rope(self, x: Any) -> Any:
        """Rotary embedding over the last dimension (pairs), multiplications by constant buffers only."""
        a, b = x[..., 0::2], x[..., 1::2]
        cos, sin = self.freqs_cos, self.freqs_sin
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)

    def down_project(self, x: Any) -> tuple[Any, Any]:
        xn = rms_norm(x, self.attn_norm)
        return self.wq_a(xn), self.wkv_a(xn)

    def up_project(self, q_c: Any, kv: Any) -> tuple[Any, Any, Any]:
        q = self.wq_b(rms_norm(q_c, self.q_norm)).view(TOKENS, HEADS, NOPE + ROPE)
        q = torch.cat((q[..., :NOPE], self.rope(q[..., NOPE:].transpose(0, 1)).transpose(0, 1)), dim=-1)
        kv_c, k_pe = kv.split((KV_LORA, ROPE), dim=-1)
        kvb = self.wkv_b(rms_norm(kv_c, self.kv_norm)).view(TOKENS, HEADS, NOPE + V_DIM)
        k_nope, v = kvb.split((NOPE, V_DIM), dim=-1)
        k = torch.cat((k_nope, self.rope(k_pe).unsqueeze(1).expand(TOKENS, HEADS, ROPE)), dim=-1)
        return q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1).contiguous()

    def expert(self, e: int, x: Any) -> Any:
        w1, w3, w2 = self.experts[e]
        return w2(F.silu(w1(x)) * w3(x))

    def gate_up(self, e: int, x: Any) -> tuple[Any, Any]:
        w1, w3, _ = self.experts[e]
        return w1(x), w3(x)

    def down_weighted(self, e: int, g: Any, u: Any, probs: Any) -> Any:
        return self.experts[e][2]((F.silu(g) * u) * probs)

    def logits(self, h1: Any) -> Any:
        return F.linear(rms_norm(h1, self.ffn_norm), self.gate)

    def route(self, logits: Any) -> tuple[Any, Any, Any]:
        scores = logits.float().sigmoid()
        idx = scores.topk(TOP_K, dim=-1).indices
        weights = scores.gather(1, idx)
        return scores, idx, weights / weights.sum(-1, keepdim=True)

    # -------------------------------------------------------------------------------------------- recipes

    def plain(self, x: Any, core: Callable[..., Any]) -> Any:
        """``none`` (core = FlashAttention) and ``selective`` (core recomputed from q, k, v)."""
        q_c, kv = self.down_project(x)
        q, k, v = self.up_project(q_c, kv)
        o = core(q, k, v)
        h1 = x + self.wo(o)
        hn = rms_norm(h1, self.ffn_norm)
        _, idx, weights = self.route(F.linear(hn, self.gate))
        y = torch.zeros_like(h1)
        for e in range(EXPERTS):
            rows, slot = torch.where(idx == e)
            out = (self.expert(e, hn[rows]) * weights[rows, slot, None]).to(y.dtype)
            y = y.index_put((rows,), out, accumulate=True)  # index_add would keep ``out`` too
        for s in range(SHARED):
            y = y + self.expert(EXPERTS + s, hn)
        return h1 + y

    def none(self, x: Any) -> Any:
        return self.plain(x, FlashAttention.apply)

    def selective(self, x: Any) -> Any:
        return self.plain(x, lambda q, k, v: Recompute.apply(
            lambda *t: attention_core(*t)[0].transpose(0, 1).reshape(TOKENS, -1), q, k, v))

    def full_recompute(self, x: Any) -> Any:
        return Recompute.apply(self.none, x)

    def deepseek(self, x: Any) -> Any:
        q_c, kv = Recompute.apply(self.down_project, x)
        o = UpProjectedAttention.apply(self, q_c, kv).transpose(0, 1).reshape(TOKENS, HEADS * V_DIM)
        h1 = x + Cached.apply(self.wo, "e5m6", o)
        _, idx, weights = self.route(Recompute.apply(self.logits, h1))
        hn = Recompute.apply(lambda t: rms_norm(t, self.ffn_norm), h1)
        y = torch.zeros_like(h1)
        for e in range(EXPERTS):
            rows, slot = torch.where(idx == e)
            g, u = Cached.apply(lambda t, e=e: self.gate_up(e, t), "fp8", hn[rows])
            probs = weights[rows, slot, None].to(torch.bfloat16)
            y = y.index_put((rows,), self._down(e, g, u, probs), accumulate=True)
        for s in range(SHARED):
            g, u = Recompute.apply(lambda t, s=s: self.gate_up(EXPERTS + s, rms_norm(t, self.ffn_norm)), h1)
            y = y + self._down(EXPERTS + s, g, u, None)
        return h1 + y

    def _down(self, e: int, g: Any, u: Any, probs: Any) -> Any:
        """SwiGLU (x probs) and the down projection, keeping the two SwiGLU inputs in FP8 (one cache each)."""
        gu = torch.cat((g, u), dim=-1)
        if probs is None:
            return Cached.apply(lambda t: self.experts[e][2](F.silu(t[..., :INTER]) * t[..., INTER:]), "fp8", gu)
        return Cached.apply(lambda t, p: self.down_weighted(e, t[..., :INTER], t[..., INTER:], p), "fp8", gu, probs)


def measure(layer: Layer, recipe: str) -> float:
    """Bytes per token the layer keeps for its backward under ``recipe`` (storages counted once)."""
    skip = {p.untyped_storage().data_ptr() for p in layer.parameters()}
    skip |= {b.untyped_storage().data_ptr() for b in layer.buffers()}
    storages: dict[int, int] = {}

    def pack(t: Any) -> Any:
        storage = t.untyped_storage()
        if storage.data_ptr() not in skip:
            storages[storage.data_ptr()] = storage.nbytes()
        return t

    x = torch.randn(TOKENS, H, dtype=torch.bfloat16, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = getattr(layer, recipe.replace("-", "_"))(x)
    out.float().sum().backward()  # the recipe's backward runs (its regions recompute without error)
    assert x.grad is not None and torch.isfinite(x.grad.float()).all()
    return sum(storages.values()) / TOKENS
