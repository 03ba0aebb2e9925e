"""dsctl eplb rebalance|simulate through the real entry point: exit codes, JSON keys, files, error messages."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

README = [[90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86], [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27]]
README_ARGS = ("-r", "16", "-g", "8", "-N", "2", "--groups", "4")


@pytest.fixture
def readme(tmp_path: Path) -> Path:
    path = tmp_path / "stats.json"
    path.write_text(json.dumps({"load": README}))
    return path


@pytest.fixture
def v3_stats(tmp_path: Path) -> Path:
    rng = np.random.default_rng(5)
    w = np.round(1e5 / np.arange(1, 257) * rng.lognormal(0, 0.3, (6, 256)))
    path = tmp_path / "v3.npy"
    np.save(path, np.stack([rng.permutation(r) for r in w]))
    return path


def test_readme_example_json(cli: Callable, readme: Path) -> None:
    res = cli("eplb", "rebalance", readme, *README_ARGS, "--format", "json")
    assert res.exit_code == 0, res.stderr
    data = res.json()
    assert {"dsctl", "phy2log", "log2phy", "logcnt", "metrics"} <= set(data)
    assert data["phy2log"][0] == [5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1]
    assert data["logcnt"][1] == [1, 2, 1, 1, 1, 2, 2, 1, 2, 1, 1, 1]
    assert data["log2phy"][1][8] == [6, 3]
    layers = data["metrics"]["layers"]
    assert [round(layer["after"]["balancedness"], 4) for layer in layers] == [0.8277, 0.8050]
    assert layers[0]["after"]["max_gpu_load"] == 156.0 and len(layers[0]["after"]["gpu_loads"]) == 8
    assert data["layout"]["policy"] == "hierarchical"


def test_table_output_has_balancedness_and_chart(cli: Callable, readme: Path) -> None:
    res = cli("eplb", "rebalance", readme, *README_ARGS)
    assert res.exit_code == 0
    assert "0.8277" in res.stdout and "0.8050" in res.stdout and "worst layer 1" in res.stdout


def test_model_out_and_sglang_export(cli: Callable, v3_stats: Path, tmp_path: Path) -> None:
    out, sg = tmp_path / "plan.json", tmp_path / "sglang.json"
    # 6 statistics rows for a 61-layer model: SGLang would accept the 6-row map and shift layers, so it is refused
    refused = cli("eplb", "rebalance", v3_stats, "-r", "288", "-g", "32", "-N", "4", "--model", "deepseek-v3",
                  "--out", out, "--sglang-out", sg)
    assert refused.exit_code == 2 and "deepseek-v3 has 61 layers" in refused.stderr
    assert not out.exists() and not sg.exists()
    res = cli("eplb", "rebalance", v3_stats, "-r", "288", "-g", "32", "-N", "4", "--model", "deepseek-v3",
              "--out", out)
    assert res.exit_code == 0, res.stderr
    plan = json.loads(out.read_text())
    assert len(plan["phy2log"]) == 6 and len(plan["phy2log"][0]) == 288
    assert plan["layout"]["num_groups"] == 8 and plan["layout"]["policy"] == "hierarchical"
    sim = cli("eplb", "simulate", v3_stats, out, "--format", "json")
    assert sim.exit_code == 0, sim.stderr
    after = [layer["after"]["balancedness"] for layer in sim.json()["metrics"]["layers"]]
    assert after == [layer["after"]["balancedness"] for layer in plan["metrics"]["layers"]]
    bad_name = cli("eplb", "rebalance", v3_stats, "-m", "deepseek-v3", "--sglang-out", tmp_path / "loc.txt")
    assert bad_name.exit_code == 2 and "ends in .json" in bad_name.stderr


def test_stats_alone_plan_deepseek_v3_prefill(cli: Callable, tmp_path: Path) -> None:
    stats, sg = tmp_path / "s.npy", tmp_path / "loc.json"
    np.save(stats, np.random.default_rng(1).random((58, 256)))
    res = cli("eplb", "rebalance", stats, "--sglang-out", sg, "--format", "json")
    assert res.exit_code == 0, res.stderr
    data = res.json()
    assert data["model"] == "deepseek-v3"
    layout = data["layout"]
    assert (layout["num_replicas"], layout["num_gpus"], layout["num_nodes"], layout["policy"]) == (
        288, 32, 4, "hierarchical")
    rows = json.loads(sg.read_text())["physical_to_logical_map"]
    assert len(rows) == 61 and rows[3] == data["phy2log"][0]
    assert "--ep-num-redundant-experts 32" in res.stderr
    summary = data["metrics"]["summary"]
    assert 0.0 <= summary["mean_gap_to_bound"] <= summary["max_gap_to_bound"]
    decode = cli("eplb", "rebalance", stats, "--deployment", "decode", "--format", "json")
    assert decode.exit_code == 0 and decode.json()["layout"]["num_gpus"] == 320
    small = tmp_path / "small.json"
    small.write_text("[[1, 2, 3, 4]]")
    none = cli("eplb", "rebalance", small)
    assert none.exit_code == 2 and "matches no model profile" in none.stderr and "deepseek-v3" in none.stderr


def test_the_deployment_is_read_from_the_model_profile(cli: Callable, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A site copy of deepseek-v3.yaml with another prefill deployment changes the default layout."""
    from dsctl.profiles.loader import builtin_profiles_dir

    source = (builtin_profiles_dir() / "models" / "deepseek-v3.yaml").read_text()
    site = tmp_path / "profiles" / "models"
    site.mkdir(parents=True)
    (site / "deepseek-v3.yaml").write_text(source.replace("num_gpus: 32\n    num_nodes: 4\n    num_redundant_"
                                                          "experts: 32", "num_gpus: 16\n    num_nodes: 2\n    "
                                                          "num_redundant_experts: 16", 1))
    monkeypatch.setenv("DSCTL_PROFILES", str(tmp_path / "profiles"))
    stats = tmp_path / "s.npy"
    np.save(stats, np.random.default_rng(1).random((58, 256)))
    res = cli("eplb", "rebalance", stats, "--format", "json")
    assert res.exit_code == 0, res.stderr
    layout = res.json()["layout"]
    assert (layout["num_replicas"], layout["num_gpus"], layout["num_nodes"]) == (272, 16, 2)


def test_sglang_export_pads_dense_layers(cli: Callable, tmp_path: Path) -> None:
    stats = tmp_path / "s.npy"
    np.save(stats, np.random.default_rng(0).random((58, 256)))
    sg = tmp_path / "sg.json"
    res = cli("eplb", "rebalance", stats, "-r", "256", "-g", "32", "-N", "4", "-m", "deepseek-v3", "--sglang-out", sg,
              "--format", "json")
    assert res.exit_code == 0
    rows = json.loads(sg.read_text())["physical_to_logical_map"]
    assert len(rows) == 61 and rows[0] == list(range(256))
    sim = cli("eplb", "simulate", stats, sg, "-g", "32", "--format", "json")
    assert sim.exit_code == 0 and any("skipped 3 leading layers" in w for w in sim.json()["warnings"])


def test_several_stats_files_are_summed(cli: Callable, tmp_path: Path) -> None:
    a, b = tmp_path / "a.csv", tmp_path / "b.json"
    a.write_text("\n".join(",".join(str(v // 2) for v in row) for row in README))
    b.write_text(json.dumps([[v - v // 2 for v in row] for row in README]))
    res = cli("eplb", "rebalance", a, b, *README_ARGS, "-f", "json")
    assert res.exit_code == 0 and res.json()["phy2log"][1] == [7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1]


@pytest.mark.parametrize(("content", "args", "needle"), [
    ("[[1, 2], [3]]", README_ARGS, "layer row 1 has 1 values but row 0 has 2"),
    ("[[1, NaN]]", README_ARGS, "NaN is not finite"),
    ("[[1, -1]]", README_ARGS, "-1 is negative"),
    ('[[1, "a"]]', README_ARGS, "is not a number"),
    ("", README_ARGS, "file is empty"),
    (json.dumps(README), ("-r", "18", "-g", "8", "-N", "2", "--groups", "4"), "not a multiple of --gpus 8"),
    (json.dumps(README), ("-r", "8", "-g", "8", "-N", "2", "--groups", "4"), "smaller than the number of experts 12"),
    (json.dumps(README), ("-r", "16", "-g", "8", "-N", "3", "--groups", "6", "--policy", "hierarchical"),
     "multiple of --nodes 3"),
    (json.dumps(README), ("-r", "16", "-g", "6", "-N", "4", "--groups", "4"), "--gpus 6 to be a multiple of --nodes 4"),
    (json.dumps(README), ("-r", "16", "-g", "8", "-N", "2", "--groups", "8"), "12 experts to split into --groups 8"),
    (json.dumps(README), ("-r", "16", "-g", "8", "-N", "0"), "--nodes must be >= 1"),
    (json.dumps(README), (*README_ARGS, "--policy", "fast"), "--policy 'fast' is not valid"),
    (json.dumps(README), (*README_ARGS, "--algorithm", "magic"), "--algorithm 'magic' is not valid"),
    (json.dumps(README), (*README_ARGS, "--tolerance", "2"), "--tolerance 2.0 must be in [0, 1)"),
    (json.dumps(README), (*README_ARGS, "-m", "deepseek-v3"), "statistics have 12 experts per layer"),
    (json.dumps(README), (*README_ARGS, "-m", "llama3.1-405b"), "has no MoE layers"),
])
def test_bad_input_exits_2_with_a_message(
    cli: Callable, tmp_path: Path, content: str, args: tuple, needle: str
) -> None:
    stats = tmp_path / "stats.json"
    stats.write_text(content)
    out = tmp_path / "out.json"
    res = cli("eplb", "rebalance", stats, *args, "--out", out)
    assert res.exit_code == 2
    assert needle in res.stderr and "Traceback" not in res.stderr
    assert not out.exists()


def test_missing_files_and_folders(cli: Callable, readme: Path, tmp_path: Path) -> None:
    res = cli("eplb", "rebalance", tmp_path / "nope.json", *README_ARGS)
    assert res.exit_code == 2 and "nope.json: file not found" in res.stderr
    res = cli("eplb", "rebalance", readme, *README_ARGS, "--out", tmp_path / "no" / "x.json")
    assert res.exit_code == 2 and "does not exist" in res.stderr


def test_simulate_errors(cli: Callable, readme: Path, tmp_path: Path) -> None:
    bad = tmp_path / "p.json"
    bad.write_text('{"physical_to_logical_map": [[0, 1, 2]]}')
    res = cli("eplb", "simulate", readme, bad, "-g", "1")
    assert res.exit_code == 2 and "has no slot for expert 3" in res.stderr
    bad.write_text('{"something": 1}')
    res = cli("eplb", "simulate", readme, bad)
    assert res.exit_code == 2 and 'no "phy2log" or "physical_to_logical_map" key' in res.stderr
    bad.write_text(json.dumps({"physical_to_logical_map": [[*list(range(12)), 0, 1, 2, 3]] * 2}))
    res = cli("eplb", "simulate", readme, bad)
    assert res.exit_code == 2 and "pass --gpus" in res.stderr
    res = cli("eplb", "simulate", readme, bad, "-g", "5")
    assert res.exit_code == 2 and "split evenly" in res.stderr
    res = cli("eplb", "simulate", readme, bad, "-g", "8", "-f", "json")
    assert res.exit_code == 0 and len(res.json()["metrics"]["layers"]) == 2


def test_previous_reports_replicas_moved(cli: Callable, readme: Path, tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    assert cli("eplb", "rebalance", readme, *README_ARGS, "--out", plan).exit_code == 0
    res = cli("eplb", "rebalance", readme, *README_ARGS, "--previous", plan, "-f", "json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["migration"]["replicas_moved"] == 0


def test_previous_with_plan_times_the_moves(cli: Callable, v3_stats: Path, tmp_path: Path) -> None:
    fabric = tmp_path / "fabric"
    assert cli("topology", "plan", "-N", "2", "--out-dir", fabric).exit_code == 0
    args = ("-r", "288", "-g", "16", "-N", "2", "-m", "deepseek-v3")
    before = tmp_path / "before.json"
    rng = np.random.default_rng(1)
    old = tmp_path / "old.npy"
    np.save(old, np.round(np.load(v3_stats) * rng.lognormal(0, 0.5, (6, 256))))
    assert cli("eplb", "rebalance", old, *args, "--out", before).exit_code == 0
    res = cli("eplb", "rebalance", v3_stats, *args, "--previous", before, "--plan", fabric, "--step-time-s", "0.02")
    assert res.exit_code == 0, res.stderr
    assert "move time" in res.stdout and "pays back after" in res.stdout and " steps" in res.stdout
    assert f"moves timed on {fabric / 'plan.json'}" in res.stdout
    data = cli("eplb", "rebalance", v3_stats, *args, "--previous", before, "--plan", fabric / "plan.json",
               "-f", "json").json()["trade_off"]
    moved = [p for p in data["points"] if p["replicas_moved"]]
    assert moved and all(p["moves"]["move_s"] > 0 and p["break_even_steps"] is None for p in moved)
    assert all(p["payback_s"] == pytest.approx(p["moves"]["move_s"] / p["gain"]) for p in moved if p["gain"] > 0)
    bad = cli("eplb", "rebalance", v3_stats, *args, "--plan", fabric)
    assert bad.exit_code == 2 and bad.stderr == ("error: --plan only applies with a previous placement "
                                                 "(migration-aware planning)\n"
                                                 "hint: give the current placement with --previous FILE\n")
    bad = cli("eplb", "rebalance", v3_stats, *args, "--previous", before, "--node-profile", "h100-hgx")
    assert bad.exit_code == 2 and "--node-profile only applies with a planned fabric" in bad.stderr
    assert "hint: give the plan with --plan, or drop --node-profile" in bad.stderr
    fast = cli("eplb", "rebalance", v3_stats, *args, "--previous", before, "--plan", fabric, "--node-profile",
               "h100-hgx", "-f", "json").json()["trade_off"]["points"]
    # NVLink 450 GB/s per direction instead of 200: copies inside a node finish sooner, never later
    for slow_point, fast_point in zip(data["points"], fast, strict=True):
        assert fast_point["moves"]["move_s"] <= slow_point["moves"]["move_s"] * (1 + 1e-9)
    assert any(f["moves"]["move_s"] < s["moves"]["move_s"] * 0.99 for s, f in zip(data["points"], fast, strict=True))
    small = tmp_path / "one"
    assert cli("topology", "plan", "-N", "1", "--out-dir", small).exit_code == 0
    bad = cli("eplb", "rebalance", v3_stats, *args, "--previous", before, "--plan", small)
    assert bad.exit_code == 2 and "has 8 GPUs (1 node x 8); the placement spans 16" in bad.stderr


def test_balanced_is_never_worse_than_reference(cli: Callable, v3_stats: Path) -> None:
    args = (v3_stats, "-r", "288", "-g", "32", "-N", "4", "-m", "deepseek-v3", "-f", "json")
    ref = cli("eplb", "rebalance", *args)
    bal = cli("eplb", "rebalance", *args, "--algorithm", "balanced")
    assert bal.exit_code == 0, bal.stderr
    ref_max = [layer["after"]["max_gpu_load"] for layer in ref.json()["metrics"]["layers"]]
    bal_max = [layer["after"]["max_gpu_load"] for layer in bal.json()["metrics"]["layers"]]
    assert all(b <= r * (1 + 1e-9) for b, r in zip(bal_max, ref_max, strict=True))


@pytest.mark.parametrize(("options", "bad_option", "needle"), [
    (("--out", "{dir}"), "--out", "is a folder"),
    (("--sglang-out", "{dir}"), "--sglang-out", "is a folder"),
    (("--out", "{good}", "--sglang-out", "{dir}"), "--sglang-out", "is a folder"),
    (("--out", "{dir}", "--sglang-out", "{good}"), "--out", "is a folder"),
    (("--out", "{good}", "--sglang-out", "{missing}/s.json"), "--sglang-out", "does not exist"),
    (("--out", "{good}", "--sglang-out", "{good}"), "--sglang-out", "same file as --out"),
])
def test_bad_output_paths_exit_2_and_write_nothing(
    cli: Callable, readme: Path, tmp_path: Path, options: tuple[str, ...], bad_option: str, needle: str
) -> None:
    folder, good = tmp_path / "folder", tmp_path / "good.json"
    folder.mkdir()
    args = [o.format(dir=folder, good=good, missing=tmp_path / "missing") for o in options]
    res = cli("eplb", "rebalance", readme, *README_ARGS, *args)
    assert res.exit_code == 2, res.stderr
    assert "internal error" not in res.stderr and "Traceback" not in res.stderr
    assert res.stderr.startswith(f"error: {bad_option} ") and needle in res.stderr
    assert not good.exists() and list(folder.iterdir()) == [] and not (tmp_path / "missing").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "stats.json"]  # no temp files left either


def test_huge_replicas_are_rejected_fast(cli: Callable, readme: Path) -> None:
    res = cli("eplb", "rebalance", readme, "-r", "100000000", "-g", "8", "-N", "2", "--groups", "4")
    assert res.exit_code == 2
    assert "--replicas 100000000 is above the limit of 192 slots per layer for 12 experts" in res.stderr
    assert "rule V12" in res.stderr


def test_previous_reads_sglang_file_with_dense_rows_like_simulate(
    cli: Callable, readme: Path, tmp_path: Path
) -> None:
    sg, plan = tmp_path / "sg.json", tmp_path / "plan.json"
    # no model profile has the README's shape, so --sglang-out is refused (its layer count cannot be checked)
    refused = cli("eplb", "rebalance", readme, *README_ARGS, "--sglang-out", sg)
    assert refused.exit_code == 2 and "give -m/--model" in refused.stderr and not sg.exists()
    assert cli("eplb", "rebalance", readme, *README_ARGS, "--out", plan).exit_code == 0
    rows = json.loads(plan.read_text())["phy2log"]
    trivial = [s % 12 for s in range(16)]
    sg.write_text(json.dumps({"physical_to_logical_map": [trivial] * 3 + rows}))  # 3 dense + 2 MoE layers
    sim = cli("eplb", "simulate", readme, sg, "-g", "8", "-f", "json")
    assert sim.exit_code == 0, sim.stderr
    res = cli("eplb", "rebalance", readme, *README_ARGS, "--previous", sg, "-f", "json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["migration"]["replicas_moved"] == 0
    assert any("skipped 3 leading layers" in w for w in res.json()["warnings"])
    sg.write_text(json.dumps({"physical_to_logical_map": [[*trivial[1:], 0]] * 3 + rows}))  # not trivial rows
    for args in (("simulate", readme, sg, "-g", "8"), ("rebalance", readme, *README_ARGS, "--previous", sg)):
        res = cli("eplb", *args)
        assert res.exit_code == 2 and "placement has 5 layers but the statistics have 2" in res.stderr


def test_simulate_gpus_zero(cli: Callable, readme: Path, tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    assert cli("eplb", "rebalance", readme, *README_ARGS, "--out", plan).exit_code == 0
    res = cli("eplb", "simulate", readme, plan, "--gpus", "0")
    assert res.exit_code == 2 and "--gpus must be >= 1, got 0" in res.stderr and " x 0 " not in res.stderr


def test_tolerance_without_previous(cli: Callable, readme: Path) -> None:
    res = cli("eplb", "rebalance", readme, *README_ARGS, "--tolerance", "0.05")
    assert res.exit_code == 2 and "--tolerance 0.05 only applies with a previous placement" in res.stderr
    assert "hint: give the current placement with --previous FILE" in res.stderr
    res = cli("eplb", "rebalance", readme, *README_ARGS, "--tolerance", "0.01", "-f", "json")
    assert res.exit_code == 0 and "--tolerance only applies with --previous; ignored" in res.json()["warnings"]


def _npy_bytes(arr: np.ndarray) -> bytes:
    import io
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


@pytest.mark.parametrize(("name", "content", "needle"), [
    ("one.json", b"[1, 2, 3]", "found a 1-D list of 3 values; statistics must be 2-D [layers, experts]"),
    ("one.npy", _npy_bytes(np.arange(12.0)), "found an array of shape (12,); statistics must be 2-D"),
    ("bool.npy", _npy_bytes(np.ones((2, 12), dtype=bool)), "must hold integers or floats, got dtype bool"),
    ("text.npy", b"1,2,3\n", "not a .npy array file"),
    ("semi.csv", b"1;2;3\n4;5;6\n", "line 1: values are separated by ';'; separate them with commas"),
])
def test_statistics_shape_and_format_errors(
    cli: Callable, tmp_path: Path, name: str, content: bytes, needle: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    res = cli("eplb", "rebalance", path, *README_ARGS)
    assert res.exit_code == 2 and needle in res.stderr, res.stderr
    assert "pickled" not in res.stderr


def test_whitespace_separated_statistics(cli: Callable, tmp_path: Path) -> None:
    path = tmp_path / "stats.txt"
    path.write_text("\n".join(" ".join(str(v) for v in row) for row in README) + "\n")
    res = cli("eplb", "rebalance", path, *README_ARGS, "-f", "json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["phy2log"][0] == [5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1]


def test_a_failing_second_write_removes_the_first_file(
    cli: Callable, readme: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dsctl.output.files as files

    real_write = files._write_temp

    def failing_write(path: Path, content: str | bytes, option: str | None) -> Path:
        if Path(path).name == "sg.json":
            raise files._refused(option, path, OSError(28, "No space left on device"))
        return real_write(path, content, option)

    monkeypatch.setattr(files, "_write_temp", failing_write)
    out, sg = tmp_path / "plan.json", tmp_path / "sg.json"
    res = cli("eplb", "rebalance", readme, *README_ARGS, "--out", out, "--sglang-out", sg)
    assert res.exit_code != 0 and not out.exists() and not sg.exists()


def test_prove_replay_budget_and_sglang_dump(cli: Callable, tmp_path: Path) -> None:
    stats = tmp_path / "a3042.json"
    stats.write_text("[[600, 560, 120, 120, 20, 10, 10, 10]]")
    res = cli("eplb", "rebalance", stats, "-r", "16", "-g", "8", "-N", "1", "--algorithm", "balanced", "--prove",
              "-f", "json")
    assert res.exit_code == 0, res.stderr
    data = res.json()
    layer = data["metrics"]["layers"][0]
    assert layer["optimum"]["proved"] and abs(layer["optimum"]["max_gpu_load"] - 590 / 3) < 1e-9
    assert abs(layer["after"]["max_gpu_load"] - 590 / 3) < 1e-9
    assert data["metrics"]["summary"]["layers_proved_optimal"] == 1
    assert abs(data["metrics"]["summary"]["max_gap_to_bound"] - (590 / 3 / 181.25 - 1)) < 1e-9
    table = cli("eplb", "rebalance", stats, "-r", "16", "-g", "8", "-N", "1", "--prove")
    assert table.exit_code == 0 and "1 of 1 layers proved optimal" in table.stdout
    rng = np.random.default_rng(0)
    windows = []
    w = rng.lognormal(0, 1, (2, 32)) * 100
    for t in range(3):
        windows.append(tmp_path / f"w{t}.npy")
        np.save(windows[-1], np.round(w))
        w = w * np.exp(0.2 * rng.standard_normal(w.shape))
    rep = cli("eplb", "replay", *windows, "-r", "48", "-g", "8", "-N", "2", "--groups", "4", "--interval-windows", "1",
              "--interval-windows", "2", "-f", "json")
    assert rep.exit_code == 0, rep.stderr
    assert [s["interval"] for s in rep.json()["scores"]] == [1, 2] and rep.json()["num_windows"] == 3
    bud = cli("eplb", "budget", windows[0], "--total-slots", "96", "-r", "48", "-g", "8", "-N", "1", "-f", "json")
    assert bud.exit_code == 0, bud.stderr
    assert sum(bud.json()["slots_per_layer"]) == 96
    dump = Path(__file__).resolve().parents[1] / "data" / "eplb" / "expert_distribution_recorder_1764600000.0_0.pt"
    sg = cli("eplb", "rebalance", dump, "-r", "16", "-g", "4", "-N", "1", "-f", "json")
    assert sg.exit_code == 0, sg.stderr
    assert len(sg.json()["phy2log"]) == 4
