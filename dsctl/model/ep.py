"""Upper bound on expert-parallel decode speed set by the network (the paper's section 2.3.2).

Each EP step sends every token's hidden state to ``experts_per_token`` devices (dispatch, ``dispatch_bytes``
per value) and brings the results back (combine, ``combine_bytes`` per value)::

    bytes_per_step = (dispatch_bytes + combine_bytes) * tokens_per_device * experts_per_token * hidden
    comm_seconds_per_step = bytes_per_step / bandwidth_bytes_per_s
    layer_seconds = micro_batches * comm_seconds_per_step   # dual micro-batch overlap, compute hidden
    tpot_seconds = layers * layer_seconds;  tokens_per_second = 1 / tpot_seconds

Network latency and GPU inefficiency at small batch are ignored, as in the paper, so this is a ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass

from dsctl.errors import InputError
from dsctl.model.checks import require_finite_results, require_number


@dataclass(frozen=True)
class EPSpeedLimit:
    """Inputs and the resulting ceiling. Bandwidth in bytes/s, bytes per value and per step in bytes, times in
    seconds."""

    bandwidth_bytes_per_s: float
    tokens_per_device: int
    hidden: int
    experts_per_token: int
    dispatch_bytes: float
    combine_bytes: float
    layers: int
    micro_batches: int
    bytes_per_step: float
    comm_seconds_per_step: float
    layer_seconds: float
    tpot_seconds: float
    tokens_per_second: float


def ep_speed_limit(
    *,
    bandwidth_bytes_per_s: float,
    tokens_per_device: int = 32,
    hidden: int = 7000,
    experts_per_token: int = 9,
    dispatch_bytes: float = 1.0,
    combine_bytes: float = 2.0,
    layers: int = 61,
    micro_batches: int = 2,
) -> EPSpeedLimit:
    """Communication-bound time per output token (see the module docstring)."""
    positives = [
        (bandwidth_bytes_per_s, "link_bandwidth"),
        (tokens_per_device, "tokens_per_device"),
        (hidden, "hidden"),
        (experts_per_token, "experts_per_token"),
        (layers, "layers"),
        (micro_batches, "micro_batches"),
    ]
    for value, option in positives:
        require_number(value, option, positive=True)
    for value, option in ((dispatch_bytes, "dispatch_bytes"), (combine_bytes, "combine_bytes")):
        require_number(value, option, non_negative=True)
    if dispatch_bytes + combine_bytes <= 0:
        raise InputError("and {combine_bytes} cannot both be 0", field="dispatch_bytes", mentions=("combine_bytes",))
    options = ["--nic-gbps/--bandwidth-bytes-per-s", "--tokens-per-device", "--hidden", "--experts-per-token",
               "--dispatch-bytes", "--combine-bytes", "--layers", "--micro-batches"]
    per_step = (dispatch_bytes + combine_bytes) * float(tokens_per_device) * float(experts_per_token) * float(hidden)
    comm_s = per_step / bandwidth_bytes_per_s
    layer_s = micro_batches * comm_s
    tpot_s = layers * layer_s
    require_finite_results({"bytes per step": per_step, "time per output token": tpot_s}, options,
                           positive=["bytes per step", "time per output token"])
    tokens_per_s = 1.0 / tpot_s
    require_finite_results({"tokens per second": tokens_per_s}, options)
    return EPSpeedLimit(
        bandwidth_bytes_per_s=bandwidth_bytes_per_s,
        tokens_per_device=tokens_per_device,
        hidden=hidden,
        experts_per_token=experts_per_token,
        dispatch_bytes=dispatch_bytes,
        combine_bytes=combine_bytes,
        layers=layers,
        micro_batches=micro_batches,
        bytes_per_step=per_step,
        comm_seconds_per_step=comm_s,
        layer_seconds=layer_s,
        tpot_seconds=tpot_s,
        tokens_per_second=tokens_per_s,
    )


def link_bandwidth_bytes_per_s(nic_gbps: float, bandwidth_bytes_per_s: float | None = None) -> float:
    """Bytes/s of the EP link: ``bandwidth_bytes_per_s`` when given, else ``nic_gbps * 1e9 / 8``."""
    if bandwidth_bytes_per_s is not None:
        require_number(bandwidth_bytes_per_s, "bandwidth_bytes_per_s", positive=True)
        bytes_per_s = bandwidth_bytes_per_s
        option = "--bandwidth-bytes-per-s"
    else:
        require_number(nic_gbps, "nic_gbps", positive=True)
        bytes_per_s = nic_gbps * 1e9 / 8.0
        option = "--nic-gbps"
    require_finite_results({"link bandwidth in bytes/s": bytes_per_s}, [option],
                           positive=["link bandwidth in bytes/s"])
    return bytes_per_s
