"""The predicted MFU of a run of ``num_gpus`` GPUs, for ``dsctl model cost`` when no ``--mfu`` is given.

The run is planned as ``dsctl launch --nodes num_gpus / gpus_per_node`` would plan it (default layout, batch and
schedule) and its step predicted; the MFU is the causal one (attention counted as its lower triangle), the
convention of the paper's Table 2 (250 GFLOP/token) that ``model cost`` divides by.
"""

from __future__ import annotations

from dataclasses import dataclass

from dsctl.errors import InputError
from dsctl.launch.plan import plan_launch
from dsctl.launch.request import LaunchRequest
from dsctl.profiles.schema import ModelProfile, NodeProfile


@dataclass(frozen=True)
class PredictedMfu:
    """``mfu`` (causal, of the BF16 dense peak ``gpu_tflops``) and ``note`` naming the layout it was predicted on."""

    mfu: float
    gpu_tflops: float
    note: str


def predicted_mfu(model: ModelProfile, node: NodeProfile, num_gpus: int, seq_len: int = 4096) -> PredictedMfu:
    """Plan ``num_gpus`` GPUs of ``node`` for ``model`` and predict its step; InputError if it cannot."""
    if num_gpus < node.num_gpus or num_gpus % node.num_gpus:
        raise InputError(f"{num_gpus}: predicting the MFU needs whole {node.name} nodes "
                         f"({node.num_gpus} GPUs each)", field="gpus",
                         hint="give --gpus as a multiple of that, or --mfu")
    plan = plan_launch(model, node, LaunchRequest(num_nodes=num_gpus // node.num_gpus, seq_len=seq_len))
    step = plan.step_time
    if step is None:
        why = "; ".join(n for n in plan.notes if "step-time" in n) or "the plan has no step-time prediction"
        raise InputError(f"{num_gpus}: no MFU prediction ({why})", field="gpus", hint="give --mfu")
    note = (f"predicted MFU {step.mfu_causal:.2%} (causal) of {plan.layout.describe()} {plan.schedule} on "
            f"{node.name}, step {step.step_s:.2f} s (dsctl launch --nodes {plan.num_nodes} --dry-run)")
    return PredictedMfu(step.mfu_causal, node.bf16_tflops, note)
