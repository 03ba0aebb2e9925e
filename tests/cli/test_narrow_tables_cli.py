"""Issue 23: no table column is dropped or cut at 80 columns, for every (non-trace) table view.

Each command runs with COLUMNS=80; every table a view yields is recorded (headers and cell text) before
:func:`dsctl.output.tables.fit` adapts it, and every word of every header and cell must then appear in what was
printed, no line may pass 80 characters and nothing may be cut to "…". Trace views belong to the trace tests.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path
from typing import Any

import pytest
from rich.table import Table
from rich.text import Text

from dsctl.output import tables
from tests.unit.calibration_trace import pair_trace

ROOT = Path(__file__).resolve().parents[2]
HEALTH = ROOT / "tests" / "data" / "health"
DOCTOR = ROOT / "tests" / "data" / "storage" / "doctor" / "node_down"
TOPO = ROOT / "tests" / "data" / "topology"
STATS = '{"load": [[90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86]]}'
LONGEST_WORD = 60  #: longer words cannot sit on one line next to a field name at 80 columns
STATS2 = '{"load": [[80, 140, 30, 61, 124, 145, 49, 14, 63, 66, 173, 96]]}'
FABRIC = '{"seed": 1, "noise": 0.03, "faults": [{"nic": "node0007:mlx5_2", "rate": 0.5}]}'  # one NIC at half rate


def example_data_dir() -> Path:
    from dsctl.commands.examples import example_data_dir as shipped

    return shipped()


def commands(tmp: Path) -> list[tuple[Any, ...]]:
    plan, chains = tmp / "plan", tmp / "chains"
    (tmp / "stats.json").write_text(STATS)
    (tmp / "stats2.json").write_text(STATS2)
    (tmp / "fabric.json").write_text(FABRIC)
    (tmp / "pair.json").write_bytes(pair_trace({}))
    return [
        ("profiles", "list"),
        ("profiles", "show", "deepseek-v3"),
        ("config", "show"),
        ("model", "kv-cache"), ("model", "flops"), ("model", "cost", "--tokens", "14.8T"), ("model", "ep-speed-limit"),
        ("model", "memory"),
        ("launch", "--nodes", "256", "--dry-run"),
        ("launch", "layout", "--nodes", "256", "--explain"),
        ("launch", "schedule", "--pp", "8", "--micro-batches", "20"),
        ("topology", "plan", "--nodes", "16", "--out-dir", plan),
        ("topology", "compare"),
        ("topology", "verify", plan, TOPO / "miswired.ibnet"),
        ("topology", "simulate", plan),
        ("storage", "size", "--nodes", "180"),
        ("storage", "chains", "-n", "9", "-d", "2", "--out-dir", chains),
        ("storage", "check-chains", chains),
        ("storage", "expand", "--from", chains, "--add-nodes", "2"),
        ("storage", "doctor", "--chains", DOCTOR / "list-chains.txt", "--targets", DOCTOR / "list-targets.txt"),
        ("eplb", "rebalance", tmp / "stats.json", "-r", "16", "-g", "8", "-n", "2", "--groups", "4"),
        ("eplb", "rebalance", tmp / "stats.json", "-r", "16", "-g", "8", "-n", "2", "--groups", "4", "--out",
         tmp / "placement.json"),
        ("eplb", "simulate", tmp / "stats.json", tmp / "placement.json"),
        ("eplb", "replay", tmp / "stats.json", tmp / "stats2.json", tmp / "stats.json", "-r", "16", "-g", "8",
         "-N", "2", "--groups", "4"),
        ("eplb", "budget", tmp / "stats.json", "--total-slots", "24", "-r", "16", "-g", "8", "-N", "2"),
        ("health", "burn-in", plan, "--fabric-model", tmp / "fabric.json"),
        ("health", "check", "--from-record", HEALTH / "nvlink_link_down.yaml"),
        ("health", "show", "--from-record", HEALTH / "hgx_h800_healthy.yaml"),
        ("health", "topo", "--from-record", HEALTH / "hgx_h800_healthy.yaml"),
        ("health", "checks"),
        ("health", "perf", *sorted((example_data_dir() / "perf").glob("*.txt"))),
        ("launch", "calibrate", tmp / "pair.json"),
    ]


def _plain(cell: Any) -> str:
    if isinstance(cell, Text):
        return cell.plain
    return cell if isinstance(cell, str) else ""


def test_every_table_keeps_every_column_at_80_columns(cli: Any, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    seen_types: set[str] = set()
    recorded: list[list[str]] = []
    real_fit, real_find = tables.fit, None
    from dsctl.output import registry

    real_find = registry.find_renderer

    def find(result: Any) -> Any:
        seen_types.add(type(result).__name__)
        return real_find(result)

    def fit(table: Table, console: Any) -> Any:
        words = [_plain(c.header) for c in table.columns] if table.show_header else []
        words += [_plain(cell) for c in table.columns for cell in c._cells]
        recorded.append([w for text in words for w in text.split()])
        return real_fit(table, console)

    monkeypatch.setattr(tables, "fit", fit)
    monkeypatch.setattr(registry, "find_renderer", find)
    monkeypatch.setenv("COLUMNS", "80")
    failures = []
    for args in commands(tmp_path):
        recorded.clear()
        result = cli(*args)
        assert result.exit_code in (0, 1), (args, result.stderr)
        text = result.stdout
        lines = [line for line in text.splitlines() if len(line) > 80]
        # a word too long for any column at 80 (a temporary folder's path) may only fold: it must then read whole
        # once line breaks, padding and borders are taken out
        squashed = re.sub(r"[\s│┃]", "", text)
        missing = sorted({w for words in recorded for w in words
                          if w not in text and (len(w) < LONGEST_WORD or w not in squashed)})
        if lines or missing or "…" in text:
            failures.append((" ".join(map(str, args)), missing[:5], lines[:1], "…" in text))
    assert failures == [], "\n".join(map(str, failures))
    package = importlib.import_module("dsctl.output")
    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"dsctl.output.{info.name}")
    views = {t.__name__ for t, f in registry._RENDERERS.items() if not f.__module__.startswith("dsctl.output.trace")}
    untested = views - seen_types - {"FleetReport", "LaunchRun"}  # tests/cli/test_first_hour_cli, launch_run tests
    assert untested == set()


def test_a_table_too_wide_for_the_terminal_becomes_one_block_per_row() -> None:
    from rich.console import Console

    table = Table(title="wide")
    for i in range(20):
        table.add_column(f"c{i}", no_wrap=True)
    table.add_row(*[f"{i * 1000}" for i in range(20)])
    console = Console(width=80, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(tables.fit(table, console))
    text = console.export_text()
    assert "c19" in text and "19000" in text and "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
