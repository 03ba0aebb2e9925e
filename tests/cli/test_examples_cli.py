"""dsctl examples [DIR]: the shipped example inputs, written through the one writer rule."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from dsctl.commands.examples import USES, example_data_dir
from dsctl.output.files import MANIFEST_NAME

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_examples_are_what_the_generator_writes(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_examples", ROOT / "tests" / "data" / "examples" /
                                                  "make_examples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path / "fresh")
    fresh = sorted(str(p.relative_to(tmp_path / "fresh")) for p in (tmp_path / "fresh").rglob("*") if p.is_file())
    assert fresh == sorted(USES)
    for name in fresh:
        assert (tmp_path / "fresh" / name).read_bytes() == (example_data_dir() / name).read_bytes(), name


def test_examples_writes_every_file_and_never_a_foreign_folder(cli: Any, tmp_path: Path) -> None:
    out = tmp_path / "try"
    result = cli("examples", out, "-f", "json")
    assert result.exit_code == 0, result.stderr
    assert sorted(f["path"] for f in result.json()["files"]) == sorted(USES)
    assert json.loads((out / MANIFEST_NAME).read_text())["files"] == sorted(USES)
    assert (out / "today.npy").read_bytes() == (example_data_dir() / "today.npy").read_bytes()
    assert cli("examples", out).exit_code == 0  # dsctl's folder: replaced, the old one kept as try.prev
    assert (tmp_path / "try.prev" / "node.yaml").is_file()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    result = cli("examples", mine)
    assert result.exit_code == 2 and "was not written by dsctl" in result.stderr
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
