"""Table view of ``dsctl launch --submit`` (a LaunchRun)."""

from __future__ import annotations

import shlex
from collections.abc import Iterator

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from dsctl.launch.engines.result import LaunchRun
from dsctl.output.registry import table_renderer


@table_renderer(LaunchRun)
def _render_run(run: LaunchRun) -> Iterator[RenderableType]:
    table = Table(title=f"Launch {run.job_name} ({run.backend}): {run.layout}, {run.world_size:,} ranks",
                  title_justify="left", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    rows = [("state", run.state)]
    if run.job_id is not None:
        rows.append(("job id", run.job_id))
    if run.job_exit_code is not None:
        rows.append(("exit code", str(run.job_exit_code)))
    if run.elapsed_s is not None:
        rows.append(("elapsed", f"{run.elapsed_s:.1f} s"))
    if run.message:
        rows.append(("scheduler" if run.backend == "slurm" else "engine", run.message))
    rows.append(("command", shlex.join(run.command)))
    rows.append(("files", f"{run.out_dir}/: {', '.join(run.files)}"))
    if run.log_path:
        rows.append(("log", run.log_path))
    for field, value in rows:
        table.add_row(field, value)
    yield table
    if run.exit_code:
        yield Text(f"the job ended {run.state}; see the log above or in {run.log_path or run.out_dir}",
                   style="bold red")
