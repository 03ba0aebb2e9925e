"""Issue 30 item 4, output that reads well: a list of the health checks behind the ids, NVLink counts that do not
look like faults on an H800, profile sizes and rates in their units."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsctl.health.check_catalog import TEXT
from dsctl.health.checks import CHECKS

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "dsctl" / "_example_data" / "node.yaml"


def docs_check_rows() -> dict[str, tuple[str, str, str]]:
    """docs/health.md's check table: id -> (name, reads, judges)."""
    rows = {}
    for line in (ROOT / "docs" / "health.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) == 4 and cells[0][:1] in "GR" and cells[0][1:].isdigit():
            rows[cells[0]] = (cells[1], cells[2], cells[3])
    return rows


def test_every_check_has_its_text_and_the_docs_table_is_that_text() -> None:
    assert sorted(TEXT) == sorted(c.id for c in CHECKS)
    assert docs_check_rows() == TEXT


def test_health_checks_lists_every_check_with_what_it_reads_and_how_it_judges(cli: Any) -> None:
    result = cli("health", "checks", "-f", "json")
    assert result.exit_code == 0, result.stderr
    checks = result.json()["checks"]
    assert [c["id"] for c in checks] == [c.id for c in CHECKS]
    g6 = next(c for c in checks if c["id"] == "G6")
    assert g6["area"] == "nvlink" and "H800 8" in g6["judges"] and "nvmlDeviceGetNvLinkState" in g6["reads"]
    table = cli("health", "checks")
    assert table.exit_code == 0 and "R12" in table.stdout and "`" not in table.stdout


def test_a_passing_report_points_to_the_check_list(cli: Any) -> None:
    result = cli("health", "check", "--from-record", NODE)
    assert result.exit_code == 0, result.stderr
    assert "OK: G1 G2" in result.stdout and "dsctl health checks" in result.stdout


def test_health_show_counts_an_h800s_nvlinks_against_its_sku_not_nvmls_18_slots(cli: Any) -> None:
    result = cli("health", "show", "--from-record", NODE, "-f", "json")
    assert result.exit_code == 0, result.stderr
    assert {g["nvlinks"] for g in result.json()["gpus"]} == {"8/8"}


def test_profiles_show_prints_sizes_and_rates_in_units(cli: Any) -> None:
    result = cli("profiles", "show", "h800-hgx")
    assert result.exit_code == 0, result.stderr
    flat = " ".join(result.stdout.split())
    for shown in ("80.0 GiB", "989 TFLOPS", "400.0 GB/s", "400 Gb/s"):
        assert shown in flat, shown
    assert "85,899,345,920" not in flat
    data = cli("profiles", "show", "h800-hgx", "-f", "json").json()
    assert data["hbm_bytes"] == 80 * 2**30  # JSON keeps base units


def test_help_shows_flags_as_flags_not_as_options_taking_a_bool(cli: Any) -> None:
    for argv in (("--help",), ("launch", "--help"), ("health", "check", "--help"), ("topology", "plan", "--help")):
        result = cli(*argv)
        assert result.exit_code == 0, result.stderr
        assert "<bool>" not in result.stdout, argv
    assert cli("launch", "-h").exit_code == 0


def test_dry_run_prints_the_job_file_it_would_run_and_writes_nothing(cli: Any, tmp_path: Path,
                                                                      monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    args = ("launch", "--nodes", "4", "--model", "deepseek-v2-lite", "--backend", "slurm")
    dry = cli(*args, "--dry-run", "--", "train.py")
    assert dry.exit_code == 0, dry.stderr
    assert "--- job.sbatch (--dry-run: not written, not submitted) ---" in dry.stdout
    assert "#SBATCH --nodes=4" in dry.stdout and "srun --kill-on-bad-exit=1" in dry.stdout
    assert list(tmp_path.iterdir()) == []
    plain = cli(*args, "--", "train.py")
    assert plain.exit_code == 0 and "job.sbatch" not in plain.stdout
    assert "note: --backend slurm alone writes no job file" in plain.stderr


def test_verify_against_the_wrong_plan_says_so(cli: Any, tmp_path: Path) -> None:
    """The README once checked the shipped 10-node dump against a 16,384-GPU plan: 32,512 "missing" cables and no
    word that the plan was the wrong one."""
    dump = ROOT / "dsctl" / "_example_data" / "fabric.txt"
    assert cli("topology", "plan", "--gpus", "16384", "--out-dir", tmp_path / "big").exit_code == 0
    assert cli("topology", "plan", "--nodes", "10", "--radix", "8", "--out-dir", tmp_path / "small").exit_code == 0
    wrong = cli("topology", "verify", tmp_path / "big", dump, "-f", "json")
    assert wrong.exit_code == 1
    assert any("160 links for 32,768 planned cables" in w and "plan of this fabric" in w
               for w in wrong.json()["warnings"])
    assert "warning: the dumps hold 160 links" in cli("topology", "verify", tmp_path / "big", dump).stdout
    right = cli("topology", "verify", tmp_path / "small", dump, "-f", "json")
    assert right.exit_code == 0 and right.json()["warnings"] == []


def test_the_burn_in_picture_draws_the_worst_cable_on_top_and_fits_its_text(cli: Any, tmp_path: Path) -> None:
    """Issue 30: the 40% cable was drawn under 15 green parallel cables at the same coordinates (the picture looked
    all green), and the legend ran past the picture's edge."""
    import re

    data = ROOT / "dsctl" / "_example_data"
    assert cli("topology", "plan", "--nodes", "128", "--out-dir", tmp_path / "plan128").exit_code == 0
    result = cli("health", "burn-in", tmp_path / "plan128", "--fabric-model", data / "faults128.yaml", "--out-dir",
                 tmp_path / "burnin")
    assert result.exit_code == 1, result.stderr
    svg = (tmp_path / "burnin" / "plane2.svg").read_text()
    lines = re.findall(r'<line x1="([\d.]+)" y1="([\d.]+)" x2="([\d.]+)" y2="([\d.]+)".*?measured/expected (\d+)%',
                       svg)
    last_at: dict[tuple[str, ...], int] = {}
    worst_at: dict[tuple[str, ...], int] = {}
    for *xy, ratio in lines:
        last_at[tuple(xy)] = int(ratio)
        worst_at[tuple(xy)] = min(worst_at.get(tuple(xy), 100), int(ratio))
    assert min(worst_at.values()) == 40  # the slow cable p2-spine01:9
    assert last_at == worst_at  # at every spot the worst cable is the one you see
    width = float(re.search(r'<svg [^>]*width="([\d.]+)"', svg).group(1))  # type: ignore[union-attr]
    legend = re.search(r'<text x="20" y="36">(.*?)</text>', svg).group(1)  # type: ignore[union-attr]
    assert width >= 20 + 0.56 * 10 * len(legend)
