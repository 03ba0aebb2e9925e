"""Issue 23, item 1: every command that writes a file refuses a target it must not replace.

For each writer (found from the option registry, so a new writer without a case here fails
``test_every_writer_has_a_case``) the target is, in turn, a character device (made with mknod in tmp_path, never
the system's /dev/null), a FIFO, a symbolic link, a folder (foreign for ``--out DIR`` writers) and one of the
command's own inputs. Each must end with exit 2, an ``error:`` line naming the option, and the target and its
folder exactly as before (inode, type, content, names beside it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer

from dsctl.cli import app
from dsctl.output import files
from dsctl.output.health_burnin import TEXTFILE_NAME as BURNIN_TEXTFILE
from dsctl.output.prometheus import TEXTFILE_NAME

ROOT = Path(__file__).resolve().parents[2]
HEALTHY = ROOT / "tests" / "data" / "health" / "hgx_h800_healthy.yaml"
GLOO = [ROOT / "tests" / "data" / "trace" / f"gloo_rank{i}.json.gz" for i in (0, 1)]
STATS = {"load": [[90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
                  [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27]]}
EPLB_ARGS = ("-r", "16", "-g", "8", "-N", "2", "--groups", "4")
#: --sglang-out needs statistics of a model's shape (its layer count is checked): deepseek-v2-lite, 26 MoE layers
LITE_ARGS = ("-m", "deepseek-v2-lite", "-r", "72", "-g", "8", "-N", "1")
LAUNCH = ("launch", "--nodes", "1", "--model", "deepseek-v2-lite", "--backend", "slurm")
#: option names that write whatever their help says; other writers are found from their help ("Write ...",
#: "Also write ...", "... to write")
OUTPUT_NAMES = {"--out-dir", "--svg", "--sglang-out", "--textfile-dir", "--submit"}
#: writers that share another case's code path (asserted in test_shared_writers_use_the_same_path)
SHARED = {("health fleet", "--textfile-dir"): ("health check", "--textfile-dir")}
KINDS = ["char-device", "fifo", "symlink", "folder", "input"]


@dataclass(frozen=True)
class Writer:
    """One writing option. ``args(tmp, target)`` is the command line writing to ``target``; ``folder``: an
    ``--out DIR`` writer; ``textfile``: the target is ``DIR/<textfile>`` (e.g. dsctl_health.prom) and the option
    gets ``DIR``; ``name``: the target's file name (e.g. one the option accepts, so that the case is refused for
    the target itself); ``use_input(tmp, target)`` makes ``target`` one of the command's inputs and returns the
    command line."""

    args: Callable[[Path, Path], list[Any]]
    use_input: Callable[[Path, Path], list[Any]] | None
    folder: bool = False
    textfile: str | None = None
    name: str = "target.svg"


def _stats(path: Path) -> Path:
    path.write_text(json.dumps(STATS))
    return path


def _lite_stats(path: Path, seed: int = 0) -> Path:
    """Routing statistics of deepseek-v2-lite's shape (26 MoE layers x 64 experts)."""
    rng = np.random.default_rng(seed)
    path.write_text(json.dumps({"load": rng.integers(1, 1000, (26, 64)).tolist()}))
    return path


def _fabric_model(path: Path) -> Path:
    """A healthy simulated fabric for ``health burn-in --fabric-model``."""
    path.write_text(json.dumps({"seed": 1, "noise": 0.03, "faults": []}))
    return path


def _dumps(tmp: Path) -> Path:
    """One ibnetdiscover dump per plane, as cabled = as planned."""
    folder = tmp / "dumps"
    if not folder.exists():
        folder.mkdir()
        for p in range(8):
            shutil.copyfile(_plan(tmp) / f"expected-plane{p}.ibnet", folder / f"plane{p}.ibnet")
    return folder


def _guids_at(tmp: Path, target: Path) -> Path:
    """A GUID record (as --record-guids writes it) at ``target``, to be read back with --guids."""
    from tests.conftest import run_cli

    record = tmp / "guids.map"
    result = run_cli("topology", "verify", str(_plan(tmp)), str(_dumps(tmp)), "--record-guids", str(record))
    assert result.exit_code == 0, result.stderr
    return _copy(record, target)


def _plan(tmp: Path) -> Path:
    out = tmp / "fabric"
    if not out.exists():
        from tests.conftest import run_cli

        assert run_cli("topology", "plan", "--nodes", "8", "--out-dir", str(out)).exit_code == 0
    return out


def _plan_at(out: Path) -> Path:
    """A planned fabric written to ``out`` (its plan folder as an input)."""
    from tests.conftest import run_cli

    assert run_cli("topology", "plan", "--nodes", "8", "--out-dir", str(out)).exit_code == 0
    return out


def _chains(tmp: Path, out: Path) -> Path:
    from tests.conftest import run_cli

    assert run_cli("storage", "chains", "-N", "9", "-d", "2", "--out-dir", str(out)).exit_code == 0
    return out


def _copy(src: Path, dst: Path) -> Path:
    shutil.copyfile(src, dst)
    return dst


def _profiles_as(target: Path) -> list[Any]:
    """A --profiles-dir holding a copy of a built-in profile, at the --out folder: an input folder."""
    from dsctl.profiles.loader import builtin_profiles_dir

    (target / "models").mkdir(parents=True)
    _copy(builtin_profiles_dir() / "models" / "deepseek-v3.yaml", target / "models" / "mine.yaml")
    return ["--profiles-dir", target]


def _pair_trace(path: Path) -> Path:
    """A profiler trace of one F&B pair, for launch calibrate."""
    from tests.unit.calibration_trace import pair_trace

    path.write_bytes(pair_trace({}))
    return path


def _trace_at(target: Path) -> Path:
    return _copy(GLOO[1], target)


WRITERS: dict[tuple[str, str], Writer] = {
    ("topology plan", "--out-dir"): Writer(
        lambda t, x: ["topology", "plan", "--nodes", "8", "--out-dir", x],
        lambda t, x: [*_profiles_as(x), "topology", "plan", "--nodes", "8", "--out-dir", x], folder=True),
    ("topology simulate", "--svg"): Writer(
        lambda t, x: ["topology", "simulate", _plan(t), "--svg", x],
        lambda t, x: ["topology", "simulate", _plan(t), "--svg", _plan(t) / "plan.json"]),
    ("eplb rebalance", "--out"): Writer(
        lambda t, x: ["eplb", "rebalance", _stats(t / "stats.json"), *EPLB_ARGS, "--out", x],
        lambda t, x: ["eplb", "rebalance", _stats(x), *EPLB_ARGS, "--out", x]),
    ("eplb rebalance", "--sglang-out"): Writer(
        lambda t, x: ["eplb", "rebalance", _lite_stats(t / "stats.json"), *LITE_ARGS, "--sglang-out", x],
        lambda t, x: ["eplb", "rebalance", _lite_stats(x), *LITE_ARGS, "--sglang-out", x], name="target.json"),
    ("health burn-in", "--out-dir"): Writer(
        lambda t, x: ["health", "burn-in", _plan(t), "--fabric-model", _fabric_model(t / "model.json"), "--out-dir", x],
        lambda t, x: ["health", "burn-in", _plan_at(x), "--fabric-model", _fabric_model(t / "model.json"),
                      "--out-dir", x], folder=True),
    ("health burn-in", "--textfile-dir"): Writer(
        lambda t, x: ["health", "burn-in", _plan(t), "--fabric-model", _fabric_model(t / "model.json"),
                      "--textfile-dir", x.parent],
        lambda t, x: ["health", "burn-in", _plan(t), "--fabric-model", _fabric_model(x), "--textfile-dir", x.parent],
        textfile=BURNIN_TEXTFILE),
    ("topology verify", "--record-guids"): Writer(
        lambda t, x: ["topology", "verify", _plan(t), _dumps(t), "--record-guids", x],
        lambda t, x: ["topology", "verify", _plan(t), _dumps(t), "--guids", _guids_at(t, x), "--record-guids", x],
        name="target.map"),
    ("launch", "--out-dir"): Writer(
        lambda t, x: [*LAUNCH, "--out-dir", x, "--", "train.py"],
        lambda t, x: [*LAUNCH, "--out-dir", x, "--", str(_mkscript(x))], folder=True),
    ("launch", "--submit"): Writer(
        lambda t, x: [*LAUNCH, "--submit", "--job-name", x.name, "--", "train.py"],
        lambda t, x: [*LAUNCH, "--submit", "--job-name", x.name, "--", f"{x.name}/{_mkscript(x).name}"],
        folder=True),
    ("launch layout", "--out-dir"): Writer(
        lambda t, x: ["launch", "layout", "--nodes", "128", "--out-dir", x],
        lambda t, x: [*_profiles_as(x), "launch", "layout", "--nodes", "128", "--out-dir", x], folder=True),
    ("launch schedule", "--svg"): Writer(  # reads no file: no input case
        lambda t, x: ["launch", "schedule", "--pp", "4", "--micro-batches", "8", "--svg", x], None),
    ("health check", "--textfile-dir"): Writer(
        lambda t, x: ["health", "check", "--from-record", HEALTHY, "--textfile-dir", x.parent],
        lambda t, x: ["health", "check", "--from-record", _copy(HEALTHY, x), "--textfile-dir", x.parent],
        textfile=TEXTFILE_NAME),
    ("health record", "--out"): Writer(
        lambda t, x: ["health", "record", "--from-record", HEALTHY, "--out", x],
        lambda t, x: ["health", "record", "--from-record", _copy(HEALTHY, x), "--out", x]),
    ("storage chains", "--out-dir"): Writer(
        lambda t, x: ["storage", "chains", "-N", "5", "-d", "2", "--out-dir", x],
        lambda t, x: [*_profiles_as(x), "storage", "chains", "-N", "5", "-d", "2", "--out-dir", x], folder=True),
    ("storage expand", "--out-dir"): Writer(
        lambda t, x: ["storage", "expand", "--from", _chains(t, t / "old"), "--add-nodes", "2", "--out-dir", x],
        lambda t, x: ["storage", "expand", "--from", _chains(t, x), "--add-nodes", "2", "--out-dir", x], folder=True),
    ("trace overlap", "--svg"): Writer(
        lambda t, x: ["trace", "overlap", *GLOO, "--svg", x],
        lambda t, x: ["trace", "overlap", GLOO[0], _trace_at(x), "--svg", x]),
    ("launch calibrate", "--out"): Writer(
        lambda t, x: ["launch", "calibrate", _pair_trace(t / "pair.json"), "--out", x],
        lambda t, x: ["launch", "calibrate", _pair_trace(x), "--out", x], name="target.yaml"),
    ("trace timeline", "--out"): Writer(
        lambda t, x: ["trace", "timeline", *GLOO, "--out", x],
        lambda t, x: ["trace", "timeline", GLOO[0], _trace_at(x), "--out", x]),
}


def _mkscript(folder: Path) -> Path:
    """The training script inside ``folder`` (the user's project folder)."""
    folder.mkdir(exist_ok=True)
    script = folder / "train.py"
    script.write_text("print('train')\n")
    return script


def _walk(command: Any, ctx: Any, path: list[str]) -> Any:
    yield " ".join(path), command
    if hasattr(command, "list_commands"):
        for name in command.list_commands(ctx):
            yield from _walk(command.get_command(ctx, name), ctx, [*path, name])


def writer_options() -> set[tuple[str, str]]:
    """Every (command, option) that writes, from the option registry."""
    root = typer.main.get_command(app)
    ctx = typer.Context(root)
    found = set()
    for name, command in _walk(root, ctx, []):
        for param in command.params:
            opts = [o for o in param.opts if o.startswith("--")]
            if not opts or not name:
                continue
            help_text = getattr(param, "help", "") or ""
            says_write = re.search(r"^(also )?write\b|\b(file|folder|yaml|svg) to write\b", help_text, re.I)
            if opts[0] in OUTPUT_NAMES or says_write:
                found.add((name, opts[0]))
    return found


def test_every_writer_has_a_case() -> None:
    assert writer_options() == set(WRITERS) | set(SHARED)


def test_shared_writers_use_the_same_path() -> None:
    commands = ROOT / "dsctl" / "commands"
    fleet, check = (commands / "health_fleet.py").read_text(), (commands / "health.py").read_text()
    assert 'emit_health(report, fmt, "health fleet", textfile_dir)' in fleet
    assert 'emit_health(report, fmt, "health check", textfile_dir)' in check
    # defined once in fleet; called by emit_health and, with --drain, before any node is drained (same function)
    assert fleet.count("def write_textfile(") == 1 and fleet.count("write_textfile(") == 3
    assert "write_textfile(" not in check and "TEXTFILE_NAME" not in check


def _snapshot(path: Path) -> Any:
    """Identity, type and content of ``path`` without opening a device or FIFO."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    kind = stat.S_IFMT(info.st_mode)
    content: Any = None
    if stat.S_ISREG(info.st_mode):
        content = path.read_bytes()
    elif stat.S_ISLNK(info.st_mode):
        content = (os.readlink(path), _snapshot(path.resolve()))
    elif stat.S_ISDIR(info.st_mode):
        content = {p.name: _snapshot(p) for p in sorted(path.iterdir())}
    return info.st_ino, kind, info.st_rdev, content


def _make(kind: str, target: Path, writer: Writer, tmp: Path) -> list[Any]:
    if kind == "char-device":
        if os.geteuid() != 0:
            pytest.skip("mknod needs root")
        os.mknod(target, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a /dev/null of our own, in tmp_path
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink":
        real = tmp / "real"
        if writer.folder:
            real.mkdir()
            (real / "mine.txt").write_text("the user's")
        else:
            real.write_text("the user's file")
        target.symlink_to(real)
    elif kind == "folder":
        target.mkdir()
        (target / "notes.txt").write_text("the user's notes")
        (target / files.MANIFEST_NAME).write_text("{}")  # not dsctl's: no written_by
    elif writer.use_input is None:
        pytest.skip("this command reads no input file")
    else:
        return writer.use_input(tmp, target)
    return writer.args(tmp, target)


@pytest.fixture
def job_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in tmp_path/work with train.py there, and an sbatch that must never run."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text("print('train')\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("sbatch", "scontrol", "squeue"):
        (bin_dir / name).write_text("#!/bin/sh\necho ran >&2\nexit 99\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.chdir(work)
    return work


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("key", sorted(WRITERS), ids=lambda k: f"{k[0]} {k[1]}".replace(" ", "_"))
def test_writer_refuses_the_target(cli, job_folder: Path, key: tuple[str, str], kind: str) -> None:
    writer = WRITERS[key]
    if writer.textfile:
        (job_folder / "metrics").mkdir()
        target = job_folder / "metrics" / writer.textfile
    else:
        target = job_folder / (writer.name if not writer.folder else "target")
    if kind == "folder" and not writer.folder and not writer.textfile:
        target = job_folder / "target"
    args = _make(kind, target, writer, job_folder)
    before, beside = _snapshot(target), sorted(os.listdir(target.parent))
    result = cli(*[str(a) for a in args])
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    option = "--job-name folder" if key[1] == "--submit" else key[1]
    assert option in result.stderr, result.stderr
    assert "ran" not in result.stderr  # sbatch was never started
    assert _snapshot(target) == before
    assert sorted(os.listdir(target.parent)) == beside  # no temporary, no .prev, nothing moved


def test_own_input_as_output_is_refused_and_unchanged(cli, tmp_path: Path) -> None:
    stats = _stats(tmp_path / "stats.json")
    before = stats.read_bytes()
    result = cli("eplb", "rebalance", stats, *EPLB_ARGS, "--out", stats)
    assert result.exit_code == 2 and "is the input" in result.stderr, result.stderr
    assert stats.read_bytes() == before


def test_submit_never_moves_the_users_project(cli, job_folder: Path) -> None:
    project = job_folder / "proj"
    _mkscript(project)
    result = cli(*LAUNCH, "--submit", "--job-name", "proj", "--", "proj/train.py")
    assert result.exit_code == 2, result.stderr
    assert sorted(os.listdir(job_folder)) == ["proj", "train.py"] and (project / "train.py").is_file()


def test_dsctl_folder_is_replaced_and_a_foreign_prev_kept(cli, tmp_path: Path) -> None:
    out = tmp_path / "plan"
    assert cli("launch", "layout", "--nodes", "128", "--out-dir", out).exit_code == 0
    manifest = json.loads((out / files.MANIFEST_NAME).read_text())
    assert manifest["written_by"] == "dsctl" and manifest["files"] == ["layout.json", "ranks.csv"]
    prev = tmp_path / "plan.prev"
    prev.mkdir()
    (prev / "thesis.tex").write_text("years of work")
    result = cli("launch", "layout", "--nodes", "256", "--out-dir", out)
    assert result.exit_code == 2 and "plan.prev exists and was not written by dsctl" in result.stderr
    assert (prev / "thesis.tex").read_text() == "years of work"
    shutil.rmtree(prev)
    assert cli("launch", "layout", "--nodes", "256", "--out-dir", out).exit_code == 0
    assert json.loads((prev / "layout.json").read_text()) != json.loads((out / "layout.json").read_text())
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli("launch", "layout", "--nodes", "128", "--out-dir", empty).exit_code == 0  # nothing to lose
    assert not (tmp_path / "empty.prev").exists()


def test_two_outputs_are_committed_together(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing second rename (full disk, I/O error) puts the first file back: never a mismatched pair."""
    stats = _lite_stats(tmp_path / "stats.json")
    out, sg = tmp_path / "plan.json", tmp_path / "sg.json"
    first = cli("eplb", "rebalance", stats, *LITE_ARGS, "--out", out, "--sglang-out", sg)
    assert first.exit_code == 0, first.stderr
    old = out.read_bytes(), sg.read_bytes()
    _lite_stats(stats, seed=1)  # other statistics: another placement in both files
    real = os.replace

    def failing(src: Any, dst: Any) -> None:
        if Path(dst).name == "sg.json" and str(src).endswith(".tmp"):
            raise OSError(5, "Input/output error")
        real(src, dst)

    monkeypatch.setattr(files.os, "replace", failing)
    result = cli("eplb", "rebalance", stats, *LITE_ARGS, "--out", out, "--sglang-out", sg)
    assert result.exit_code == 2 and "--sglang-out" in result.stderr, result.stderr
    assert (out.read_bytes(), sg.read_bytes()) == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json", "sg.json", "stats.json"]


def test_a_link_or_unlisted_file_inside_a_dsctl_folder_makes_it_foreign(cli, tmp_path: Path) -> None:
    out = tmp_path / "plan"
    assert cli("launch", "layout", "--nodes", "128", "--out-dir", out).exit_code == 0
    (out / "sub").mkdir()
    (out / "sub" / "extra.txt").write_text("mine")
    assert "sub/extra.txt" in (files.foreign_reason(out) or "")
    shutil.rmtree(out / "sub")
    assert files.foreign_reason(out) is None
    (tmp_path / "elsewhere.txt").write_text("x")
    (out / "link").symlink_to(tmp_path / "elsewhere.txt")
    before = _snapshot(out)
    result = cli("launch", "layout", "--nodes", "256", "--out-dir", out)
    assert result.exit_code == 2 and "link" in result.stderr and _snapshot(out) == before
