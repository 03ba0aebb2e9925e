"""dsctl launch (plan / dry run) and dsctl launch layout through the real entry point."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Cli = Callable[..., Any]


def test_launch_default_searches_by_predicted_step(cli: Cli) -> None:
    """Issue 28: without fixed degrees the plan is the fastest layout that fits of every one evaluated; DeepSeek's
    own PP16 EP64 DualPipe is in the side-by-side rows with its predicted seconds."""
    data = cli("launch", "--nodes", "256", "-f", "json").json()
    search = data["search"]
    rows = search["candidates"]
    # 3,240 (pp, tp) x ep x schedule x micro-batch size combinations x 4 recipes x ZeRO-1/2/3
    assert search["num_evaluated"] == 3240 * 4 * 3 and search["objective"] == "fastest"
    assert [r["step_s"] for r in rows] == sorted(r["step_s"] for r in rows) and len(rows) == 5
    lay = data["layout"]
    assert rows[0]["label"].startswith(f"PP{lay['pp']} EP{lay['ep']} {data['schedule']} ")
    assert rows[0]["why_lost"] == "" and all(r["why_lost"].startswith("+") for r in rows[1:])
    assert data["step_time"]["step_s"] == pytest.approx(rows[0]["step_s"], rel=2e-3)
    assert rows[0]["recipe"] == data["memory"]["recipe"] == "deepseek"
    deepseek = [r for r in rows if r["label"] == "PP16 EP64 dualpipe 120x1 deepseek"]
    assert deepseek and deepseek[0]["step_s"] == pytest.approx(17.31, abs=0.05)
    assert {f["kind"] for f in search["rejected"]} >= {"memory", "schedule rule", "divisibility", "EP span"}
    table = cli("launch", "--nodes", "256")
    assert "Layouts by predicted step (38,880 evaluated" in table.stdout and "Rejected families" in table.stdout


def test_dry_run_writes_nothing_and_says_so(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "plan"
    res = cli("launch", "--nodes", "256", "--pp", "16", "--dry-run", "--out-dir", str(out), "--", "train.py")
    assert res.exit_code == 0 and not out.exists()
    assert "--dry-run: nothing written" in res.stderr and "nothing submitted" in res.stderr


def test_launch_default_plan_json(cli: Cli) -> None:
    res = cli("launch", "--nodes", "256", "--pp", "16", "--ep", "64", "--schedule", "dualpipe", "--format", "json",
              "--dry-run", "--", "train.py", "--lr", "3e-4")
    assert res.exit_code == 0, res.stderr
    data = res.json()
    assert data["layout"] == {"pp": 16, "ep": 64, "tp": 1, "dp": 128}
    assert all(type(v) is int for v in data["layout"].values())
    assert data["train_command"] == ["train.py", "--lr", "3e-4"]
    assert data["schedule"] == "dualpipe" and data["zero_stage"] == 1 and data["expert_dp"] == 2
    assert data["memory"]["fits"] is True
    assert data["rank_map"]["groups"]["ep"]["max_nodes_per_group"] == 8
    assert data["batch"]["global_batch"] == 15360
    fig = data["schedule_figures"]
    assert fig["bubble"] == fig["bubble_formula"] == 14.0  # (PP/2 - 1)(F&B + B - 3W) = 7 x 2
    assert fig["peak_activations"] == 17


def test_training_script_named_like_a_subcommand(cli: Cli) -> None:
    res = cli("launch", "--nodes", "256", "-f", "json", "--", "layout", "--pp", "3")
    assert res.exit_code == 0, res.stderr
    assert res.json()["train_command"] == ["layout", "--pp", "3"]


def test_launch_table_output(cli: Cli) -> None:
    res = cli("launch", "--nodes", "256", "--", "train.py")
    assert res.exit_code == 0, res.stderr
    for text in ("Why this layout", "Memory per GPU", "Rank map", "fits:", "training command: train.py"):
        assert text in res.stdout


def test_training_command_needs_double_dash(cli: Cli) -> None:
    res = cli("launch", "--nodes", "256", "train.py")
    assert res.exit_code == 2
    assert "'train.py' is not a launch subcommand" in res.stderr and "'--'" in res.stderr
    assert res.stdout == ""


def test_submit_needs_a_backend(cli: Cli) -> None:
    res = cli("launch", "--nodes", "256", "--submit", "--", "train.py")
    assert res.exit_code == 2
    assert "--submit needs --backend" in res.stderr and res.stdout == ""
    res = cli("launch", "--nodes", "256", "--submit", "--dry-run", "--", "train.py")
    assert res.exit_code == 2 and "exclude each other" in res.stderr


def test_impossible_layout_explained(cli: Cli) -> None:
    res = cli("launch", "--nodes", "256", "--pp", "16", "--dp", "24", "--", "t.py")
    assert res.exit_code == 2
    assert "pp 16 x dp 24 x tp 1 = 384 != world size 2048" in res.stderr
    assert "Traceback" not in res.stderr


def test_bad_inputs(cli: Cli) -> None:
    cases = [
        (("--nodes", "256", "--ep", "80", "--pp", "16"), "ep 80"),
        (("--nodes", "256", "--pp", "7", "--schedule", "dualpipe"), "dualpipe needs an even pp"),
        (("--nodes", "256", "--pp", "7"), "pp 7 x tp 1 = 7 does not divide world size 2048"),
        (("--nodes", "256", "--micro-batches", "30", "--pp", "16", "--schedule", "dualpipe"),
         "micro-batches >= 2 x pp = 32"),
        (("--nodes", "256", "--model", "nope"), "nope"),
        (("--nodes", "256", "--dp", "lots"), "--dp 'lots'"),
        (("--pp", "16",), "--nodes is required"),
        (("--nodes", "0",), "--nodes 0"),
    ]
    for args, text in cases:
        res = cli("launch", *args, "--", "t.py")
        assert res.exit_code == 2, (args, res.stdout)
        assert text in res.stderr, (args, res.stderr)


def test_does_not_fit_exits_1(cli: Cli) -> None:
    args = ("launch", "--nodes", "256", "--pp", "8", "--schedule", "dualpipe", "--tp", "1", "-f", "json")
    res = cli(*args, "--recipe", "none", "--", "t.py")  # no ZeRO stage rescues plain BF16 at PP8 TP1 (215 GiB)
    assert res.exit_code == 1
    data = res.json()
    assert data["memory"]["fits"] is False and data["dsctl"]["exit_code"] == 1
    # the recipe left open: DeepSeek's does not fit at PP8 DualPipe, full recompute does, and the search takes it
    res = cli(*args, "--", "t.py")
    assert res.exit_code == 0 and res.json()["memory"]["recipe"] == "full-recompute"


def test_out_writes_layout_and_ranks(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "plan"
    res = cli("launch", "--nodes", "256", "--pp", "16", "--ep", "64", "--schedule", "dualpipe", "--out-dir", str(out),
              "--", "train.py")
    assert res.exit_code == 0, res.stderr
    layout = json.loads((out / "layout.json").read_text())
    assert layout["layout"] == {"pp": 16, "ep": 64, "tp": 1, "dp": 128}
    assert layout["train_command"] == ["train.py"]
    with (out / "ranks.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2048
    assert rows[63] == {"rank": "63", "node": "7", "local_gpu": "7", "plane": "7", "pp": "0", "dp": "63",
                        "tp": "0", "ep": "63", "edp": "0", "stages": "0;15"}


def test_bad_input_writes_nothing(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "plan"
    res = cli("launch", "--nodes", "256", "--pp", "3", "--out-dir", str(out), "--", "t.py")
    assert res.exit_code == 2 and not out.exists()


def test_layout_subcommand_explain(cli: Cli) -> None:
    res = cli("launch", "layout", "--nodes", "256", "--explain", "-f", "json")
    assert res.exit_code == 0, res.stderr
    data = res.json()
    # the layout 'dsctl launch --nodes 256' plans (the same search): PP8 EP64 DualPipeV
    assert data["layout"] == {"pp": 8, "ep": 64, "tp": 1, "dp": 256} and data["schedule"] == "dualpipev"
    assert any("the same search" in c for c in data["choices"])
    groups = {g["kind"]: g for g in data["groups"]}
    assert groups["ep"]["ranks"][0] == list(range(64))
    assert groups["pp"]["ranks"][1] == list(range(1, 2048, 256))
    table = cli("launch", "layout", "--nodes", "16", "--tp", "1", "--explain")
    assert table.exit_code == 1  # 16 nodes cannot hold DeepSeek-V3 at tp 1: the layout is shown, the check fails
    assert "ep groups" in table.stdout and "pp groups" in table.stdout


def test_layout_subcommand_other_schedule(cli: Cli) -> None:
    res = cli("launch", "layout", "--nodes", "256", "--schedule", "dualpipev", "--pp", "8", "-f", "json")
    assert res.exit_code == 0, res.stderr
    data = res.json()
    assert data["num_stages"] == 16 and data["layout"]["dp"] == 256


def test_group_options_before_subcommand_rejected(cli: Cli) -> None:
    res = cli("launch", "--nodes", "256", "layout")
    assert res.exit_code == 2 and "put them after the subcommand" in res.stderr


def test_launch_help_lists_subcommands(cli: Cli) -> None:
    res = cli("launch", "--help")
    assert res.exit_code == 0
    assert "layout" in res.stdout and "--nodes" in res.stdout


def test_ep_that_does_not_divide_the_experts_is_named_in_auto_mode(cli) -> None:
    result = cli("launch", "--nodes", "256", "--ep", "7", "--", "t.py")
    assert result.exit_code == 2 and result.stdout == ""
    assert "ep 7 does not divide the 256 routed experts of deepseek-v3 (256 = 36 x 7 + 4)" in result.stderr


def test_auto_pp_error_names_the_layout_dsctl_would_choose(cli: Cli) -> None:
    """3840 sequences fail on DP 128 (30 micro-batches < DualPipe's 2 x 16), not on dp 1024 (pp 2)."""
    res = cli("launch", "--nodes", "256", "--global-batch", "3840", "--schedule", "dualpipe", "--tp", "1", "--",
              "t.py")  # at tp 1 (the memory rule's); with tp searched, TP2 layouts split the batch
    assert res.exit_code == 2 and res.stdout == ""
    first = res.stderr.splitlines()[0]
    assert "PP16 EP64 TP1 DP128, the layout dsctl would choose" in first
    assert "2 x pp = 32; got 30 micro-batches (--global-batch 3840 / dp 128)" in first
    assert "dp 1024" not in first
    assert "use --global-batch 4096" in res.stderr
    assert "pp 2: does not fit" in res.stderr and "pp 32: dualpipe needs" in res.stderr


def test_auto_pp_error_for_indivisible_batch_and_too_few_micro_batches(cli: Cli) -> None:
    res = cli("launch", "--nodes", "256", "--global-batch", "1000", "--tp", "1", "--", "t.py")
    assert res.exit_code == 2
    first = res.stderr.splitlines()[0]
    assert "DP128" in first and "--global-batch 1000 % dp 128 = 104" in first and "dp 1024" not in first
    res = cli("launch", "--nodes", "256", "--global-batch", "15360", "--micro-batches", "7", "--tp", "1", "--", "t.py")
    assert res.exit_code == 2
    first = res.stderr.splitlines()[0]
    assert "DP128" in first and "2 x pp = 32; got --micro-batches 7" in first and "dp 1024" not in first
    assert "--micro-batches 32" in res.stderr


def test_auto_pp_explains_every_rejected_candidate(cli: Cli) -> None:
    # DeepSeek's recipe fits only with ZeRO-3 here (PP16 needs 32 micro-batches, PP8 ZeRO-1/2 is over HBM)
    zero3 = cli("launch", "--nodes", "256", "--micro-batches", "30", "--schedule", "dualpipe", "--recipe", "deepseek",
                "--tp", "1", "-f", "json", "--", "t.py")
    assert zero3.exit_code == 0 and zero3.json()["zero_stage"] == 3 and zero3.json()["layout"]["pp"] == 4
    res = cli("launch", "--nodes", "256", "--micro-batches", "30", "--schedule", "dualpipe", "--recipe", "none",
              "--tp", "1", "-f", "json", "--", "t.py")
    assert res.exit_code == 1
    data = res.json()
    assert data["layout"]["pp"] == 4 and data["memory"]["fits"] is False
    choices = data["choices"]
    assert any(c.startswith("pp 4: no valid even pp fits") for c in choices)
    pp16 = [c for c in choices if c.startswith("pp 16 rejected:")]
    assert pp16 and "2 x pp = 32; got --micro-batches 30" in pp16[0]
    assert any(c.startswith("pp 2 rejected: does not fit") for c in choices)
    table = cli("launch", "--nodes", "256", "--micro-batches", "30", "--schedule", "dualpipe", "--recipe", "none",
                "--tp", "1", "--", "t.py")
    assert table.exit_code == 1
    assert "pp 16 rejected" in table.stdout and "DOES NOT FIT" in table.stdout


def test_layout_subcommand_exits_1_when_it_does_not_fit_like_launch(cli: Cli) -> None:
    layout = cli("launch", "layout", "--nodes", "48", "--pp", "16", "--tp", "1", "--recipe", "deepseek")
    plan = cli("launch", "--nodes", "48", "--pp", "16", "--tp", "1", "--recipe", "deepseek", "--", "t.py")
    assert layout.exit_code == plan.exit_code == 1
    assert "DOES NOT FIT" in layout.stdout
    data = cli("launch", "layout", "--nodes", "48", "--pp", "16", "--tp", "1", "--recipe", "deepseek", "-f",
               "json").json()
    assert data["memory_fits"] is False and data["exit_code"] == 1 and data["dsctl"]["exit_code"] == 1
    assert cli("launch", "layout", "--nodes", "256").exit_code == 0


def test_train_command_without_nodes_is_an_error_not_the_help(cli: Cli) -> None:
    for args in (("--", "train.py"), ("--", "train.py", "--lr", "1"), ("--",)):
        res = cli("launch", *args)
        assert res.exit_code == 2, args
        assert res.stdout == ""
        assert res.stderr.startswith("error: --nodes is required"), res.stderr


def test_memory_table_is_readable_at_80_columns(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    for args in (("--nodes", "256"), ("--nodes", "64", "--schedule", "1f1b", "--pp", "16"),
                 ("--nodes", "256", "--schedule", "dualpipev", "--pp", "8")):
        res = cli("launch", *args, "--", "t.py")
        assert res.exit_code == 0, res.stderr
        lines = res.stdout.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("Memory per GPU"))
        end = next(i for i in range(start, len(lines)) if lines[i].startswith("└"))
        table = lines[start:end + 1]
        assert all(len(line) <= 80 for line in table)
        assert not any("…" in line for line in table), "\n".join(table)
        header = next(line for line in table if "ranks" in line)
        assert "term" in "\n".join(table) and "stages" in "\n".join(table)
        terms = [line.split("│")[1].strip() for line in table if line.startswith("│")]
        for name in ("params", "weights (BF16)", "gradients (FP32)", "optimizer states (sharded)", "FP8 weight copies",
                     "activations (deepseek)", "FP8/E5M6 tile scales", "attention log-sum-exp",
                     "backward temporaries", "DeepEP buffers", "CUDA context + NCCL", "total", "free"):
            assert name in terms, (name, header)
        rank_map = [line for line in lines if line.startswith("┃ group")]
        assert rank_map and "…" not in rank_map[0]


def test_plain_bf16_recipe_does_not_fit_where_deepseeks_does(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28: with --recipe none, PP16 EP64 on 256 H800 nodes needs ~187.5 GiB (DeepSeek's recipe: 73.5)."""
    monkeypatch.setenv("COLUMNS", "200")
    res = cli("launch", "--nodes", "256", "--pp", "16", "--tp", "1", "--recipe", "none", "--", "t.py")
    assert res.exit_code == 1, res.stderr
    assert "DOES NOT FIT: pipeline rank 1 needs 187.5 GiB > 79.6 GiB usable" in res.stdout
    assert "recipe none; usable HBM 79.6 of 80.0" in res.stdout
    # what would fit instead: the other recipes' fastest layouts at pp 16, with their predicted steps
    assert "recipe deepseek fits at PP16: 17.3" in res.stdout
    assert "recipe full-recompute fits at PP16: 2" in res.stdout
    res = cli("launch", "--nodes", "256", "--pp", "16", "--tp", "1", "--", "t.py")
    assert res.exit_code == 0 and "fits: worst pipeline rank 1 uses 73.5 GiB of 79.6 GiB usable" in res.stdout
    # tp left to the search: TP4 with sequence parallelism divides the activations by 4 and plain BF16 fits
    res = cli("launch", "--nodes", "256", "--pp", "16", "--recipe", "none", "-f", "json", "--", "t.py")
    assert res.exit_code == 0 and res.json()["layout"]["tp"] > 1
    res = cli("launch", "layout", "--nodes", "256", "--recipe", "full-recompute", "--format", "json")
    assert res.exit_code == 0 and '"memory_fits": true' in res.stdout
    res = cli("launch", "--nodes", "256", "--recipe", "fp4", "--", "t.py")
    assert res.exit_code == 2 and "--recipe" in res.stderr


def test_explicit_pp_batch_errors_carry_a_fix(cli: Cli) -> None:
    dualpipe = ("--schedule", "dualpipe")  # searched, the schedule would be one that runs 30 micro-batches on pp 16
    res = cli("launch", "--nodes", "256", "--pp", "16", "--global-batch", "3840", *dualpipe, "--", "t.py")
    assert res.exit_code == 2
    assert "got 30 micro-batches (--global-batch 3840 / dp 128)" in res.stderr
    assert "hint: use --global-batch 4096" in res.stderr
    res = cli("launch", "--nodes", "256", "--pp", "16", "--micro-batches", "30", *dualpipe, "--", "t.py")
    assert res.exit_code == 2 and "hint: use --micro-batches 32" in res.stderr
    res = cli("launch", "--nodes", "256", "--micro-batches", "0", "--", "t.py")
    assert res.exit_code == 2 and "--micro-batches 0 is not valid" in res.stderr


def test_plan_out_on_a_file_system_that_refuses_writes_exits_2(cli) -> None:
    res = cli("launch", "--nodes", "256", "--out-dir", "/proc/dsctl-plan", "--", "train.py")
    assert res.exit_code == 2 and "--out-dir /proc/dsctl-plan: cannot write" in res.stderr


def test_launch_predicts_the_step_and_the_token_budget(cli: Cli) -> None:
    """DeepSeek-V3 on 256 H800 nodes; the paper's Table 4 (19.926 s, 272.80B tokens/day) is beside the model in
    tests/unit/test_steptime.py. Here: the plan carries the prediction in both outputs."""
    res = cli("launch", "--nodes", "256", "--tokens", "14.8T", "--gpu-hour-usd", "2", "-f", "json")
    assert res.exit_code == 0, res.stderr
    data = res.json()
    step = data["step_time"]
    assert step["breakdown"]["ops"] == {"f": 23, "b": 23, "w": 15, "fb": 97}
    phases = step["breakdown"]
    total = sum(phases[k] for k in ("1f_s", "1b_s", "1w_s", "overlapped_fb_s", "bubble_s", "optimizer_s"))
    assert total == pytest.approx(step["step_s"])
    assert step["tokens_per_day"] == pytest.approx(15_360 * 4_096 / step["step_s"] * 86_400)
    assert step["tflops_per_gpu"]["noncausal"] > step["tflops_per_gpu"]["causal"]
    budget = data["token_budget"]
    assert budget["tokens"] == 14.8e12
    assert budget["gpu_hours"] == pytest.approx(14.8e12 / (15_360 * 4_096 / step["step_s"]) * 2048 / 3600)
    assert budget["cost_usd"] == pytest.approx(2 * budget["gpu_hours"])


def test_launch_table_shows_the_step_within_80_columns(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    res = cli("launch", "--nodes", "256", "--tokens", "14.8T")
    assert res.exit_code == 0, res.stderr
    assert "Predicted step" in res.stdout and "overlapped F&B" in res.stdout and "GPU hours" in res.stdout
    assert "TFLOPS non-causal" in res.stdout and "MFU" in res.stdout
    assert max(len(line) for line in res.stdout.splitlines()) <= 80


@pytest.mark.parametrize("bad", ["lots", "-5T", "0"])
def test_launch_refuses_bad_tokens(cli: Cli, bad: str) -> None:
    res = cli("launch", "--nodes", "256", "--tokens", bad)
    assert res.exit_code == 2
    assert "--tokens" in res.stderr and "Traceback" not in res.stderr


def test_launch_balancedness_slows_the_predicted_step(cli: Cli) -> None:
    even = cli("launch", "--nodes", "256", "-f", "json").json()["step_time"]["step_s"]
    skewed = cli("launch", "--nodes", "256", "--balancedness", "0.8", "-f", "json").json()["step_time"]["step_s"]
    assert skewed > even * 1.05
    for bad in ("1.5", "nan", "0.01"):  # 0.01 < 1/ep = 1/64: more skew than all tokens on one GPU
        res = cli("launch", "--nodes", "256", "--ep", "64", "--balancedness", bad)
        assert res.exit_code == 2 and f"--balancedness {bad}" in res.stderr, res.stderr


def test_launch_refuses_an_infinite_price(cli: Cli) -> None:
    res = cli("launch", "--nodes", "256", "--tokens", "1T", "--gpu-hour-usd", "inf")
    assert res.exit_code == 2 and "--gpu-hour-usd" in res.stderr


def test_launch_table_lists_stage_costs(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    out = cli("launch", "--nodes", "256").stdout
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Stage costs"))
    rows = [line for line in lines[start:start + 12] if line.startswith("│")]
    assert [r.split("│")[1].strip() for r in rows] == ["0", "1-14", "15"]  # emb + dense, 4 MoE, 2 MoE + MTP + head


def test_launch_explains_where_a_layers_time_goes(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    data = cli("launch", "--nodes", "256", "-f", "json").json()["step_time"]
    dense, moe = data["layers"]
    assert (dense["kind"], moe["kind"]) == ("dense", "moe")
    assert dense["dispatch_f_s"] == 0 and moe["dispatch_f_s"] == pytest.approx(data["ep"]["dispatch_s"])
    assert moe["attention_f_s"] == pytest.approx(dense["attention_f_s"])  # the same MLA block
    monkeypatch.setenv("COLUMNS", "80")
    out = cli("launch", "--nodes", "256").stdout
    assert "Layer costs" in out and max(len(line) for line in out.splitlines()) <= 80


def test_launch_fabric_runs_the_ep_all_to_alls_on_the_planned_fabric(cli: Cli, tmp_path: Path) -> None:
    """--fabric DIR: the step prediction's EP seconds come from the fabric simulator on that plan; on a
    non-blocking MPFT they equal the node profile's closed form. A plan too small for the EP group, a file that
    is not a plan and a missing path are input errors naming what is wrong."""
    assert cli("topology", "plan", "--nodes", "256", "--out", str(tmp_path / "f256")).exit_code == 0
    assert cli("topology", "plan", "--nodes", "4", "--out", str(tmp_path / "f4")).exit_code == 0
    closed = cli("launch", "--nodes", "256", "-f", "json").json()["step_time"]
    planned = cli("launch", "--nodes", "256", "--fabric", str(tmp_path / "f256"), "-f", "json").json()["step_time"]
    assert planned["ep"]["dispatch_s"] == pytest.approx(closed["ep"]["dispatch_s"], rel=1e-6)
    assert planned["step_s"] == pytest.approx(closed["step_s"], rel=1e-6)
    small = cli("launch", "--nodes", "256", "--fabric", str(tmp_path / "f4"))
    assert small.exit_code == 2 and "--ep 64" in small.stderr, small.stderr
    (tmp_path / "notes.txt").write_text("not json", encoding="utf-8")
    for bad, needle in ((tmp_path / "notes.txt", "--fabric"), (tmp_path / "none", "--fabric"),
                        (tmp_path, "has no plan.json")):
        res = cli("launch", "--nodes", "256", "--fabric", str(bad))
        assert res.exit_code == 2 and needle in res.stderr and "Traceback" not in res.stderr, res.stderr


def test_launch_what_if_options_refuse_bad_input(cli: Cli, tmp_path: Path) -> None:
    """--nodes ranges, --within-days and --eplb-stats: one line naming the option, exit 2, no traceback."""
    import numpy as np

    wrong = tmp_path / "wrong.npy"
    np.save(wrong, np.ones((58, 64)))
    for args, needle in ((("-N", "512-128"), "range is empty"), (("-N", "abc"), "--nodes 'abc' is not valid"),
                         (("-N", "1-100000"), "at most 12"), (("-N", "0-4"), "--nodes 0 is not valid"),
                         (("-N", "256", "--within-days", "30"), "--within-days needs --tokens"),
                         (("-N", "256", "--eplb-stats", str(wrong)), "64 experts per layer"),
                         (("-N", "256", "--eplb-stats", str(wrong), "--balancedness", "0.9"), "give one")):
        res = cli("launch", *args)
        assert res.exit_code == 2 and needle in res.stderr and "Traceback" not in res.stderr, (args, res.stderr)


def test_launch_node_range_plans_the_chosen_count(cli: Cli) -> None:
    res = cli("launch", "-N", "1-2", "--model", "deepseek-v2-lite", "--global-batch", "256", "--tokens", "1T",
              "--objective", "fewest-nodes", "-f", "json")
    assert res.exit_code == 0, res.stderr
    data = res.json()
    sweep = data["sweep"]
    assert [r["num_nodes"] for r in sweep["rows"]] == [1, 2]
    assert sweep["chosen_nodes"] == data["num_nodes"] == 1
    row = sweep["rows"][0]
    assert row["gpu_hours"] == pytest.approx(1e12 / row["tokens_per_day"] * 24 * 8, rel=1e-9)
    assert row["cost_usd"] == pytest.approx(2.0 * row["gpu_hours"])
