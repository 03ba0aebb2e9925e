"""dsctl examples [DIR]: copy the small example inputs shipped in the wheel, so that every README example runs.

The files live in the package (``dsctl/_example_data``, written by tests/data/examples/make_examples.py) and are
written through :func:`dsctl.output.files.write_files`: ``DIR`` is created whole, and an existing ``DIR`` is
replaced only if dsctl wrote it (its manifest), never a folder of the user's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from dsctl.commands._common import FormatOpt, show
from dsctl.output.formats import OutputFormat

HELP = ("Copy small example inputs (EPLB statistics, an ibnetdiscover dump, 3FS admin_cli output, profiler traces, "
        "a node record, a rank map, a burn-in fault model) into a folder, to try every documented example on.")
app = typer.Typer(name="examples", help=HELP, no_args_is_help=False, invoke_without_command=True,
                  context_settings={"allow_interspersed_args": True})  # DIR and -f in any order
DEFAULT_DIR = "dsctl-examples"
#: the folder's files -> what each is for (the README example that reads it)
USES: dict[str, str] = {
    **{f"stats/day{d}.npy": "eplb rebalance, replay" for d in range(1, 7)},
    "today.npy": "eplb simulate",
    "fabric.txt": "topology verify",
    "list-chains.txt": "storage doctor",
    "list-targets.txt": "storage doctor",
    "node.yaml": "health check --from-record",
    **{f"traces/rank{r}.json.gz": "trace overlap, stragglers, timeline" for r in range(8)},
    "job/ranks.csv": "trace stragglers --ranks",
    "faults.yaml": "health burn-in --fabric-model",
    # the docs pages' worked examples
    "stats.json": "eplb rebalance (worked example)",
    "week1.npy": "eplb rebalance (worked example)",
    "week2.npy": "eplb rebalance --previous (worked example)",
    "faults128.yaml": "health burn-in (worked example)",
    **{f"my-profiles/{p}.yaml": "profiles validate (worked example)" for p in (
        "models/deepseek-v3", "models/deepseek-v2-lite", "models/my", "nodes/h800-hgx", "nodes/x")},
    **{f"two_nodes_down/{n}": "storage doctor (worked example)" for n in ("list-chains.txt", "list-targets.txt")},
    **{f"gloo/rank{r}.json.gz": "trace overlap (worked example)" for r in (0, 1)},
    **{f"ep/{n}.json.gz": "trace overlap (worked example)" for n in ("ep_serial", "ep_overlapped")},
    **{f"records/{n}.yaml": "health check/topo --from-record (worked example)" for n in (
        "nic_wrong_numa", "nvlink_link_down")},
    "miswired.txt": "topology verify (worked example)",
    **{f"perf/{n}.txt": "health perf (worked example)" for n in (
        "all_reduce_h100_2nodes", "ib_write_bw_mlx5_0", "ib_write_bw_mlx5_3")},
}


@dataclass(frozen=True)
class ExampleFile:
    path: str
    num_bytes: int
    used_by: str


@dataclass(frozen=True)
class ExamplesResult:
    """The folder written and its files."""

    out_dir: str
    files: tuple[ExampleFile, ...]
    next_step: str


def example_data_dir() -> Path:
    """The shipped examples (``dsctl/_example_data``, in the wheel and in a checkout alike)."""
    return Path(__file__).resolve().parents[1] / "_example_data"


@app.callback()
def examples(
    out_dir: Annotated[Path, typer.Argument(help="Folder to create (replaced only if dsctl wrote it).")]
    = Path(DEFAULT_DIR),
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Copy the example inputs into DIR (default ./dsctl-examples); then cd there and run the examples."""
    from dsctl.inputs import read_bytes
    from dsctl.output.files import write_files

    source = example_data_dir()
    files = {name: read_bytes(source / name, "shipped example") for name in USES}
    write_files(out_dir, files, option="DIR")
    listing = tuple(ExampleFile(name, len(data), USES[name]) for name, data in files.items())
    hint = f"cd {out_dir}, then e.g. dsctl trace stragglers 'traces/rank*.json.gz'"
    show(ExamplesResult(str(out_dir), listing, hint), fmt, "examples")
