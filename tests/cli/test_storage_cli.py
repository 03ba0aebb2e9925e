"""dsctl storage size|chains|check-chains through the real entry point."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

Cli = Callable[..., CliResult]
DATA = Path(__file__).resolve().parents[1] / "data" / "storage"


def test_size_json_reproduces_the_published_peak_read(cli: Cli) -> None:
    result = cli("storage", "size", "--nodes", "180", "--clients", "500", "--client-nic", "200 Gb/s", "-f", "json")
    assert result.exit_code == 0, result.stderr
    data = result.json()
    assert data["dsctl"]["command"] == "storage size"
    assert data["read"]["bound_by"] == "storage_nic"
    assert data["read"]["bytes_per_s"] / 2**40 == pytest.approx(6.63, abs=0.01)
    assert {"usable_capacity_bytes", "write", "degraded_read", "targets", "min_nodes_for_targets"} <= data.keys()


def test_size_exits_1_when_a_target_is_missed_and_names_the_node_count(cli: Cli) -> None:
    result = cli("storage", "size", "--nodes", "20", "--dataset", "10 PiB", "-f", "json")
    assert result.exit_code == 1
    data = result.json()
    assert data["targets"][0]["met"] is False and data["min_nodes_for_targets"] == 145
    assert cli("storage", "size", "--nodes", "145", "--dataset", "10 PiB").exit_code == 0


def test_size_table_view(cli: Cli) -> None:
    result = cli("storage", "size", "--nodes", "25", "--checkpoint", "5 TiB", "--checkpoint-time-s", "120")
    assert result.exit_code == 0
    assert "write ceiling" in result.stdout and "checkpoint_seconds" in result.stdout


@pytest.mark.parametrize(("args", "option"), [
    (["--nodes", "0"], "--nodes"),
    (["--nodes", "5", "--replication", "1"], "--replication"),
    (["--nodes", "2", "--replication", "3"], "--replication"),
    (["--nodes", "5", "--dataset", "10"], "--dataset"),
    (["--nodes", "5", "--dataset", "-1 PiB"], "--dataset"),
    (["--nodes", "5", "--checkpoint", "1 TiB"], "--checkpoint"),
    (["--nodes", "5", "--fill", "2"], "--fill"),
    (["--nodes", "5", "--read-per-client", "90 GiB/s", "--clients", "4"], "--read-per-client"),
    (["--nodes", "5", "--read-per-client", "fast", "--clients", "4"], "--read-per-client"),
    (["--nodes", "5.5"], "--nodes"),
    (["--nodes", "5", "--storage", "nope"], "nope"),
])
def test_size_bad_input_is_one_line_and_exit_2(cli: Cli, args: list[str], option: str) -> None:
    result = cli("storage", "size", *args)
    assert result.exit_code == 2
    assert option in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_chains_writes_the_four_files_and_svg(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "table"
    result = cli("storage", "chains", "--nodes", "7", "--ssds-per-node", "16", "--out-dir", str(out), "-f", "json")
    assert result.exit_code == 0, result.stderr
    data = result.json()
    assert data["balance"]["pair_share_disk0"] == {"1": 21}
    assert data["balance"]["redirect"]["max"] == data["balance"]["redirect"]["min"] == 8
    assert data["balance"]["sync_source"]["max"] == data["balance"]["sync_source"]["min"] == 8
    names = sorted(p.name for p in out.iterdir())
    assert names == [".dsctl-manifest.json", "create_target_cmd.txt", "generated_chain_table.csv",
                     "generated_chains.csv", "pair_share.svg", "remove_target_cmd.txt"]
    assert len((out / "create_target_cmd.txt").read_text().splitlines()) == 7 * 16 * 3
    assert (out / "pair_share.svg").read_text().startswith("<svg")
    check = cli("storage", "check-chains", str(out), "-f", "json")
    assert check.exit_code == 0
    assert check.json()["balance"]["sync_source"] == data["balance"]["sync_source"]


def test_chains_without_out_writes_nothing(cli: Cli, tmp_path: Path) -> None:
    result = cli("storage", "chains", "--nodes", "10", "--ssds-per-node", "2")
    assert result.exit_code == 0
    assert "no files written" in result.stdout


@pytest.mark.parametrize(("args", "option"), [
    (["--nodes", "1", "--ssds-per-node", "16"], "--nodes"),
    (["--nodes", "5", "--ssds-per-node", "16", "--replication", "1"], "--replication"),
    (["--nodes", "5", "--ssds-per-node", "16", "--replication", "6"], "--replication"),
    (["--nodes", "5", "--ssds-per-node", "0"], "--ssds-per-node"),
    (["--nodes", "5", "--ssds-per-node", "2", "--chunk-size", "1XB"], "--chunk-size"),
    (["--nodes", "5", "--ssds-per-node", "2", "--chain-id-prefix", "50"], "--chain-id-prefix"),
    (["--nodes", "5", "--ssds-per-node", "2", "--chain-table-id", "0"], "--chain-table-id"),
    (["--nodes", "5", "--ssds-per-node", "2", "--first-node-id", "999999"], "--first-node-id"),
])
def test_chains_bad_input(cli: Cli, tmp_path: Path, args: list[str], option: str) -> None:
    out = tmp_path / "out"
    result = cli("storage", "chains", *args, "--out-dir", str(out))
    assert result.exit_code == 2
    assert option in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()


def test_check_chains_on_upstream_style_files(cli: Cli) -> None:
    result = cli("storage", "check-chains", str(DATA / "tiny_v3_k2_r2_d2" / "generated_chains.csv"), "-f", "json")
    assert result.exit_code == 0
    data = result.json()
    assert data["node_source"] == "target-id digits" and data["num_nodes"] == 3


def test_check_chains_exit_1_on_a_repeated_node(cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "generated_chains.csv"
    bad.write_text("ChainId,TargetId,TargetId\n900100001,101000100101,101000100102\n")
    result = cli("storage", "check-chains", str(bad))
    assert result.exit_code == 1
    assert "two targets on node 10001" in result.stdout


@pytest.mark.parametrize("content", ["", "ChainId,TargetId\n1,abc\n"])
def test_check_chains_garbage_exit_1_naming_the_line(cli: Cli, tmp_path: Path, content: str) -> None:
    path = tmp_path / "c.csv"
    path.write_text(content)
    result = cli("storage", "check-chains", str(path))
    assert result.exit_code == 1 and "generated_chains.csv line" in result.stdout
    assert cli("storage", "check-chains", str(tmp_path / "missing.csv")).exit_code == 2


def test_check_chains_names_the_duplicated_chain_id(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "dup.csv"
    path.write_text("ChainId,TargetId,TargetId\n9001,101000100101,101000200101\n9001,101000300101,101000400101\n")
    result = cli("storage", "check-chains", str(path), "-f", "json")
    assert result.exit_code == 1
    assert {"chain_id": 9001, "problem": "chain id appears again (first on line 2)",
            "where": "generated_chains.csv line 3"} in result.json()["problems"]


def test_check_chains_target_twice_in_one_chain_is_not_called_another_chain(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "rep.csv"
    path.write_text("ChainId,TargetId,TargetId\n9001,101000100101,101000100101\n")
    problems = [p["problem"] for p in cli("storage", "check-chains", str(path), "-f", "json").json()["problems"]]
    assert "target 101000100101 listed 2 times in this chain" in problems
    assert not any("also in chain" in p for p in problems)


def test_check_chains_without_balance_prints_no_empty_table(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "one.csv"
    path.write_text("ChainId,TargetId\n9001,101000100101\n")
    result = cli("storage", "check-chains", str(path))
    assert result.exit_code == 0
    assert "1 node (" in result.stdout and "balance not measured" in result.stdout
    assert "┌" not in result.stdout


def test_chains_out_on_an_unwritable_file_system_exits_2(cli: Cli) -> None:
    result = cli("storage", "chains", "-N", "5", "-d", "2", "--out-dir", "/proc/dsctl-chains")
    assert result.exit_code == 2 and "--out-dir /proc/dsctl-chains: cannot write" in result.stderr


def test_expand_writes_a_table_that_check_chains_passes(cli: Cli, tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    assert cli("storage", "chains", "-N", "9", "-d", "2", "--out-dir", str(old)).exit_code == 0
    result = cli("storage", "expand", "--from", str(old), "--add-nodes", "2", "--out-dir", str(new),
                 "--target-bytes", "1 TiB", "-f", "json")
    assert result.exit_code == 0, result.stderr
    data = result.json()
    assert data["new_nodes"] == 11 and data["moved_over_bound"] <= 1.1 and data["check_problems"] == []
    assert data["steps"][0]["bytes"] == 2**40
    assert {p.name for p in new.iterdir()} >= {"generated_chains.csv", "migration_steps.txt", "new_chains.csv"}
    assert cli("storage", "check-chains", str(new)).exit_code == 0
    table = cli("storage", "expand", "--from", str(old), "--add-nodes", "2")
    assert table.exit_code == 0 and "lower bound" in table.stdout and "no files written" in table.stdout


def test_expand_bad_input_exit_2(cli: Cli, tmp_path: Path) -> None:
    missing = cli("storage", "expand", "--from", str(tmp_path / "nope"), "--add-nodes", "2")
    assert missing.exit_code == 2 and "--from" in missing.stderr
    old = tmp_path / "old"
    cli("storage", "chains", "-N", "9", "-d", "1", "--out-dir", str(old))
    zero = cli("storage", "expand", "--from", str(old), "--add-nodes", "0")
    assert zero.exit_code == 2 and zero.stderr.startswith("error: --add-nodes 0 must be 1..")
    used = cli("storage", "expand", "--from", str(old), "--add-nodes", "2", "--used", "1.5")
    assert used.exit_code == 2 and used.stderr.startswith("error: --used 1.5 must be in [0, 1]")


@pytest.mark.parametrize(("state", "code"), [("healthy", 0), ("node_down", 1), ("two_nodes_down", 1),
                                             ("lastsrv_unavailable", 1), ("disk_replaced", 1), ("syncing", 1)])
def test_doctor_exit_codes_per_state(cli: Cli, state: str, code: int) -> None:
    folder = DATA / "doctor" / state
    result = cli("storage", "doctor", "--chains", str(folder / "list-chains.txt"),
                 "--targets", str(folder / "list-targets.txt"))
    assert result.exit_code == code and "3FS doctor" in result.stdout


def test_doctor_garbage_exit_2(cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "c.txt"
    bad.write_text("not admin_cli output\n")
    result = cli("storage", "doctor", "--chains", str(bad))
    assert result.exit_code == 2 and "line 1" in result.stderr


def test_size_without_nodes_finds_the_smallest_cluster(cli: Cli) -> None:
    result = cli("storage", "size", "--dataset", "10 PiB", "--read", "3 TiB/s", "--checkpoint-model", "deepseek-v3",
                 "--checkpoint-time-s", "30", "--recovery-rate", "20 GB/s", "-f", "json")
    assert result.exit_code == 0, result.stderr
    data = result.json()
    assert data["num_nodes"] == 145 and data["num_ssds"] == 145 * 16 and data["smallest_for"] == "dataset"
    assert data["one_node_loss"]["recovery_bytes_per_s"] == 20e9
    table = cli("storage", "size", "--write", "1 TB/s")
    assert table.exit_code == 0 and "losing one node" in table.stdout and "smallest cluster: 75 nodes" in table.stdout
    none = cli("storage", "size")
    assert none.exit_code == 2 and "--dataset" in none.stderr


def test_check_chains_reads_table_files_as_large_as_expand_does(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`storage chains` for 1,000 nodes writes a create_target_cmd.txt above the default 64 MiB input limit, and
    check-chains refused its own output (exit 2). It now reads table files up to expand's MAX_TABLE_FILE_BYTES
    (here shown with a global limit of 1,000 bytes, far below the files)."""
    out = tmp_path / "chains"
    assert cli("storage", "chains", "--nodes", "5", "-d", "2", "--out-dir", str(out)).exit_code == 0
    assert (out / "create_target_cmd.txt").stat().st_size > 1000
    r = cli("--max-input-bytes", "1000", "storage", "check-chains", str(out))
    assert r.exit_code == 0, r.stderr
    r = cli("--max-input-bytes", "1000", "storage", "doctor", "--chains", str(out / "create_target_cmd.txt"))
    assert r.exit_code == 2 and "1,000" in r.stderr  # other inputs keep the global limit
