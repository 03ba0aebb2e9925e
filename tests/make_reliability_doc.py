"""Run the hostile-input cases and fault injections of tests/reliability_cases.py and write docs/reliability.md.

    PYTHONPATH=. python tests/make_reliability_doc.py            # run every case, (re)write the document
    PYTHONPATH=. python tests/make_reliability_doc.py --check    # exit 1 if the document is not what a run gives

The document is made from observed exit codes only (no timings, no paths), so the same code gives the same file;
tests/cli/test_reliability_doc.py checks each case's code and that the file is current.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dsctl.cli import MAX_INTEGER_DIGITS  # noqa: E402
from dsctl.eplb.checks import MAX_PLAN_SLOTS, MAX_PLANNING_WORK  # noqa: E402
from dsctl.eplb.exact import MAX_PROVE_NODES  # noqa: E402
from dsctl.eplb.pickle_vm import MAX_NESTING, MAX_OBJECTS, MAX_OPCODES, MAX_STACK_ITEMS  # noqa: E402
from dsctl.eplb.placement import MAX_LOG2PHY_CELLS  # noqa: E402
from dsctl.eplb.placement_file import MAX_PLACEMENT_ID  # noqa: E402
from dsctl.eplb.stats import MAX_STATS_VALUES  # noqa: E402
from dsctl.eplb.torch_dump import MAX_PICKLE_BYTES, MAX_STORAGE_BYTES  # noqa: E402
from dsctl.inputs import DEFAULT_MAX_INPUT_BYTES, ENV_MAX_INPUT_BYTES  # noqa: E402
from dsctl.launch.plan import MAX_COUNT, MAX_NODES  # noqa: E402
from dsctl.launch.schedule import MAX_SVG_OPS  # noqa: E402
from dsctl.launch.schedule.params import MAX_STAGE_MICRO_BATCHES  # noqa: E402
from dsctl.output.files import MANIFEST_NAME, PREV_SUFFIX  # noqa: E402
from dsctl.profiles.textyaml import MAX_YAML_ALIASES, MAX_YAML_CHARS, MAX_YAML_NODES  # noqa: E402
from dsctl.runners.fleet import MAX_ARG_CHARS, MAX_OUTPUT_BYTES  # noqa: E402
from dsctl.runners.fleet import MAX_NODES as MAX_FLEET_NODES  # noqa: E402
from dsctl.siteconfig import MAX_FILE_BYTES as MAX_CONFIG_BYTES  # noqa: E402
from dsctl.topology.naming import MAX_NAME_BYTES, MAX_TEMPLATE_CHARS  # noqa: E402
from dsctl.trace.parse import MAX_EVENTS, MAX_WORLD_SIZE  # noqa: E402
from tests.reliability_cases import CASES, FAMILIES, FAULTS, Case, run_case  # noqa: E402

DOC = ROOT / "docs" / "reliability.md"

LIMITS = [
    ("input file size", f"{DEFAULT_MAX_INPUT_BYTES:,} bytes (64 MiB) per file",
     f"checked from the file's size before reading; raise with `dsctl --max-input-bytes N` or `{ENV_MAX_INPUT_BYTES}`"),
    ("input file kind", "regular files, or `-` for standard input",
     "FIFOs, devices (`/dev/zero`) and sockets are refused from `stat`, before they are opened for reading"),
    ("`.npy` statistics", f"{MAX_STATS_VALUES:,} values (layers x experts)",
     "from the header, before NumPy allocates; the header's byte count must match the file"),
    ("`.pt` statistics (SGLang dumps)", f"pickle {MAX_PICKLE_BYTES:,} bytes, {MAX_OPCODES:,} opcodes, "
     f"{MAX_OBJECTS:,} values, {MAX_STACK_ITEMS:,} stack items, nesting {MAX_NESTING}; tensors {MAX_STATS_VALUES:,} "
     f"values in all, storages {MAX_STORAGE_BYTES:,} bytes",
     "a bounded interpreter, never Python's unpickler: no BUILD/POP/NEWOBJ, appends only into lists and dicts the "
     "pickle made, dict keys scalars or flat tuples, each tensor's extent checked against its 1-D storage before any "
     "element is read; zip member errors (CRC, encryption, method, deflate) are exit 2 naming the member. Measured "
     "(`python -m benchmarks.eplb_hostile_peaks`): every hostile file refused in 1.3-2.1 s at 48-73 MiB peak "
     "(before: process memory in the loads, exit 139, 2.1-5.2 GB, exit 4)"),
    ("eplb planning", f"{MAX_PLAN_SLOTS:,} slots over all layers; {MAX_PLANNING_WORK:,} units of work per command "
     f"(balanced layers x slots^2, reference 64 x layers x slots); log2phy {MAX_LOG2PHY_CELLS:,} entries; "
     f"`--prove` {MAX_PROVE_NODES:,} search nodes per run",
     "from the sizes before planning (placement files counted before the JSON parser); refused in 1.7-4.0 s at "
     "48-71 MiB (before: 57 s and 573 MiB for balanced at 8,192 slots, > 120 s and 6 GB for a hot expert)"),
    ("integer arguments", f"{MAX_INTEGER_DIGITS} digits before `--`",
     "a longer integer literal (Python parses 4,300) is exit 2 naming the option, before any command runs"),
    ("placement ids and counts", f"0..{MAX_PLACEMENT_ID:,}", "larger (e.g. above int64) is exit 2"),
    ("launch counts", f"--nodes 1..{MAX_NODES:,}; --pp/--ep/--tp/--dp/--global-batch/--seq-len up to "
     f"{MAX_COUNT:,} (2^53)", "beyond is exit 2"),
    ("pipeline schedule", f"--pp x --micro-batches up to {MAX_STAGE_MICRO_BATCHES:,} simulated steps; finite step "
     f"time; SVG up to {MAX_SVG_OPS:,} ops",
     "costs whose sums overflow float (1e308) are exit 2; drawing loops are bounded"),
    ("device names", f"{MAX_NAME_BYTES} bytes (InfiniBand node description), templates {MAX_TEMPLATE_CHARS} "
     "characters", "letters, digits and `._:/@+-` only (full match)"),
    ("profile, job, partition names", "1-64 letters, digits, `._-`, full match (`re.fullmatch`)",
     "a trailing newline is refused (Python's `$` would accept it)"),
    ("JSON/YAML values", "integers up to Python's 4,300 digits, nesting within the recursion limit",
     "beyond is exit 2; YAML keys must be unique"),
    ("site configuration (`dsctl.toml`)", f"{MAX_CONFIG_BYTES:,} bytes, a regular file",
     "read through the shared input reader: a FIFO or device is refused from `stat`, the read stops at the limit; "
     "TOML integers beyond 4,300 digits and nesting beyond the recursion limit are exit 2 naming the file"),
    ("YAML inputs (`--jobs`, records, profiles)", f"{MAX_YAML_CHARS:,} characters; {MAX_YAML_NODES:,} nodes with "
     f"aliases expanded; {MAX_YAML_ALIASES:,} aliases",
     "characters and a count of node separators before parsing; nodes and aliases on the composed tree (libyaml), "
     "before any Python object is built. Measured (`python -m benchmarks.memory_peaks`, 2 shared cores at load ~15): "
     "a 5 MB record is refused before parsing (0.1 ms in-process; the command 12 s wall, start-up bound, 54 MiB "
     "peak); a 95,000-node file under the bounds loads at 87 MiB peak"),
    ("trace events", f"{MAX_EVENTS:,} events per trace file",
     "counted while streaming; one more is exit 2 naming the limit. Measured: 10M events in a 29 MB gzip are "
     "refused at the 5,000,001st event with a 231 MiB peak (before: 1.7 GB)"),
    ("trace `distributedInfo.world_size`", f"{MAX_WORLD_SIZE:,} ranks",
     "a larger (or negative) world size is read as unknown: the missing ranks listed from it fit in memory (before: "
     "2^31 - 1 made the job check build a set of every rank, killed at 24 GB)"),
    ("fleet answers", f"{MAX_OUTPUT_BYTES:,} bytes of stdout per node, {MAX_FLEET_NODES:,} nodes",
     "each answer parsed once when its task ends; only the listed findings are kept. Measured: 8 nodes x 15 MiB "
     "answers, 106 MiB peak (19 MiB idle): 10.9 MiB = 0.73 x the answer size per node (before: ~300 MB per "
     "node)"),
    ("hostlists handed to Slurm", f"{MAX_ARG_CHARS:,} characters per argument",
     "ranges compressed (`gpu[00001-65536]`), `sinfo -n` in chunks, srun's `--nodelist` a private file of names "
     "when they do not compress: the kernel's 128 KiB argv-string limit is "
     "never reached"),
    ("output file target (`--svg`, `--out FILE`, `--sglang-out`, `--textfile-dir`)", "an existing target must be "
     "a regular file and not one of the command's inputs (same device and inode)", "a symbolic link, folder, "
     "character or block device, FIFO, socket or input is refused with exit 2 before anything is written, and left "
     "as it was; a regular file is replaced (no `--force`)"),
    ("`--out DIR` (and `launch --submit`'s `./JOB_NAME`)", f"built whole in a sibling temporary folder, swapped in "
     f"with one rename; an existing DIR is replaced only if dsctl wrote it (its `{MANIFEST_NAME}` lists every file "
     f"in it) or it is empty; the replaced folder is kept as `DIR{PREV_SUFFIX}`, and an existing "
     f"`DIR{PREV_SUFFIX}` is deleted for it only if dsctl wrote it", "a foreign DIR or DIR.prev, or a DIR holding "
     "an input, is exit 2 and nothing is moved; temporaries are removed on errors, SIGINT, SIGTERM, SIGHUP, and "
     "(pid gone) by the next run after a SIGKILL"),
    ("several outputs (`eplb --out A --sglang-out B`)", "all written to temporaries first, then renamed",
     "a failure while writing changes no target; a failed rename puts the earlier targets back from hard-link "
     "backups"),
]


def observe(cases: list[Case]) -> list[int]:
    codes = []
    for case in cases:
        with tempfile.TemporaryDirectory(prefix="dsctl-reliability-") as tmp:
            codes.append(run_case(case, Path(tmp))[0])
    return codes


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def _cell(codes: set[int]) -> str:
    return "/".join(str(c) for c in sorted(codes)) if codes else "·"


def render(cases: list[Case], case_codes: list[int], faults: list[Case], fault_codes: list[int]) -> str:
    classes = list(dict.fromkeys(c.input_class for c in cases))
    lines = [
        "# Reliability: limits, hostile inputs and fault injections",
        "",
        "<!-- generated by tests/make_reliability_doc.py from a run of tests/reliability_cases.py; do not edit -->",
        "",
        "dsctl runs as root in prologs and scripts on files other tools wrote. Bad input ends in exit 2 with one "
        "`error:` line naming the file, field or option; exit 1 means a check found a problem, 3 a missing "
        "environment piece, and 4 only a bug in dsctl. This page is regenerated from a run of the cases below "
        "(`PYTHONPATH=. python tests/make_reliability_doc.py`); `tests/cli/test_reliability_doc.py` fails when it "
        "is stale.",
        "",
        "## Limits",
        "",
        "| limit | value | how it is enforced |",
        "|---|---|---|",
        *(f"| {a} | {b} | {c} |" for a, b, c in LIMITS),
        "",
        "Trace inputs (gzip decompressed bytes, regular-expression options) are limited by `dsctl trace`, see "
        "docs/trace.md; paths built from health records are confined by the health safe-join, see docs/health.md.",
        "",
        "## Hostile inputs x commands",
        "",
        "Exit code each command family ended with (`·`: not applicable or not listed here; the property suite "
        "below covers every family with generated values).",
        "",
        "| input class | " + " | ".join(FAMILIES) + " |",
        "|---|" + "---|" * len(FAMILIES),
    ]
    for cls in classes:
        cells = [_cell({code for case, code in zip(cases, case_codes, strict=True)
                        if case.input_class == cls and case.family == fam}) for fam in FAMILIES]
        lines.append(f"| {cls} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Fault injections",
        "",
        "| fault | command | exit | what else is checked |",
        "|---|---|---|---|",
    ]
    for case, code in zip(faults, fault_codes, strict=True):
        extra = (case.fault.__doc__ or "no traceback on stderr").strip().split("\n")[0] if case.fault else ""
        lines.append(f"| {case.input_class} | {case.example} | {code} | {extra} |")
    lines += [
        "",
        "## Cases",
        "",
        "| input class | family | input | exit |",
        "|---|---|---|---|",
        *(f"| {c.input_class} | {c.family} | {_escape(c.example)} | {code} |"
          for c, code in zip(cases, case_codes, strict=True)),
        "",
        "## Property suite",
        "",
        "`tests/cli/test_hostile_property.py` feeds generated hostile values to the options and input files of "
        "every command family (floats that overflow, integers of 300 to 4,300 digits, NaN/inf, control "
        "characters, non-UTF-8 bytes, BOMs, open quotes, truncated files) and asserts exit 0/1/2/3, no "
        "traceback, and an `error:` line for 2 and 3. Examples per family test: `DSCTL_HOSTILE_EXAMPLES` "
        "(default 40: about 45 s of CPU for the whole file; a health-record replay gets a quarter of them). "
        "The default run is derandomized (tests/conftest.py): every run draws the same examples. Setting "
        "`DSCTL_HOSTILE_EXAMPLES=N` is the opt-in exploration: random seeds, N examples for every property test "
        "of every suite (run at 2000 before a release: `-m hypothesis` selects the 84 property tests, about 67 "
        "CPU-minutes); what it finds becomes a fixed regression example.",
        "",
    ]
    return "\n".join(lines)


def expected_doc() -> str:
    """The document as it must read when every case ends with its expected code."""
    return render(CASES, [c.exit_code for c in CASES], FAULTS, [c.exit_code for c in FAULTS])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with docs/reliability.md, write nothing")
    args = parser.parse_args()
    text = render(CASES, observe(CASES), FAULTS, observe(FAULTS))
    if args.check:
        if DOC.read_text(encoding="utf-8") != text:
            print(f"{DOC} is stale: run PYTHONPATH=. python tests/make_reliability_doc.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
