"""Table views of the ``dsctl model`` results."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import RenderableType
from rich.table import Table

from dsctl.model.cost import CostReport
from dsctl.model.ep import EPSpeedLimit
from dsctl.model.flops import FlopsReport
from dsctl.model.kvcache import KVCacheReport
from dsctl.model.memory import MemoryReport
from dsctl.output.registry import table_renderer
from dsctl.units import human_bytes, human_count, human_usd


def _kv_table(title: str, rows: list[tuple[str, str]]) -> Table:
    # wide enough for its title, so that the title does not wrap above a narrow two-column table
    table = Table(title=title, show_header=False, title_justify="left", min_width=len(title))
    table.add_column("key", style="bold")
    table.add_column("value", justify="right")
    for key, value in rows:
        table.add_row(key, value)
    return table


@table_renderer(KVCacheReport)
def _kv_cache(result: KVCacheReport) -> Iterable[RenderableType]:
    table = Table(
        title=f"KV cache, {result.dtype}, context {result.context_tokens:,} tokens, batch {result.batch}",
        title_justify="left",
    )
    for column in ("model", "kind", "layers", "B/token", "per seq", "total", "x first"):
        table.add_column(column, justify="left" if column in ("model", "kind") else "right", no_wrap=True)
    for row in result.models:
        table.add_row(row.model, row.attention_kind, str(row.num_layers),
                      f"{row.bytes_per_token:,.0f}", human_bytes(row.bytes_per_sequence),
                      human_bytes(row.bytes_total), f"{row.ratio_to_first:.2f}x")
    yield table


@table_renderer(FlopsReport)
def _flops(result: FlopsReport) -> Iterable[RenderableType]:
    published = (f"{result.published_flops_per_token / 1e9:,.0f} GFLOP ({result.error_pct:+.1f}%)"
                 if result.error_pct is not None else "n/a")
    yield _kv_table(
        f"Training FLOPs per token: {result.model}, seq-len {result.seq_len:,}, "
        f"{'causal' if result.causal else 'non-causal'} attention",
        [
            ("matmul parameters / token", human_count(result.matmul_params)),
            ("matmul (6N)", f"{result.matmul_flops_per_token / 1e9:,.2f} GFLOP"),
            ("attention", f"{result.attention_flops_per_token / 1e9:,.2f} GFLOP"),
            ("forward", f"{result.forward_flops_per_token / 1e9:,.2f} GFLOP"),
            ("forward + backward", f"{result.gflops_per_token:,.2f} GFLOP"),
            ("published", published),
        ],
    )


@table_renderer(CostReport)
def _cost(result: CostReport) -> Iterable[RenderableType]:
    rows = [
        ("tokens", human_count(result.tokens)),
        ("throughput", f"{result.tokens_per_gpu_second:,.1f} tokens/GPU/s ({result.throughput_source})"),
        ("  from", result.throughput_note),
        ("GPU hours / trillion tokens", f"{result.gpu_hours_per_trillion_tokens / 1e3:,.1f}K"),
        (f"days / trillion tokens on {result.num_gpus:,} GPUs", f"{result.days_per_trillion_tokens:.2f}"),
        ("training GPU hours", f"{result.train_gpu_hours / 1e3:,.1f}K ({human_usd(result.train_cost_usd)})"),
    ]
    for extra in result.extra_gpu_hours:
        rows.append(("extra GPU hours", f"{extra / 1e3:,.1f}K"))
    rows += [
        ("total GPU hours", f"{result.gpu_hours / 1e3:,.1f}K"),
        (f"days on {result.num_gpus:,} GPUs", f"{result.days:.1f}"),
        (f"cost at ${result.gpu_hour_usd:g}/GPU-hour", f"${result.cost_usd / 1e6:,.3f}M"),
    ]
    yield _kv_table(f"Training cost: {result.model}", rows)


@table_renderer(EPSpeedLimit)
def _ep(result: EPSpeedLimit) -> Iterable[RenderableType]:
    yield _kv_table(
        "EP decode speed limit (network-bound, latency ignored)",
        [
            ("link bandwidth", f"{result.bandwidth_bytes_per_s / 1e9:g} GB/s"),
            ("bytes per EP step", f"{result.bytes_per_step:,.0f} "
             f"(({result.dispatch_bytes:g}+{result.combine_bytes:g}) B x {result.tokens_per_device} tokens x "
             f"{result.experts_per_token} experts x {result.hidden:,})"),
            ("comm per step", f"{result.comm_seconds_per_step * 1e6:,.2f} us"),
            (f"per layer ({result.micro_batches} micro-batches)", f"{result.layer_seconds * 1e6:,.2f} us"),
            (f"TPOT ({result.layers} layers)", f"{result.tpot_seconds * 1e3:,.2f} ms"),
            ("tokens/s (ceiling)", f"{result.tokens_per_second:,.1f}"),
        ],
    )


@table_renderer(MemoryReport)
def _memory(result: MemoryReport) -> Iterable[RenderableType]:
    def vs(pct: float | None) -> str:
        return f" ({pct:+.2f}% vs published)" if pct is not None else ""

    yield _kv_table(
        f"Parameters: {result.model}",
        [
            ("total (main model)", f"{human_count(result.total_params)}{vs(result.total_vs_published_pct)}"),
            ("active per token", f"{human_count(result.active_params)}{vs(result.active_vs_published_pct)}"),
            ("active, whole embedding table", human_count(result.active_params_with_embedding_table)),
            ("MTP modules", human_count(result.mtp_params)),
            ("total with MTP", human_count(result.total_params_with_mtp)),
            ("embedding / head", f"{human_count(result.embedding_params)} / {human_count(result.head_params)}"),
            ("one routed expert", human_count(result.routed_expert_params)),
            ("routed experts (all layers)", f"{result.num_routed_experts_total:,} = "
             f"{human_count(result.routed_experts_params)}"),
        ],
    )
    table = Table(title="Weight bytes", title_justify="left")
    for column in ("dtype", "total", "with MTP", "active", "per routed expert"):
        table.add_column(column, justify="left" if column == "dtype" else "right")
    for name in result.weight_bytes:
        table.add_row(name, human_bytes(result.weight_bytes[name]),
                      human_bytes(result.weight_bytes_with_mtp[name]),
                      human_bytes(result.active_weight_bytes[name]),
                      human_bytes(result.bytes_per_routed_expert[name], digits=2))
    yield table
    if result.activation_tensors:
        yield _activation_table(result)


def _activation_table(result: MemoryReport) -> RenderableType:
    """What one layer keeps per token for its backward under the recipe, one tensor per row, then the total
    under every recipe."""
    table = Table(title=f"Activations one layer keeps per token, recipe {result.recipe} (bytes)", title_justify="left")
    for column in ("tensor", "format", "values", "scales"):
        table.add_column(column, justify="left" if column in ("tensor", "format") else "right")
    for t in result.activation_tensors:
        table.add_row(t.name, t.fmt, f"{t.value_bytes:,.0f}", f"{t.scale_bytes:,.0f}" if t.scale_bytes else "")
    total = sum(t.value_bytes + t.scale_bytes for t in result.activation_tensors)
    table.add_row("total with scales", "", f"{total:,.0f}", "", style="bold")
    others = result.activation_bytes_per_token_layer or {}
    table.caption = "every recipe: " + ", ".join(f"{name} {value:,.0f}" for name, value in others.items())
    table.caption_justify = "left"
    return table
