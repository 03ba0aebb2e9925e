"""storage chains' files rendered a block of chains at a time: the same bytes whole or streamed, and --out-dir
writes them piece by piece, all or nothing (issue 32 item 5)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from dsctl.output.files import write_files
from dsctl.storage import chaintable
from dsctl.storage.api import generate_chains
from dsctl.storage.chaintable import FILE_NAMES, IdScheme

#: sha256 of storage chains' files before they were rendered in pieces (main at b9dfc84)
BEFORE = {
    (25, 16, 3, None, ()): {
        "create_target_cmd.txt": "1c566725bf0ec50dc80ae249cfbdec4cd1640e34185407209a9c001a3f862a9a",
        "generated_chain_table.csv": "8f1b0aa1e85b9df9083c016395afffa34d3a5113510599c9f332d9ceb6d75c20",
        "generated_chains.csv": "09eb8693bfa51043c0bc371d6f4cdc10a58a310b8de2c0acd1afdeca25ee1fdc",
        "remove_target_cmd.txt": "d0223f5c2eca2d3812e4ec6087d02d72973aeadbf3c146e24dd8d439aee2ffc3",
    },
    (12, 4, 2, 6, ("1MB", "4MB")): {
        "create_target_cmd.txt": "11f060507a7d6f2dce4848a186b334b0a247112d4c8d0d91bf4e32a1eb7e5510",
        "generated_chain_table.csv": "39a83e34543759ada5d378726bee2e2e19de77be120a70363afdc6ebd224be7e",
        "generated_chains.csv": "908ee3d097a8158ced531b5ea3908146d762699a1350a7a341523f40782253d2",
    },
}


@pytest.mark.parametrize("shape", sorted(BEFORE, key=str))
def test_files_are_the_same_bytes_as_before(shape: tuple, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[type-arg]
    monkeypatch.setattr(chaintable, "CHAINS_PER_PIECE", 7)  # many pieces even on a small table
    v, disks, k, r, chunks = shape
    files = generate_chains(v, disks, k, r, 1, IdScheme(), chunk_sizes=chunks).files_text
    for name, digest in BEFORE[shape].items():
        assert hashlib.sha256(files[name].encode()).hexdigest() == digest


def test_out_dir_streams_the_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chaintable, "CHAINS_PER_PIECE", 5)
    files = generate_chains(12, 4, 3, None, 1, IdScheme(), with_svg=True).files_text
    whole = {name: files[name] for name in files}
    monkeypatch.setattr(type(files), "__getitem__", lambda self, name: pytest.fail(f"{name} rendered whole"))
    write_files(tmp_path / "out", files)
    assert {p.name: p.read_text() for p in (tmp_path / "out").iterdir() if not p.name.startswith(".")} == whole
    assert set(whole) == {*FILE_NAMES, "pair_share.svg"}


class _Failing(Mapping[str, str]):
    """Two files; the second fails half way through its pieces."""

    def __getitem__(self, name: str) -> str:
        raise AssertionError("streamed files are not read whole")

    def __iter__(self) -> Iterator[str]:
        return iter(["a.txt", "b.txt"])

    def __len__(self) -> int:
        return 2

    def pieces(self, name: str) -> Iterator[str]:
        yield f"{name} first\n"
        if name == "b.txt":
            raise OSError(28, "No space left on device")
        yield "end\n"


def test_a_failed_stream_leaves_the_old_folder_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_files(out, {"a.txt": "old\n"})
    with pytest.raises(Exception, match="No space left"):
        write_files(out, _Failing())
    assert (out / "a.txt").read_text() == "old\n"
    assert not (out / "b.txt").exists()
