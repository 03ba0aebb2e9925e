"""dsctl topology verify with one dump per plane through the real entry point: folders, GUID records, counters."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture()
def plan_dir(cli, tmp_path: Path) -> Path:
    out = tmp_path / "plan"
    assert cli("topology", "plan", "--nodes", "10", "--radix", "8", "--out-dir", str(out)).exit_code == 0
    return out


def _dumps(plan_dir: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "dumps"
    folder.mkdir()
    for p in range(8):
        (folder / f"plane{p}.ibnet").write_text((plan_dir / f"expected-plane{p}.ibnet").read_text())
    return folder


def test_a_folder_of_dumps_records_guids_and_flags_a_replaced_hca(cli, plan_dir: Path, tmp_path: Path) -> None:
    folder = _dumps(plan_dir, tmp_path)
    record = tmp_path / "guids.map"
    ok = cli("topology", "verify", str(plan_dir), str(folder), "--record-guids", str(record), "-f", "json")
    assert ok.exit_code == 0, ok.stderr
    assert [d["plane"] for d in ok.json()["dumps"]] == list(range(8))
    lines = [x for x in record.read_text().splitlines() if not x.startswith("#")]
    assert len(lines) == 10 * 8 + 8 * 5  # every NIC and every switch
    # replace node0003's mlx5_2 HCA: same description, new GUID
    old = next(x.split()[0] for x in lines if x.endswith('"node0003 mlx5_2"'))
    dump = folder / "plane2.ibnet"
    dump.write_text(dump.read_text().replace(old[2:], "00000000deadbeef"))
    bad = cli("topology", "verify", str(plan_dir), str(folder), "--guids", str(record), "-f", "json")
    assert bad.exit_code == 1
    findings = bad.json()["findings"]
    assert [(f["kind"], f["a_device"], f["a_port"]) for f in findings] == [("guid_changed", "node0003", "mlx5_2")]
    assert findings[0]["value"] == "0x00000000deadbeef" and findings[0]["action_kind"] == "check_plan"


def test_one_dump_left_out_and_counters(cli, plan_dir: Path, tmp_path: Path) -> None:
    folder = _dumps(plan_dir, tmp_path)
    (folder / "plane7.ibnet").unlink()
    text = (folder / "plane0.ibnet").read_text()
    lid = next(int(x.split("lid ")[1].split()[0]) for x in text.splitlines() if x.startswith("Switch"))
    counters = tmp_path / "plane0.perfquery"
    counters.write_text(f"# Port counters: Lid {lid} port 1\nSymbolErrorCounter:..............99\n"
                        "LinkDownedCounter:...............3\n")
    res = cli("topology", "verify", str(plan_dir), str(folder), "--counters", str(counters), "-f", "json")
    assert res.exit_code == 1
    kinds = sorted(f["kind"] for f in res.json()["findings"])
    assert kinds == ["error_counters", "link_downed", "plane_not_seen"]
    table = cli("topology", "verify", str(plan_dir), str(folder), "--counters", str(counters))
    assert "plane_not_seen" in table.stdout and "ibnetdiscover -C mlx5_7 -P 1" in table.stdout.replace("\n", " ")
    strict = cli("topology", "verify", str(plan_dir), str(folder), "--counters", str(counters),
                 "--threshold", "bogus=1")
    assert strict.exit_code == 2 and "unknown counter" in strict.stderr


def test_bad_name_map_and_empty_folder_exit_2(cli, plan_dir: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    res = cli("topology", "verify", str(plan_dir), str(empty))
    assert res.exit_code == 2 and "holds no files" in res.stderr
    bad_map = tmp_path / "names.map"
    bad_map.write_text("0x12 \"a\"\nnot a map line\n")
    res = cli("topology", "verify", str(plan_dir), str(plan_dir / "expected-plane0.ibnet"), "--node-name-map",
              str(bad_map))
    assert res.exit_code == 2 and "line 2" in res.stderr


def test_the_plans_ibdiagnet_topology_files_verify_and_a_moved_cable_is_found(cli, plan_dir: Path,
                                                                             tmp_path: Path) -> None:
    topo = sorted(str(p) for p in plan_dir.glob("expected-plane*.topo"))
    assert len(topo) == 8 and (plan_dir / "ibnl" / "DSCTL_SW8.ibnl").read_text().startswith("TOPSYSTEM DSCTL_SW8\n")
    ok = cli("topology", "verify", str(plan_dir), *topo, "-f", "json")
    assert ok.exit_code == 0, ok.stderr
    assert {d["format"] for d in ok.json()["dumps"]} == {"ibdm-topo"}
    # node0001 mlx5_4 moved from p4-leaf01 port 1 to the free port 3 of p4-leaf03 (listed from the host only)
    moved = tmp_path / "plane4.topo"
    text = (plan_dir / "expected-plane4.topo").read_text()
    assert "    P1 -4x-100G-> DSCTL_HOST_P4 node0001 mlx5_4/P1\n" in text
    text = text.replace("    P1 -4x-100G-> DSCTL_HOST_P4 node0001 mlx5_4/P1\n", "")
    moved.write_text(text.replace("mlx5_4/P1 -4x-100G-> DSCTL_SW8 p4-leaf01 P1",
                                  "mlx5_4/P1 -4x-100G-> DSCTL_SW8 p4-leaf03 P3"))
    bad = cli("topology", "verify", str(plan_dir), *[str(moved) if t.endswith("plane4.topo") else t for t in topo],
              "-f", "json")
    assert bad.exit_code == 1, bad.stderr
    found = [(f["kind"], f["a_device"], f["a_port"], f["b_device"], f["b_port"]) for f in bad.json()["findings"]]
    assert found == [("swapped", "node0001", "mlx5_4", "p4-leaf03", "3")], found


def test_the_real_superpod_dump_through_the_entry_point(cli, tmp_path: Path) -> None:
    """Issue 29: the DGX H100 SuperPOD dump (topograph's test data) against the plan of its pattern; the record of
    GUIDs then names the 66 HCAs placed by position, so a second run places none and finds the same."""
    from tests import real_fabric

    text = real_fabric.DUMP.read_text()
    (tmp_path / "plan.json").write_text(real_fabric.plan_json(text))
    (tmp_path / "kernel.map").write_text(real_fabric.kernel_name_map(text))
    record = tmp_path / "guids.map"
    args = ["topology", "verify", str(tmp_path / "plan.json"), str(real_fabric.DUMP), "--node-name-map",
            str(tmp_path / "kernel.map")]
    first = cli(*args, "--record-guids", str(record), "-f", "json")
    assert first.exit_code == 1, first.stderr
    data = first.json()
    deviations = real_fabric.deviations(text)
    assert data["switch_internal_links"] == len(deviations["internal"])
    assert len(data["matched_by_position"]) == len(deviations["default_ok"])
    assert not any(f["a_device"].startswith("MT4129") or f["b_device"].startswith("MT4129") for f in data["findings"])
    again = cli(*args, "--guids", str(record), "-f", "json").json()
    assert again["matched_by_position"] == [] and again["counts"] == data["counts"]
    table = cli(*args)
    assert "40 switch-internal links" in table.stdout and "66 HCAs with the default description" in table.stdout
