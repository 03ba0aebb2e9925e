"""dsctl topology plan|compare|verify through the real entry point: exit codes, JSON shape, messages, files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "topology"
KEYS = {"name", "endpoints", "switches", "links", "cost_usd", "cost_per_endpoint_usd"}


def test_compare_json_is_a_bare_list_with_exact_keys(cli) -> None:
    res = cli("topology", "compare", "--format", "json")
    assert res.exit_code == 0, res.stderr
    data = res.json()
    assert isinstance(data, list) and [d["name"] for d in data] == ["FT2", "MPFT", "FT3", "SF", "DF"]
    assert all(set(d) == KEYS for d in data)
    by = {d["name"]: d for d in data}
    assert (by["MPFT"]["endpoints"], by["MPFT"]["switches"], by["MPFT"]["links"]) == (16384, 768, 16384)
    assert round(by["FT3"]["cost_usd"] / 1e6) == 491
    assert round(by["FT2"]["cost_per_endpoint_usd"] / 1e3, 2) == 4.39


def test_compare_table_and_cost_overrides(cli) -> None:
    res = cli("topology", "compare")
    assert res.exit_code == 0 and "MPFT" in res.stdout and "71.92" in res.stdout
    res = cli("topology", "compare", "--radix", "32", "--switch-cost", "1000", "--link-cost", "0", "-f", "json")
    ft2 = res.json()[0]
    assert (ft2["endpoints"], ft2["switches"], ft2["cost_usd"]) == (512, 48, 48000)


@pytest.mark.parametrize("radix", ["63", "6"])
def test_compare_rejects_unbuildable_radix(cli, radix: str) -> None:
    res = cli("topology", "compare", "--radix", radix)
    assert res.exit_code == 2 and "--radix" in res.stderr and "Traceback" not in res.stderr


def test_plan_summary_json(cli) -> None:
    res = cli("topology", "plan", "--gpus", "16384", "-f", "json")
    assert res.exit_code == 0, res.stderr
    d = res.json()
    assert d["dsctl"]["command"] == "topology plan"
    assert (d["num_nodes"], d["num_planes"], d["leaves_per_plane"], d["spines_per_plane"]) == (2048, 8, 64, 32)
    assert d["num_switches"] == 768 and d["cables"]["total"] == 32768
    assert d["max_switch_hops"] == 3 and d["max_nodes"] == 2048
    assert d["files"] == [] and d["out_dir"] is None


def test_plan_table(cli) -> None:
    res = cli("topology", "plan", "--nodes", "100")
    assert res.exit_code == 0 and "max switch hops" in res.stdout and "growth" in res.stdout


def test_plan_out_writes_every_file_and_counts_agree(cli, tmp_path: Path) -> None:
    out = tmp_path / "fabric"
    res = cli("topology", "plan", "--nodes", "100", "--out-dir", str(out), "-f", "json")
    assert res.exit_code == 0, res.stderr
    names = sorted(p.name for p in out.iterdir())
    expected = [f"expected-plane{p}.{ext}" for p in range(8) for ext in ("ibnet", "topo")]
    assert names == [".dsctl-manifest.json", "cabling.csv", *expected, "ibnl", "plan.json", "switches.csv",
                     "topology.conf", "topology.dot", "topology.svg", "topology.yaml"]
    assert sorted(p.name for p in (out / "ibnl").iterdir()) == [
        *(f"DSCTL_HOST_P{p}.ibnl" for p in range(8)), "DSCTL_SW64.ibnl"]
    assert "P1 -4x-100G-> DSCTL_HOST_P3 node0001 mlx5_3/P1" in (out / "expected-plane3.topo").read_text()
    summary = res.json()
    cabling = (out / "cabling.csv").read_text().splitlines()
    plan = json.loads((out / "plan.json").read_text())
    assert len(cabling) - 1 == len(plan["cables"]) == summary["cables"]["total"] == 1600
    assert plan["summary"]["num_switches"] == summary["num_switches"]
    assert (out / "topology.svg").read_text().startswith("<svg")
    assert (out / "topology.dot").read_text().startswith("graph fabric {")
    assert "SwitchName=p0-leaf01 Nodes=node[0001-0032]" in (out / "topology.conf").read_text()


@pytest.mark.parametrize(("args", "needle"), [
    (["--nodes", "0"], "--nodes"),
    (["--nodes", "3000"], "at most 2,048"),
    (["--nodes", "300", "--kind", "mrft"], "at most 256"),
    (["--gpus", "100"], "--gpus 100"),
    (["--nodes", "4", "--gpus", "32"], "exactly one"),
    ([], "exactly one"),
    (["--nodes", "4", "--radix", "63"], "odd"),
    (["--nodes", "4", "--node-profile", "nope"], "nope"),
    (["--nodes", "4", "--switch", "nope"], "nope"),
    (["--nodes", "4", "--kind", "torus"], "--kind"),
    (["--nodes", "4", "--leaf-name", "leaf{x}"], "--leaf-name"),
])
def test_plan_bad_input_exits_2(cli, tmp_path: Path, args: list[str], needle: str) -> None:
    out = tmp_path / "never"
    res = cli("topology", "plan", *args, "--out-dir", str(out))
    assert res.exit_code == 2, res.stdout
    assert needle in res.stderr and "Traceback" not in res.stderr
    assert not out.exists()


def test_too_many_nodes_suggests_a_kind(cli) -> None:
    res = cli("topology", "plan", "--nodes", "3000")
    assert "ft3" in res.stderr


def test_verify_perfect_and_miswired(cli, tmp_path: Path) -> None:
    out = tmp_path / "plan"
    assert cli("topology", "plan", "--nodes", "10", "--radix", "8", "--out-dir", str(out)).exit_code == 0
    ok = cli("topology", "verify", str(out), str(DATA / "perfect.ibnet"), "-f", "json")
    assert ok.exit_code == 0, ok.stderr
    assert ok.json()["findings"] == []
    bad = cli("topology", "verify", str(out), str(DATA / "miswired.ibnet"), "-f", "json")
    assert bad.exit_code == 1
    data = bad.json()
    assert data["dsctl"]["exit_code"] == 1
    assert {k: v for k, v in data["counts"].items() if v} == {"missing": 2, "extra": 1, "swapped": 2, "cross_plane": 2,
                                                             "unmatched_device": 1}
    assert set(data["counts"]) >= {"degraded_width", "guid_changed", "plane_not_seen"}
    assert {"a_device", "a_port", "b_device", "b_port", "kind", "line"} <= set(data["findings"][0])
    table = cli("topology", "verify", str(out), str(DATA / "miswired.ibnet"))
    assert table.exit_code == 1 and "MISMATCH" in table.stdout and "cross_plane" in table.stdout
    own = cli("topology", "verify", str(out / "plan.json"), str(out / "cabling.csv"))
    assert own.exit_code == 0 and "OK" in own.stdout


def test_verify_bad_input_exits_2(cli, tmp_path: Path) -> None:
    out = tmp_path / "plan"
    cli("topology", "plan", "--nodes", "10", "--radix", "8", "--out-dir", str(out))
    res = cli("topology", "verify", str(out), str(DATA / "malformed.ibnet"))
    assert res.exit_code == 2 and "line 41" in res.stderr
    res = cli("topology", "verify", str(tmp_path), str(DATA / "perfect.ibnet"))
    assert res.exit_code == 2 and "plan.json" in res.stderr
    res = cli("topology", "verify", str(out), str(tmp_path / "absent.txt"))
    assert res.exit_code == 2 and "does not exist" in res.stderr


@pytest.fixture
def small_plan(cli, tmp_path: Path) -> Path:
    out = tmp_path / "plan"
    assert cli("topology", "plan", "--nodes", "10", "--radix", "8", "--out-dir", str(out)).exit_code == 0
    return out


@pytest.mark.parametrize(("port", "needle"), [("abc", "b_port 'abc'"), ("-1", "b_port '-1'")])
def test_verify_csv_bad_switch_port_exits_2(cli, small_plan: Path, tmp_path: Path, port: str, needle: str) -> None:
    lines = (small_plan / "cabling.csv").read_text().splitlines()
    lines[1] = lines[1].rsplit(",", 1)[0] + "," + port
    links = tmp_path / "links.csv"
    links.write_text("\n".join(lines) + "\n")
    res = cli("topology", "verify", str(small_plan), str(links))
    assert res.exit_code == 2 and res.stdout == ""
    assert f"{links} line 2: {needle} of switch 'p0-leaf01' is not a port number 1..8" in res.stderr


def test_verify_csv_duplicate_cable_exits_2(cli, small_plan: Path, tmp_path: Path) -> None:
    lines = (small_plan / "cabling.csv").read_text().splitlines()
    links = tmp_path / "links.csv"
    links.write_text("\n".join([*lines, lines[1]]) + "\n")
    res = cli("topology", "verify", str(small_plan), str(links))
    assert res.exit_code == 2
    assert f"{links} line {len(lines) + 1} repeats the cable of line 2" in res.stderr


def test_verify_plan_json_null_port_exits_2(cli, small_plan: Path) -> None:
    plan = json.loads((small_plan / "plan.json").read_text())
    plan["cables"][0][5] = None
    (small_plan / "plan.json").write_text(json.dumps(plan))
    res = cli("topology", "verify", str(small_plan), str(small_plan / "cabling.csv"))
    assert res.exit_code == 2 and "None" not in res.stdout + res.stderr
    assert "cables[0][5] (b_port) must be a whole number 1..8" in res.stderr and "got null" in res.stderr


def test_plan_huge_name_template_is_not_echoed(cli) -> None:
    res = cli("topology", "plan", "--nodes", "4", "--node-name", "{n:>1000000}")
    assert res.exit_code == 2 and "--node-name" in res.stderr and "64-byte" in res.stderr
    assert len(res.stderr) < 400
    res = cli("topology", "plan", "--nodes", "4", "--node-name", "n" * 1_000_000)
    assert res.exit_code == 2 and "characters" in res.stderr and len(res.stderr) < 400


@pytest.mark.parametrize(("args", "message"), [
    (["plan", "--nodes", "4", "--switch", "h800-hgx"], "'h800-hgx' is a node profile, not a switch profile; "
                                                       "switch profiles: ib-ndr-128-split, ib-ndr-64"),
    (["plan", "--nodes", "4", "--node-profile", "ib-ndr-64"], "'ib-ndr-64' is a switch profile, not a node profile"),
    (["compare", "--switch", "deepseek-v3"], "'deepseek-v3' is a model profile, not a switch profile"),
])
def test_profile_of_another_kind_is_named(cli, args: list[str], message: str) -> None:
    res = cli("topology", *args)
    assert res.exit_code == 2 and message in res.stderr


def _assert_readable(text: str) -> None:
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_tables_are_readable_at_80_columns(cli, small_plan: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    res = cli("topology", "verify", str(small_plan), str(DATA / "miswired.ibnet"))
    assert res.exit_code == 1
    _assert_readable(res.stdout)
    for kind in ("unmatched_device", "cross_plane", "swapped", "missing", "extra"):
        assert f"│ {kind} " in res.stdout
    assert "node0007 mlx5_4 <-> p3-leaf02 port 3" in res.stdout
    assert "plan: node0007 mlx5_4 <-> p4-leaf02 port 3" in res.stdout
    for args in (["--nodes", "16"], ["--nodes", "3000", "--kind", "ft3"], ["--nodes", "200", "--kind", "ft2",
                                                                             "--oversubscription", "3"]):
        res = cli("topology", "plan", *args)
        assert res.exit_code == 0
        _assert_readable(res.stdout)
        assert "│ unused switch ports   │" in res.stdout and "│ cables total / optics │" in res.stdout
