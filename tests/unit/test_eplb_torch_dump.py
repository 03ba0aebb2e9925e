"""SGLang expert-distribution dumps (torch.save zip files) read without torch, and hostile pickles refused."""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

from dsctl.eplb.stats import parse_stats
from dsctl.eplb.torch_dump import load_torch_file, sglang_logical_count
from dsctl.errors import InputError

DATA = Path(__file__).resolve().parents[1] / "data" / "eplb"
DUMP = DATA / "expert_distribution_recorder_1764600000.0_0.pt"
#: the committed dump's logical_count summed over its 2 steps (tests/data/eplb/README.md)
DUMP_ROW0 = [675, 1432, 1064, 525, 525, 956, 658, 471, 1889, 896, 1045, 1523, 103, 673, 915, 1478]


def test_committed_sglang_dump_is_read_without_torch() -> None:
    weight = parse_stats(DUMP.name, DUMP.read_bytes())
    assert weight.shape == (4, 16) and weight[0].tolist() == DUMP_ROW0
    assert weight.sum() == pytest.approx(61_740, abs=20_000)  # 128 counts of 0..999


def test_real_torch_dumps_round_trip(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    counts = torch.arange(2 * 3 * 8, dtype=torch.int64).reshape(2, 3, 8)
    cases = {
        "int64": counts,
        "int32 strided view": counts.to(torch.int32)[:, :, ::2],  # non-contiguous: strides matter
        "float32": counts.float() / 2,
    }
    for label, tensor in cases.items():
        path = tmp_path / "expert_distribution_recorder_1.pt"
        torch.save({"rank": 0, "logical_count": tensor, "average_utilization_rate_over_window": None}, path)
        got = sglang_logical_count(path.name, path.read_bytes(), 1000)
        assert np.array_equal(got, tensor.sum(dim=0).double().numpy()), label
    nested = tmp_path / "nested.pt"
    torch.save({"a": [torch.ones(2, 2, dtype=torch.bool), (1, "x")], "b": {"c": torch.zeros(0)}}, nested)
    data = load_torch_file("nested.pt", nested.read_bytes(), 1000)
    assert data["a"][0].tolist() == [[True, True], [True, True]] and data["a"][1] == (1, "x")
    assert data["b"]["c"].shape == (0,)


class _Evil:
    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.target), "w"))  # unpickling it would create the file


def _zip_with_pickle(payload: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", payload)
        z.writestr("archive/byteorder", "little")
    return buf.getvalue()


def test_hostile_pickle_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    hostile = _zip_with_pickle(pickle.dumps({"logical_count": _Evil(target)}, protocol=2))
    with pytest.raises(InputError, match=r"refused to load: the pickle names (io|builtins)\.open"):
        parse_stats("evil.pt", hostile)
    assert not target.exists()
    # the same object, proven hostile by the ordinary unpickler (in a sandbox file)
    pickle.loads(pickle.dumps(_Evil(target))).close()  # the point of the test
    assert target.exists()


def test_hostile_object_inside_a_real_torch_save_is_refused(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    target, path = tmp_path / "pwned", tmp_path / "dump.pt"
    torch.save({"logical_count": torch.zeros(1, 2, 3), "x": _Evil(target)}, path)
    with pytest.raises(InputError, match="refused to load"):
        sglang_logical_count(path.name, path.read_bytes(), 1000)
    assert not target.exists()


@pytest.mark.parametrize(("content", "needle"), [
    (b"PK\x03\x04garbage", "not a torch.save zip archive"),
    (_zip_with_pickle(pickle.dumps({"other": 1}, protocol=2)), "no \"logical_count\""),
    (_zip_with_pickle(b"\x80\x02}q\x00"), "the pickle ends without STOP"),
    (_zip_with_pickle(pickle.dumps({"logical_count": [1, 2]}, protocol=2)), "must be an integer or float tensor"),
])
def test_broken_dumps_are_clear_errors(content: bytes, needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        parse_stats("d.pt", content)
