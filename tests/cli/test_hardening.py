"""Issue 15: names into generated files (2, 6), exit 2 instead of 4 (4), limits (3), atomic --out (5), BOM and
duplicate YAML keys (7). Each test failed before the fix it names."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dsctl.output import files
from dsctl.profiles.loader import builtin_profiles_dir
from tests.cli.refused import assert_refused

ROOT = Path(__file__).resolve().parents[2]
BIG = "9" * 400


def _bad(result: Any, *needles: str) -> None:
    assert_refused(result, *needles)


# -- class 2: profile names from file names into job scripts ------------------------------------------------------

@pytest.mark.parametrize("stem", ["v3\n#SBATCH --uid=0", "v3\nrm -rf ~", "v3 x", "v3$(id)"])
def test_profile_file_name_cannot_reach_a_job_script(cli, tmp_path: Path, stem: str) -> None:
    models = tmp_path / "profiles" / "models"
    models.mkdir(parents=True)
    text = (builtin_profiles_dir() / "models" / "deepseek-v3.yaml").read_text()
    text = "\n".join(line for line in text.splitlines() if not line.startswith("name:")) + "\n"
    (models / f"{stem}.yaml").write_text(text)
    out = tmp_path / "job"
    res = cli("--profiles-dir", tmp_path / "profiles", "launch", "--nodes", "16", "--model", stem,
              "--backend", "slurm", "--out-dir", out, "--", "train.py")
    _bad(res, "not a valid profile name")
    assert not out.exists()


@pytest.mark.parametrize("template", ["leaf#{leaf}", "leaf={leaf}", "p{plane}\x01{leaf}", "l'{leaf}{plane}"])
def test_device_names_with_conf_or_control_characters_are_refused(cli, tmp_path: Path, template: str) -> None:
    res = cli("topology", "plan", "--nodes", "16", "--leaf-name", template, "--out-dir", tmp_path / "p")
    _bad(res, "--leaf-name")
    assert not (tmp_path / "p").exists()


def test_plan_exports_parse(cli, tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    out = tmp_path / "p"
    # switch names may hold ':@/' (node names may not: srun reads a --nodelist holding '/' as a file; issue 33)
    assert cli("topology", "plan", "--nodes", "16", "--leaf-name", "p{plane}:l{leaf}@rack/a", "--out-dir",
               out).exit_code == 0
    assert cli("topology", "plan", "--nodes", "16", "--node-name", "gpu:{n}@rack/a").exit_code == 2
    ET.parse(out / "topology.svg")
    dot = (out / "topology.dot").read_text()
    assert dot.count('"') % 2 == 0
    for line in (out / "topology.conf").read_text().splitlines():
        assert line.startswith("#") or (line.startswith("SwitchName=") and "#" not in line)


# -- class 4: exit 2, never exit 4, on bad input ------------------------------------------------------------------

def test_non_utf8_argument(cli) -> None:
    bad = b"node\xff{n}".decode("utf-8", "surrogateescape")
    _bad(cli("topology", "plan", "--nodes", "4", "--node-name", bad), "not UTF-8")


def test_surrogate_outside_the_escape_range(cli) -> None:
    """Found by DSCTL_HOSTILE_EXAMPLES=2000: U+D800 (no byte of surrogateescape) made the error line itself fail
    (exit 4). Python never decodes argv to it, but an embedding caller can pass it."""
    result = cli("launch", "schedule", "--pp", "\ud800\x1b[2J")
    _bad(result, "not UTF-8")
    assert "ud800" in result.stderr and "\x1b" not in result.stderr


@pytest.mark.parametrize("option", ["--global-batch", "--seq-len", "--micro-batches", "--pp"])
def test_400_digit_counts(cli, option: str) -> None:
    _bad(cli("launch", "layout", "--nodes", "16", option, BIG), option)


@pytest.mark.parametrize("value", ["1e308", "1.7e308"])
def test_schedule_costs_that_overflow(cli, tmp_path: Path, value: str) -> None:
    _bad(cli("launch", "schedule", "--f-cost", value), "overflows")
    _bad(cli("launch", "schedule", "--b-cost", value, "--w-cost", "1", "--svg", tmp_path / "s.svg"), "overflows")
    assert not (tmp_path / "s.svg").exists()


def test_schedule_nan_option(cli) -> None:
    _bad(cli("launch", "schedule", "--f-cost", "nan"))


@pytest.mark.parametrize("cell", [BIG, "1e400"])
def test_statistics_json_numbers_beyond_float(cli, tmp_path: Path, cell: str) -> None:
    stats = tmp_path / "s.json"
    stats.write_text(f"[[1, {cell}], [3, 4]]")
    _bad(cli("eplb", "rebalance", stats, "--replicas", "4", "--gpus", "2", "--nodes", "1"), "not finite")


@pytest.mark.parametrize("slot", [str(2**63), str(2**64 + 1), BIG])
def test_placement_ints_above_int64(cli, tmp_path: Path, slot: str) -> None:
    stats = tmp_path / "s.json"
    stats.write_text("[[1, 2, 3, 4]]")
    placement = tmp_path / "p.json"
    placement.write_text('{"phy2log": [[0, 1, 2, ' + slot + "]]}")
    _bad(cli("eplb", "simulate", stats, placement, "--gpus", "2"), "not an expert id")


def test_unterminated_csv_quote(cli, tmp_path: Path) -> None:
    stats = tmp_path / "s.csv"
    stats.write_text('"1,2\n3,4\n5,6\n')
    _bad(cli("eplb", "rebalance", stats, "--replicas", "4", "--gpus", "2", "--nodes", "1"), "line 1")


def _dsctl(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", "import sys; from dsctl.cli import main; sys.exit(main())", *args],
                          capture_output=True, text=True, env=env, timeout=120, **kwargs)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_stdout_on_a_full_device() -> None:
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-c", "import sys; from dsctl.cli import main; sys.exit(main())",
                               "profiles", "list", "--format", "json"], stdout=full, stderr=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: cannot write the output") and "Traceback" not in proc.stderr


# -- class 3: limits ------------------------------------------------------------------------------------------------

@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_device_files_are_refused(cli) -> None:
    _bad(cli("eplb", "rebalance", "/dev/zero", "--replicas", "4", "--gpus", "2", "--nodes", "1"), "a device")
    _bad(cli("health", "check", "--from-record", "/dev/zero"), "a device")
    _bad(cli("profiles", "validate", "/dev/zero"), "a device")


def test_fifo_is_refused_without_blocking(cli, tmp_path: Path) -> None:
    fifo = tmp_path / "f.csv"
    os.mkfifo(fifo)
    _bad(cli("eplb", "rebalance", fifo, "--replicas", "4", "--gpus", "2", "--nodes", "1"), "FIFO")
    _bad(cli("storage", "check-chains", fifo), "FIFO")


def test_input_size_limit_and_option_to_raise_it(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stats = tmp_path / "s.csv"
    stats.write_text("1,2,3,4\n" * 100)
    args = ("eplb", "rebalance", stats, "--replicas", "4", "--gpus", "2", "--nodes", "1")
    _bad(cli("--max-input-bytes", "100", *args), "input limit of 100 bytes", "--max-input-bytes")
    assert cli("--max-input-bytes", "1000", *args).exit_code == 0
    monkeypatch.setenv("DSCTL_MAX_INPUT_BYTES", "100")
    _bad(cli(*args), "input limit")
    _bad(cli("--max-input-bytes", "lots", *args), "--max-input-bytes")


def test_stdin_dash(tmp_path: Path) -> None:
    proc = _dsctl("eplb", "rebalance", "-", "--replicas", "4", "--gpus", "2", "--nodes", "1", "-f", "json",
                  input="1,2,3,4\n4,3,2,1\n")
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["phy2log"]) == 2


def _forged_npy(path: Path, shape: tuple[int, ...]) -> None:
    header = f"{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}"
    header += " " * (118 - len(header)) + "\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + b"\0" * 64)


@pytest.mark.parametrize("shape", [(100_000, 100_000), (2**40, 2**40), (4, 4)])
def test_npy_header_shape_limit(cli, tmp_path: Path, shape: tuple[int, int]) -> None:
    path = tmp_path / "s.npy"
    _forged_npy(path, shape)
    _bad(cli("eplb", "rebalance", path, "--replicas", "4", "--gpus", "2", "--nodes", "1"), ".npy header asks")


def test_peak_memory_on_1gb_hostile_inputs(tmp_path: Path) -> None:
    """/dev/zero, a 1 GB (sparse) file, a header asking for 1e10 values and 60 MB of values: exit 2 below 300 MB
    peak RSS."""
    big = tmp_path / "big.csv"
    with open(big, "wb") as handle:
        handle.truncate(1024**3)
    npy = tmp_path / "forged.npy"
    _forged_npy(npy, (100_000, 100_000))
    # the child's own peak: VmHWM of its address space. ru_maxrss is not: Linux carries the parent's high-water mark
    # across fork + exec, so under the whole suite (a pytest process of ~1 GB) it read 1 GB whatever dsctl did
    script = (
        "import resource, sys\nfrom dsctl.cli import main\ncodes = []\n"
        "for path in sys.argv[1:]:\n"
        "    codes.append(main(['eplb', 'rebalance', path, '--replicas', '4', '--gpus', '2', '--nodes', '1']))\n"
        "try:\n"
        "    peak = next(int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmHWM:'))\n"
        "except (OSError, StopIteration):\n"
        "    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(codes, peak)\n"
    )
    dense = tmp_path / "dense.json"  # 60 MB, under the input limit: 30 million values, refused before parsing
    dense.write_text("[" + ",".join(["[" + ",".join(["1"] * 1000) + "]"] * 30_000) + "]")
    inputs = [str(big), str(npy), str(dense)] + (["/dev/zero"] if Path("/dev/zero").exists() else [])
    # no tight timeout: on loaded cores the child's start-up alone can take a minute, and time is not what is tested
    proc = subprocess.run([sys.executable, "-c", script, *inputs], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    codes, peak_kib = proc.stdout.rsplit("]", 1)
    assert codes == "[" + ", ".join(["2"] * len(inputs)), proc.stderr
    assert int(peak_kib) < 300 * 1024


# -- class 5: --out DIR is all-or-nothing ----------------------------------------------------------------------------

def test_out_dir_is_swapped_whole_and_previous_kept(cli, tmp_path: Path) -> None:
    out = tmp_path / "plan"
    assert cli("topology", "plan", "--nodes", "16", "--out-dir", out).exit_code == 0
    first = (out / "plan.json").read_text()
    assert cli("topology", "plan", "--nodes", "32", "--out-dir", out).exit_code == 0
    assert (out / "plan.json").read_text() != first
    assert (tmp_path / "plan.prev" / "plan.json").read_text() == first
    assert cli("topology", "plan", "--nodes", "64", "--out-dir", out).exit_code == 0  # the dsctl .prev is replaced
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan", "plan.prev"]
    # a file added to dsctl's folder makes it foreign: refused, nothing moved
    (out / "stale-from-another-run.csv").write_text("old")
    before = sorted(p.name for p in out.iterdir())
    _bad(cli("topology", "plan", "--nodes", "16", "--out-dir", out), "stale-from-another-run.csv",
         "not written by dsctl")
    assert sorted(p.name for p in out.iterdir()) == before


def test_failed_run_changes_nothing(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "plan"
    assert cli("topology", "plan", "--nodes", "16", "--out-dir", out).exit_code == 0
    before = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def fail(stage: Path, target: Path) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files, "_swap_in", fail)
    _bad(cli("topology", "plan", "--nodes", "32", "--out-dir", out), "--out-dir")
    assert {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan"]


def test_sigterm_removes_the_temporary_folder(tmp_path: Path) -> None:
    out = tmp_path / "result"
    with pytest.raises(SystemExit) as exc, files.staged_directory(out) as stage:
        (stage / "half.txt").write_text("half")
        os.kill(os.getpid(), signal.SIGTERM)
    assert exc.value.code == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL or callable(signal.getsignal(signal.SIGTERM))


def test_killed_run_temporaries_are_swept(cli, tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    left = tmp_path / f".plan.dsctl-{dead}-x1y2"
    left.mkdir()
    (left / "cabling.csv").write_text("half")
    assert cli("topology", "plan", "--nodes", "16", "--out-dir", tmp_path / "plan").exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan"]


def test_out_cannot_be_the_current_folder(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    _bad(cli("topology", "plan", "--nodes", "16", "--out-dir", "."), "current folder")
    _bad(cli("launch", "layout", "--nodes", "16", "--out-dir", ".."), "current folder")
    assert list(work.iterdir()) == []


# -- class 7: BOM accepted, duplicate YAML keys refused ------------------------------------------------------------

def test_bom_in_csv_inputs_is_accepted(cli, tmp_path: Path) -> None:
    plan = tmp_path / "plan"
    assert cli("topology", "plan", "--nodes", "16", "--out-dir", plan).exit_code == 0
    links = tmp_path / "links.csv"
    links.write_bytes(b"\xef\xbb\xbf" + (plan / "cabling.csv").read_bytes())
    res = cli("topology", "verify", plan, links)
    assert res.exit_code == 0, res.stderr
    chains = tmp_path / "chains"
    assert cli("storage", "chains", "--nodes", "6", "--ssds-per-node", "2", "--out-dir", chains).exit_code == 0
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + (chains / "generated_chains.csv").read_bytes())
    assert cli("storage", "check-chains", bom).exit_code == 0


def test_bom_in_profile_yaml_is_accepted(cli, tmp_path: Path) -> None:
    path = tmp_path / "models" / "deepseek-v3.yaml"
    path.parent.mkdir()
    path.write_bytes(b"\xef\xbb\xbf" + (builtin_profiles_dir() / "models" / "deepseek-v3.yaml").read_bytes())
    assert cli("profiles", "validate", path).exit_code == 0


def test_duplicate_yaml_keys_are_refused(cli, tmp_path: Path) -> None:
    path = tmp_path / "models" / "deepseek-v3.yaml"
    path.parent.mkdir()
    text = (builtin_profiles_dir() / "models" / "deepseek-v3.yaml").read_text()
    path.write_text(text + "num_layers: 3\n")
    _bad(cli("profiles", "validate", path), "duplicate key 'num_layers'", "first on line")
    record = tmp_path / "node.yaml"
    source = ROOT / "tests" / "data" / "health" / "hgx_h800_healthy.yaml"
    shutil.copy(source, record)
    first_key = next(line for line in source.read_text().splitlines() if line and line[0].isalpha())
    record.write_text(source.read_text() + first_key + "\n")
    _bad(cli("health", "check", "--from-record", record), "duplicate key")


def test_npy_stats_still_load(cli, tmp_path: Path) -> None:
    path = tmp_path / "s.npy"
    np.save(path, np.arange(8, dtype=np.int64).reshape(2, 4))
    assert cli("eplb", "rebalance", path, "--replicas", "4", "--gpus", "2", "--nodes", "1").exit_code == 0


def test_chunk_size_with_a_trailing_newline_is_refused(cli, tmp_path: Path) -> None:
    res = cli("storage", "chains", "--nodes", "6", "--ssds-per-node", "2", "--chunk-size", "1MB\n",
              "--out-dir", tmp_path / "c")
    _bad(res, "--chunk-size")
    assert not (tmp_path / "c").exists()


def test_every_output_file_is_written_through_the_files_module() -> None:
    """One helper for --out: the command and output layers never open or write files themselves."""
    import ast

    offenders = []
    for folder in ("commands", "output", "runners"):
        for path in sorted((ROOT / "dsctl" / folder).glob("*.py")):
            if path.name in ("files.py", "temporaries.py"):  # the writers and their scratch files
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and node.attr in {"write_text", "write_bytes", "mkdir"}:
                    offenders.append(f"{path.name}:{node.lineno} {node.attr}")
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
                    offenders.append(f"{path.name}:{node.lineno} open()")
    assert not offenders


@pytest.mark.parametrize("value", [BIG, f"'{BIG}'", "wide", "null", ".nan", "[1]"])
def test_record_values_of_the_wrong_type(cli, tmp_path: Path, value: str) -> None:
    """Non-integer or oversized values in a record's numeric fields: exit 2 naming the record, not exit 4."""
    source = (ROOT / "tests" / "data" / "health" / "hgx_h800_healthy.yaml").read_text()
    record = tmp_path / "node.yaml"
    for key in ("width: 16", "t0: 0"):
        if key in source:
            record.write_text(source.replace(key, f"{key.split(':')[0]}: {value}", 1))
            _bad(cli("health", "check", "--from-record", record), str(record))


def test_chain_table_cut_after_a_chain_id(cli, tmp_path: Path) -> None:
    """Found by the property suite: a chain row without targets was an IndexError (exit 4)."""
    table = tmp_path / "chains.csv"
    table.write_text("ChainId,TargetId,TargetId\n9")
    result = cli("storage", "check-chains", table)  # a damaged table is a finding (exit 1, issue 14), not a crash
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    assert "line 2" in result.stdout


def test_schedule_counts_of_thousands_of_digits_are_bad_input(cli) -> None:
    """Found by the property suite: a 4,300-digit --pp parsed, then could not be printed in the error (exit 4)."""
    for option in ("--pp", "--micro-batches"):
        _bad(cli("launch", "schedule", option, "9" * 4300), option, "4,300 digits")  # refused before parsing
        _bad(cli("launch", "schedule", option, "9" * 30), option, "1,000,000")  # the domain names the range


def test_integers_of_more_than_30_digits_are_refused_before_any_command_runs(cli) -> None:
    """Found by DSCTL_HOSTILE_EXAMPLES=2000: a 4,300-digit --nodes parsed (Python's limit is 4,300), then its product
    with 8 NICs could not be printed in the error (exit 4). Every integer argument before -- is bounded now."""
    _bad(cli("topology", "plan", "--nodes", "9" * 4300), "--nodes", "4,300 digits")
    _bad(cli("topology", "plan", "--nodes=-" + "9" * 31), "--nodes", "31 digits")
    _bad(cli("topology", "plan", "--nodes", "9" * 30), "--nodes", "planning limit")  # 30 digits reach the domain


@pytest.mark.parametrize("text", ["1e400 GB", "1e400 Gb/s", "-1e400 GiB", "1e31 TB"])
def test_quantities_out_of_range_are_quantity_errors(text: str) -> None:
    """1e400 read as inf and overflowed later (exit 4 in topology simulate --size); now refused where it is read."""
    from dsctl.units import QuantityError, parse_bytes, parse_rate_bits

    parse = parse_rate_bits if text.endswith("/s") else parse_bytes
    with pytest.raises(QuantityError, match="out of range"):
        parse(text)
