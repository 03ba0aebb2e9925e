"""dsctl model ...: exit codes, JSON keys and error messages through the real entry point."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

Cli = Callable[..., Any]


def test_kv_cache_table1_default(cli: Cli) -> None:
    r = cli("model", "kv-cache", "--format", "json")
    assert r.exit_code == 0, r.stderr
    data = r.json()
    assert {"bytes_per_token", "bytes_per_sequence", "bytes_total", "models", "dsctl"} <= data.keys()
    assert [m["bytes_per_token"] for m in data["models"]] == [70_272, 327_680, 516_096]
    assert [round(m["ratio_to_first"], 2) for m in data["models"]] == [1.0, 4.66, 7.34]
    assert data["bytes_per_token"] == 70_272


def test_kv_cache_options(cli: Cli) -> None:
    r = cli("model", "kv-cache", "-m", "qwen2.5-72b", "-m", "deepseek-v3", "--context", "128K",
            "--dtype", "fp8", "--batch", "4", "-f", "json")
    assert r.exit_code == 0, r.stderr
    data = r.json()
    assert data["context_tokens"] == 128_000 and data["batch"] == 4
    assert data["bytes_per_token"] == 163_840
    assert data["bytes_total"] == 163_840 * 128_000 * 4
    assert round(data["models"][1]["ratio_to_first"], 4) == round(35_136 / 163_840, 4)


def test_kv_cache_table_view(cli: Cli) -> None:
    r = cli("model", "kv-cache")
    assert r.exit_code == 0
    assert "70,272" in r.stdout and "7.34x" in r.stdout


def test_flops_json(cli: Cli) -> None:
    r = cli("model", "flops", "--format", "json")
    assert r.exit_code == 0, r.stderr
    data = r.json()
    assert data["flops_per_token"] == pytest.approx(250e9, rel=0.02)
    assert data["causal"] is True and data["seq_len"] == 4096
    r2 = cli("model", "flops", "-m", "llama3.1-405b", "--seq-len", "8192", "--non-causal", "-f", "json").json()
    assert r2["causal"] is False and r2["flops_per_token"] > 2448e9


def test_cost_reproduces_table1(cli: Cli) -> None:
    r = cli("model", "cost", "--tokens", "14.8T", "--extra-gpu-hours", "119K", "--extra-gpu-hours", "5K",
            "--format", "json")
    assert r.exit_code == 0, r.stderr
    data = r.json()
    assert {"gpu_hours", "days", "cost_usd"} <= data.keys()
    assert data["gpu_hours"] == pytest.approx(2_788_000)
    assert data["cost_usd"] == pytest.approx(5_576_000)
    assert data["train_gpu_hours"] == pytest.approx(2_664_000)
    assert data["gpu_hours_per_trillion_tokens"] == pytest.approx(180_000)
    assert round(data["days_per_trillion_tokens"], 1) == 3.7


def test_cost_flops_path(cli: Cli) -> None:
    data = cli("model", "cost", "--tokens", "1T", "--gpu-tflops", "989", "--mfu", "0.39", "-f", "json").json()
    assert data["throughput_source"] == "flops"
    assert data["gpu_hours"] == pytest.approx(180_000, rel=0.001)
    data = cli("model", "cost", "--tokens", "1T", "--tokens-per-gpu-second", "1000", "--gpus", "1000",
               "--gpu-hour-usd", "3", "-f", "json").json()
    assert data["gpu_hours"] == pytest.approx(1e9 / 3600)
    assert data["cost_usd"] == pytest.approx(3e9 / 3600)


def test_ep_speed_limit(cli: Cli) -> None:
    data = cli("model", "ep-speed-limit", "--format", "json").json()
    assert {"comm_seconds_per_step", "tpot_seconds", "tokens_per_second"} <= data.keys()
    assert data["comm_seconds_per_step"] == pytest.approx(120.96e-6)
    assert round(data["tpot_seconds"] * 1e3, 2) == 14.76
    assert int(data["tokens_per_second"]) == 67
    fast = cli("model", "ep-speed-limit", "--bandwidth-bytes-per-s", "900e9", "-f", "json").json()
    assert fast["bandwidth_bytes_per_s"] == 900e9 and "bandwidth_gbytes" not in fast
    assert fast["comm_seconds_per_step"] == pytest.approx(6.72e-6)
    assert round(fast["tpot_seconds"] * 1e3, 2) == 0.82
    assert fast["tokens_per_second"] == pytest.approx(1200, rel=0.02)
    moe = cli("model", "ep-speed-limit", "--hidden", "7168", "--layers", "58", "-f", "json").json()
    assert moe["hidden"] == 7168 and moe["layers"] == 58


def test_memory(cli: Cli) -> None:
    r = cli("model", "memory", "--format", "json")
    assert r.exit_code == 0, r.stderr
    data = r.json()
    assert data["total_params"] == pytest.approx(671e9, rel=0.01)
    assert data["active_params"] == pytest.approx(36.7e9, rel=0.005)
    assert round(data["active_params"] / 1e9) == 37
    assert data["active_vs_published_pct"] == pytest.approx(-0.20, abs=0.01)
    assert data["active_params_with_embedding_table"] == 37_552_282_624
    assert set(data["weight_bytes"]) == {"fp32", "bf16", "fp8"}
    assert data["bytes_per_routed_expert"]["fp8"] == 44_040_192
    one = cli("model", "memory", "-m", "qwen2.5-72b", "--dtype", "bf16", "-f", "json").json()
    assert set(one["weight_bytes"]) == {"bf16"} and one["bytes_per_routed_expert"]["bf16"] == 0


def test_memory_lists_the_activations_of_a_recipe(cli: Cli) -> None:
    data = cli("model", "memory", "-f", "json").json()
    assert data["recipe"] == "deepseek"  # DeepSeek-V3's profile default
    assert data["activation_bytes_per_token_layer"] == {"deepseek": 156_832, "selective": 607_536,
                                                        "full-recompute": 14_336, "none": 608_048}
    lse = next(t for t in data["activation_tensors"] if t["name"] == "attention log-sum-exp")
    assert lse == {"name": "attention log-sum-exp", "values": 128, "fmt": "fp32"}
    plain = cli("model", "memory", "--recipe", "none", "-f", "json").json()
    assert plain["recipe"] == "none" and len(plain["activation_tensors"]) > len(data["activation_tensors"])
    table = cli("model", "memory", "--recipe", "full-recompute").stdout
    assert "recipe full-recompute" in table and "layer input (attention norm input)" in table
    assert cli("model", "memory", "--recipe", "fp4").exit_code == 2


def test_every_command_has_a_table_view(cli: Cli) -> None:
    for args in (("flops",), ("cost", "--tokens", "14.8T"), ("ep-speed-limit",), ("memory",)):
        r = cli("model", *args)
        assert r.exit_code == 0, (args, r.stderr)
        assert r.stdout.strip()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("kv-cache", "-m", "gpt-9"), "gpt-9"),
        (("kv-cache", "--dtype", "int3"), "--dtype"),
        (("kv-cache", "--context", "lots"), "--context"),
        (("kv-cache", "--context", "1.5"), "--context"),
        (("kv-cache", "--batch", "0"), "--batch"),
        (("flops", "--seq-len", "0"), "--seq-len"),
        (("cost", "--tokens", "many"), "--tokens"),
        (("cost",), "--tokens"),
        (("cost", "--tokens", "1T", "--mfu", "2"), "--mfu"),
        (("cost", "--tokens", "1T", "--tokens-per-gpu-second", "5", "--mfu", "0.3"), "cannot be combined"),
        (("cost", "--tokens", "1T", "--extra-gpu-hours", "x"), "--extra-gpu-hours"),
        (("ep-speed-limit", "--bandwidth-bytes-per-s", "0"), "--bandwidth-bytes-per-s"),
        (("ep-speed-limit", "--layers", "0"), "--layers"),
        (("memory", "--dtype", "int3"), "--dtype"),
    ],
)
def test_bad_input_exits_2(cli: Cli, args: tuple[str, ...], needle: str) -> None:
    r = cli("model", *args, "--format", "json")
    assert r.exit_code == 2, r.stdout
    assert needle in r.stderr
    assert "Traceback" not in r.stderr
    assert r.json()["error"]["exit_code"] == 2 and needle in r.json()["error"]["message"]  # JSON error envelope


HUGE_INT = "9" * 400


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("ep-speed-limit", "--nic-gbps", "inf"), "--nic-gbps"),
        (("ep-speed-limit", "--nic-gbps", "nan"), "--nic-gbps"),
        (("ep-speed-limit", "--bandwidth-bytes-per-s", "1e400"), "--bandwidth-bytes-per-s"),
        (("ep-speed-limit", "--bandwidth-gbytes", "1e300"), "--bandwidth-bytes-per-s"),  # old spelling: 1e309 B/s
        (("ep-speed-limit", "--dispatch-bytes", "nan"), "--dispatch-bytes"),
        (("ep-speed-limit", "--combine-bytes", "inf"), "--combine-bytes"),
        (("ep-speed-limit", "--combine-bytes", "-1"), "--combine-bytes"),
        (("ep-speed-limit", "--hidden", HUGE_INT), "--hidden"),
        (("ep-speed-limit", "--dispatch-bytes", "1e-300", "--combine-bytes", "0", "--bandwidth-bytes-per-s", "1e299"),
         "--dispatch-bytes"),
        (("cost", "--tokens", "14.8T", "--gpu-hour-usd", "nan"), "--gpu-hour-usd"),
        (("cost", "--tokens", "14.8T", "--gpu-hour-usd", "inf"), "--gpu-hour-usd"),
        (("cost", "--tokens", "1e400"), "--tokens"),
        (("cost", "--tokens", "1e30", "--tokens-per-gpu-second", "1e-300"), "--tokens-per-gpu-second"),
        (("cost", "--tokens", "14.8T", "--tokens-per-gpu-second", "inf"), "--tokens-per-gpu-second"),
        (("cost", "--tokens", "14.8T", "--gpu-tflops", "1e300"), "--gpu-tflops"),
        (("cost", "--tokens", "14.8T", "--mfu", "nan"), "--mfu"),
        (("cost", "--tokens", "14.8T", "--gflops-per-token", "inf"), "--gflops-per-token"),
        (("cost", "--tokens", "14.8T", "--extra-gpu-hours", "1e999K"), "--extra-gpu-hours"),
        (("cost", "--tokens", "14.8T", "--gpus", "0"), "--gpus"),
        (("cost", "--tokens", "14.8T", "--seq-len", "-5"), "--seq-len"),
        (("kv-cache", "--context", "1e400"), "--context"),
        (("kv-cache", "--batch", HUGE_INT), "--batch"),
        (("flops", "--seq-len", HUGE_INT), "--seq-len"),
    ],
)
def test_non_finite_inputs_and_overflowing_results_exit_2(cli: Cli, args: tuple[str, ...], needle: str) -> None:
    for fmt in ("json", "table"):
        r = cli("model", *args, "--format", fmt)
        assert r.exit_code == 2, (args, r.stdout, r.stderr)
        assert needle in r.stderr
        assert "Traceback" not in r.stderr and "internal error" not in r.stderr
        assert r.stdout == "" if fmt == "table" else r.json()["error"]["exit_code"] == 2


def test_large_but_finite_inputs_still_work(cli: Cli) -> None:
    r = cli("model", "ep-speed-limit", "--bandwidth-bytes-per-s", "1e209", "-f", "json")
    assert r.exit_code == 0, r.stderr
    assert 0 < r.json()["tokens_per_second"] < float("inf")
    r = cli("model", "cost", "--tokens", "1e30", "-f", "json")
    assert r.exit_code == 0, r.stderr
    assert r.json()["cost_usd"] > 0


def test_the_old_bandwidth_option_is_a_hidden_alias_in_gb_per_s(cli: Cli) -> None:
    """--bandwidth-gbytes (GB/s) still works for one release: rescaled to --bandwidth-bytes-per-s, one note."""
    new = cli("model", "ep-speed-limit", "--bandwidth-bytes-per-s", "900e9", "-f", "json")
    for args in (("--bandwidth-gbytes", "900"), ("--bandwidth-gbytes=900",)):
        old = cli("model", "ep-speed-limit", *args, "-f", "json")
        assert old.exit_code == 0, old.stderr
        assert old.stdout == new.stdout and old.json()["bandwidth_bytes_per_s"] == 900e9
        assert old.stderr == ("warning: --bandwidth-gbytes is deprecated; use --bandwidth-bytes-per-s "
                              "(in bytes/s: 900 GB/s is 900e9)\n")
    assert "--bandwidth-gbytes" not in cli("model", "ep-speed-limit", "--help").stdout
    bad = cli("model", "ep-speed-limit", "--bandwidth-gbytes", "lots")
    assert bad.exit_code == 2 and "--bandwidth-bytes-per-s" in bad.stderr and "Traceback" not in bad.stderr


def test_cost_predicts_the_mfu_when_none_is_given(cli: Cli) -> None:
    """The tech report's 2,664K H800 hours for 14.8T tokens, from dsctl's step-time prediction alone (no MFU):
    today 2,286K (-14.2%, the known gap of docs/steptime.md)."""
    data = cli("model", "cost", "--tokens", "14.8T", "--predict", "-f", "json").json()
    assert data["throughput_source"] == "predicted"
    assert "predicted MFU" in data["throughput_note"] and "PP16 EP64" in data["throughput_note"]
    assert data["train_gpu_hours"] == pytest.approx(2313e3, rel=0.01)  # paper 2,664K
    flops_path = cli("model", "cost", "--tokens", "1T", "--gpu-tflops", "989", "-f", "json").json()
    assert flops_path["throughput_source"] == "predicted" and flops_path["mfu"] == pytest.approx(data["mfu"])


def test_cost_prediction_needs_whole_nodes(cli: Cli) -> None:
    res = cli("model", "cost", "--tokens", "1T", "--predict", "--gpus", "12")
    assert res.exit_code == 2 and "whole h800-hgx nodes" in res.stderr
