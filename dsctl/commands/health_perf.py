"""dsctl health perf: judge saved perftest and nccl-tests output against the node profile (docs/health.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dsctl.commands._common import FormatOpt, perf_report_texts, plan_text_of, profile_store, show
from dsctl.output.formats import OutputFormat
from dsctl.thresholds import SLOW_FRACTION


def perf(
    files: Annotated[list[Path], typer.Argument(help="Saved output of ib_write_bw/ib_read_bw/ib_send_bw or of "
                                                "nccl-tests (all_reduce_perf, alltoall_perf, ...); - for stdin.")],
    node: Annotated[str | None, typer.Option("--node-profile", help="Node profile with the NIC and NVLink rates "
                                             "(default: from the GPU model in nccl-tests output, else h800-hgx).")]
    = None,
    fraction: Annotated[float, typer.Option("--fraction", help="Slow = below this fraction of the expectation.")]
    = SLOW_FRACTION,
    plan: Annotated[Path | None, typer.Option("--plan", help="Fabric plan (plan.json or its folder): nccl-tests "
                                              "expectations from the flow simulator on it (on the file's hosts); "
                                              "its node profile is the default.")] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Judge perftest and nccl-tests results against what the node profile says the path should deliver (NIC
    line rate x efficiency; a collective's bus bandwidth on N nodes). Exit 1 when a result is slow or wrong."""
    from dsctl.health.perf.judge import judge_files

    texts = perf_report_texts(files, "FILE")
    store = profile_store()
    fabric = None
    if plan is not None:
        from dsctl.health.perf.expect import PlanFabric
        from dsctl.topology.sim import plan_facts

        text, source = plan_text_of(plan)
        fabric = PlanFabric(text, source)
        node = node or plan_facts(text, source)[0] or None
    report = judge_files(texts, store.node(node) if node else None, store.node, fraction, fabric)
    show(report, fmt, "health perf")


def add_commands(app: typer.Typer) -> None:
    app.command("perf")(perf)
