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

from dsctl.cluster.hostlist import MAX_HOSTLIST_CHARS  # noqa: E402
from dsctl.cluster.hostlist import MAX_NAME_CHARS as MAX_HOSTLIST_NAME_CHARS  # noqa: E402
from dsctl.cluster.hostlist import MAX_NODES as MAX_HOSTLIST_NODES  # noqa: E402
from dsctl.cluster.plan_file import MAX_DEVICE_NAME_CHARS, MAX_ENDPOINTS, MAX_GPUS_PER_NODE, MAX_NICS_PER_NODE  # noqa: E402
from dsctl.eplb.checks import MAX_PLAN_SLOTS, MAX_PLANNING_WORK  # noqa: E402
from dsctl.eplb.exact import MAX_PROVE_NODES  # noqa: E402
from dsctl.eplb.pickle_vm import MAX_NESTING, MAX_OBJECTS, MAX_OPCODES, MAX_STACK_ITEMS  # noqa: E402
from dsctl.eplb.placement import MAX_LOG2PHY_CELLS  # noqa: E402
from dsctl.eplb.placement_file import MAX_PLACEMENT_ID  # noqa: E402
from dsctl.eplb.stats import MAX_STATS_VALUES  # noqa: E402
from dsctl.eplb.torch_dump import MAX_PICKLE_BYTES, MAX_STORAGE_BYTES  # noqa: E402
from dsctl.health.burnin.api import MAX_BURNIN_ENDPOINTS  # noqa: E402
from dsctl.inputs import DEFAULT_MAX_INPUT_BYTES, ENV_MAX_INPUT_BYTES  # noqa: E402
from dsctl.launch.plan import MAX_COUNT, MAX_NODES  # noqa: E402
from dsctl.launch.schedule import MAX_SVG_OPS  # noqa: E402
from dsctl.launch.schedule.params import MAX_STAGE_MICRO_BATCHES  # noqa: E402
from dsctl.names import MAX_INTEGER_DIGITS  # noqa: E402
from dsctl.output.files import PREV_SUFFIX  # noqa: E402
from dsctl.output.folder_manifest import MANIFEST_NAME  # noqa: E402
from dsctl.profiles.textyaml import MAX_YAML_ALIASES, MAX_YAML_CHARS, MAX_YAML_NODES  # noqa: E402
from dsctl.runners.fleet import MAX_ARG_CHARS, MAX_OUTPUT_BYTES, MAX_STDIN_CHARS  # noqa: E402
from dsctl.runners.fleet import MAX_NODES as MAX_FLEET_NODES  # noqa: E402
from dsctl.siteconfig import MAX_FILE_BYTES as MAX_CONFIG_BYTES  # noqa: E402
from dsctl.topology.naming import MAX_NAME_BYTES, MAX_TEMPLATE_CHARS  # noqa: E402
from dsctl.trace.parse import MAX_EVENTS, MAX_STREAMS, MAX_WORLD_SIZE  # noqa: E402
from dsctl.trace.scan import MAX_VALUE_CHARS  # noqa: E402
from dsctl.trace.skew import MAX_MATCH_CELLS  # noqa: E402
from dsctl.trace.timeline import MAX_LANES  # noqa: E402
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
    ("integers in input text", f"{MAX_INTEGER_DIGITS} digits, fewer where the field is narrower (LID 5, "
     "perfquery port 3, LLDP port 9, counter 20)", "one rule for every parser (`names.bounded_int`): the digit run "
     "is counted before `int()` runs; longer is exit 2 naming file, line and field (before: a 4,400-digit perfquery "
     "`Lid` or LLDP port raised from `int()`, exit 4). Log lines (Xid, srun labels, exit statuses) with longer runs "
     "are not read as numbers"),
    ("regular expressions on input text", "linear: no pattern with two ways to split one run",
     "LLDP ports by a scan from the end (`names.last_digit_run`), perfquery fields and `ibnetdiscover -p` "
     "descriptions split by hand, number patterns `\\d+(\\.\\d*)?`. Measured on the worst inputs: 480 KB LLDP "
     "port 1.6 s for the whole command, 50 MiB (before: 275 s), `--dataset` of 120,000 digits 1.8 s (before: "
     "minutes), a 480 KB `' - '` ports line 2.8 s, 56 MiB (before: 6 s per 40 KB, quadratic); "
     "`python -m benchmarks.hostile_trace_parsers`"),
    ("trace streams", f"{MAX_STREAMS:,} (device, stream) pairs, and {MAX_STREAMS:,} host threads, per trace file",
     "counted after reading (one `np.unique`); every analysis groups events with one sort, so its cost follows the "
     "events, not events x streams or devices. Measured: 300,000 one-kernel streams refused in 2.4 s at 86 MiB "
     "(before: ~100 s), 20,000 devices in 1.1 s at 57 MiB (before: 11.8 s, 727 MB); 4,096 streams x 73 kernels "
     "analysed in 2.7 s at 142 MiB, 1,024 lanes x 293 kernels drawn in 4.5 s at 182 MiB"),
    ("one JSON value in a trace", f"{MAX_VALUE_CHARS:,} characters (an event, or a top-level value such as "
     "`distributedInfo`)", "the reader reads on in doubling steps, so decoding costs O(n) (before: a 40 MB value was "
     "decoded again after every 1 MiB chunk, 35 s); a longer value is exit 2. Measured: 40 MB refused in 3.2 s at "
     "172 MiB, 16 MB read in 2.3 s at 161 MiB"),
    ("trace stragglers table", f"{MAX_MATCH_CELLS:,} cells (collectives seen on two or more participants x "
     "participants)", "keys numbered by sorting (label, Seq) pairs (a Seq near 2^63 overflowed a combined key: "
     "exit 4); keys seen once are dropped before the table is sized, then refused before allocation (before: "
     "16 GB and 55 s for 20,000 devices; now 1.0 s, 63 MiB)"),
    ("trace timeline", f"{MAX_LANES:,} lanes per picture, and as many files", "files counted before reading, "
     "each file's lanes before drawing (before: 300,000 lanes refused after 73 s)"),
    ("`trace overlap --slurm` node answers", "every field of every rank row typed; numbers finite; counts whole",
     "a node answering `Infinity`, a non-object rank or a wrong type is exit 2 naming the node and the field "
     "(before: `nan` printed, or exit 4)"),
    ("trace `distributedInfo.world_size`", f"{MAX_WORLD_SIZE:,} ranks",
     "a larger (or negative) world size is read as unknown: the missing ranks listed from it fit in memory (before: "
     "2^31 - 1 made the job check build a set of every rank, killed at 24 GB)"),
    ("fleet answers", f"{MAX_OUTPUT_BYTES:,} bytes of stdout per node, {MAX_FLEET_NODES:,} nodes",
     "each answer parsed once when its task ends; only the listed findings are kept. Measured: 8 nodes x 15 MiB "
     "answers, 106 MiB peak (19 MiB idle): 10.9 MiB = 0.73 x the answer size per node (before: ~300 MB per "
     "node)"),
    ("hostlists (`-w/--nodelist`)", f"{MAX_HOSTLIST_CHARS:,} characters; {MAX_INTEGER_DIGITS} digits per number; "
     f"{MAX_HOSTLIST_NODES:,} names of at most {MAX_HOSTLIST_NAME_CHARS} characters",
     "one grammar, dsctl's own (no scontrol); the count and name length are computed from the ranges before any "
     "name is made, and the message shows the expression cut to 40 characters (before: a 5,000-digit range was "
     "exit 4, `a` x 100,000 + `[0-99998]` took ~10 GB and then failed in its own error message, exit 1). Measured "
     "in-process on 2 shared cores: the 5,000-digit range refused in 0.3 ms, `a` x 100,000 in 1 ms, both under "
     "0.1 MB; the largest allowed, 65,536 names, made in 0.2 s; the command 1.1-1.3 s, 50 MB peak RSS "
     "(start-up)"),
    ("hostlists handed to Slurm", f"{MAX_ARG_CHARS:,} characters per argument",
     "ranges compressed (`gpu[00001-65536]`), `sinfo -n` in chunks, srun's `--nodelist` a private file of names "
     "when they do not compress: the kernel's 128 KiB argv-string limit is "
     "never reached"),
    ("plan.json (burn-in, `topology simulate`/`verify`, `trace --plan`, `eplb --plan`)", "node names: 1-64 letters, "
     "digits, `._-`, starting with a letter or digit, never `ALL` or `DEFAULT` in any case; switch and NIC names: "
     f"letters, digits, `._:/@+-`, at most {MAX_DEVICE_NAME_CHARS}; at most {MAX_NICS_PER_NODE} NICs and "
     f"{MAX_GPUS_PER_NODE} GPUs per node, {MAX_ENDPOINTS:,} nodes x the larger of the two",
     "full match at the one reader (`dsctl.cluster.plan_file.load_plan`), sizes from the lists' lengths before any "
     "per-node table: a hostlist, a Slurm keyword, a control character or a plan of 20,000 nodes x 20,000 NICs "
     "(0.9 MB; before: 3-27 GB) is exit 2 in under 2 s at under 60 MiB. `health burn-in` tests at most "
     f"{MAX_BURNIN_ENDPOINTS:,} endpoints, checked the same way before its graph: 65,536 nodes x 64 GPUs (2 MB, "
     "within the reader's bounds; before: 32 s, 2.1 GiB) is exit 2 in 4 s at 73 MiB; at its bound (4,096 x 64 "
     "NICs x 64 GPUs, no switch) a burn-in with --out-dir takes 3.7 s, 185 MiB. At the reader's extreme (65,536 x "
     "64 x 64): `trace --plan` 2.3 s, 113 MiB; `topology simulate` refused by its flow count at 5.7 s, 0.8 GiB "
     "(its graph is built first)"),
    ("drains (`health burn-in/fleet/check --drain`)", "one plain node per `scontrol update NodeName=...`",
     "the name is checked again right before the argv is built, and Slurm must confirm it first: `scontrol show node "
     "-o NAME` gives exactly one record whose NodeName is NAME (a NodeSet or alias is not), else exit 3 naming "
     "scontrol and nothing is drained; a real burn-in with --drain asks this for every tested name before its first "
     "round (a NodeSet named like a node is exit 3 before srun runs); the circuit breaker therefore counts nodes, "
     "never expressions"),
    ("burn-in rounds handed to nodes", f"on srun's standard input (`--input=all`), at most {MAX_STDIN_CHARS:,} "
     "characters; nothing in argv grows with the round",
     "2,048 emulated nodes (fake srun) reach every round: 10.9 s, 246 MiB peak (before: 'Argument list too long' "
     "from 768 nodes, exit 3); a node's answer counts only for the flows it received; a non-finite or "
     "malformed value in an answer is exit 2 naming the node and the field"),
    ("output file target (`--svg`, `--out FILE`, `--sglang-out`, `--textfile-dir`)", "an existing target must be "
     "a regular file and not one of the command's inputs (same device and inode)", "a symbolic link, folder, "
     "character or block device, FIFO, socket or input is refused with exit 2 before anything is written, and left "
     "as it was; a regular file is replaced (no `--force`)"),
    ("`--out-dir DIR` (and `launch --submit`'s `./JOB_NAME`)", f"built whole in a sibling temporary folder, swapped in "
     f"with one rename; an existing DIR is replaced only if dsctl wrote it (its `{MANIFEST_NAME}` lists every file "
     f"in it) or it is empty; the replaced folder is kept as `DIR{PREV_SUFFIX}`, and an existing "
     f"`DIR{PREV_SUFFIX}` is deleted for it only if dsctl wrote it", "a foreign DIR or DIR.prev, or a DIR or "
     "DIR.prev holding an input, is exit 2 and nothing is moved (a stale temporary that is an input is not "
     "swept); temporaries are removed on errors, SIGINT, SIGTERM, SIGHUP, and "
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
