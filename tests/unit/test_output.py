from __future__ import annotations

import io
import json
import math
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from dsctl.errors import InputError
from dsctl.output import OutputFormat, emit, to_data
from dsctl.output.files import atomic_write, write_files


@dataclass(frozen=True)
class _Inner:
    values: np.ndarray
    ratio: float


@dataclass(frozen=True)
class _Result:
    name: str
    inner: _Inner
    hidden: int = field(default=0, metadata={"output": False})
    exit_code: int = 1


def test_to_data_converts_numpy_nan_and_skips_hidden_fields() -> None:
    data = to_data(_Result("x", _Inner(np.array([[1, 2], [3, 4]]), math.nan)))
    assert data == {"name": "x", "inner": {"values": [[1, 2], [3, 4]], "ratio": None}, "exit_code": 1}


def test_emit_json_returns_the_result_exit_code() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        code = emit(_Result("x", _Inner(np.arange(3), 0.5)), OutputFormat.json, "test cmd")
    assert code == 1
    data = json.loads(out.getvalue())
    assert data["dsctl"]["command"] == "test cmd" and data["dsctl"]["exit_code"] == 1


def test_list_results_are_printed_bare() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        emit([{"a": 1}], OutputFormat.json, "x")
    assert json.loads(out.getvalue()) == [{"a": 1}]


def test_write_files_is_all_or_nothing(tmp_path: Path) -> None:
    target = tmp_path / "out"
    write_files(target, {"a.txt": "A", "sub/b.txt": b"B"})
    assert (target / "a.txt").read_text() == "A" and (target / "sub" / "b.txt").read_bytes() == b"B"

    class Boom(Exception):
        pass

    from dsctl.output.files import staged_directory

    with pytest.raises(Boom), staged_directory(tmp_path / "second") as stage:
        (stage / "partial.txt").write_text("half")
        raise Boom
    assert not (tmp_path / "second").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_atomic_write_into_missing_folder_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        atomic_write(tmp_path / "missing" / "f.json", "{}")
    atomic_write(tmp_path / "f.json", "{}")
    assert (tmp_path / "f.json").read_text() == "{}" and len(list(tmp_path.iterdir())) == 1


def test_an_os_refusal_to_write_is_an_input_error_naming_the_option(tmp_path: Path) -> None:
    # /proc refuses new files even to root: the error is exit 2 with the option and path, never exit 4
    with pytest.raises(InputError, match=r"^--svg /proc/x\.svg: cannot write"):
        atomic_write(Path("/proc/x.svg"), "<svg/>", option="--svg")
    with pytest.raises(InputError, match=r"^--out-dir /proc/dsctl-out: cannot write"):
        write_files(Path("/proc/dsctl-out"), {"a.txt": "a"})
    assert not Path("/proc/dsctl-out").exists()
