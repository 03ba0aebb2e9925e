"""The model arithmetic: every `dsctl model` computation for the four built-in models."""

from __future__ import annotations

from typing import Any

from benchmarks.case import Case
from dsctl.model.cost import resolve_throughput, training_cost
from dsctl.model.ep import ep_speed_limit
from dsctl.model.flops import training_flops
from dsctl.model.kvcache import kv_cache_report
from dsctl.model.memory import memory_report
from dsctl.model.params import count_parameters
from dsctl.profiles.loader import ProfileStore
from dsctl.profiles.schema import ModelProfile

NAMES = ("deepseek-v3", "deepseek-v2", "qwen2.5-72b", "llama3.1-405b")


def _models() -> list[ModelProfile]:
    store = ProfileStore()
    return [store.model(n) for n in NAMES]


def _params(models: list[ModelProfile]) -> int:
    return sum(count_parameters(m).total for m in models)


def _everything(models: list[ModelProfile]) -> Any:
    kv = kv_cache_report(models, dtype="bf16", dtype_bytes=2, context_tokens=4096, batch=1)
    out = [kv]
    for m in models:
        out.append(training_flops(m))
        out.append(memory_report(m))
        out.append(training_cost(m, 14.8e12, resolve_throughput(m), extra_gpu_hours=[119e3, 5e3]))
    out.append(ep_speed_limit(bandwidth_bytes_per_s=50e9))
    return out


CASES = [
    Case("model: count parameters, 4 models", _models, _params, target_s=0.005),
    Case("model: kv-cache+flops+memory+cost+ep, 4 models", _models, _everything, target_s=0.02),
]
