"""dsctl topology plan|compare|verify."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dsctl.commands._common import FormatOpt, profile_store, read_text_input, show
from dsctl.errors import InputError
from dsctl.output.formats import OutputFormat

app = typer.Typer(
    name="topology",
    help="Multi-plane fat-tree wiring plans, topology cost comparison, cabling export and fabric verification.",
    no_args_is_help=True,
)


@app.command("plan")
def plan(
    nodes: Annotated[int | None, typer.Option("--nodes", "-n", help="Number of nodes.")] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", help="Number of GPUs (whole nodes).")] = None,
    node_profile: Annotated[str, typer.Option("--node-profile", help="Node profile.")] = "h800-hgx",
    switch: Annotated[str, typer.Option("--switch", help="Switch profile (ports, rate, unit costs).")] = "ib-ndr-64",
    kind: Annotated[str, typer.Option("--kind", help="mpft, mrft, ft2 or ft3.")] = "mpft",
    planes: Annotated[int | None, typer.Option("--planes", help="Planes (default: NICs per node for mpft, "
                                                "else 1).")] = None,
    radix: Annotated[int | None, typer.Option("--radix", help="Ports per switch (default: from --switch).")] = None,
    oversubscription: Annotated[float, typer.Option("--oversubscription", help="Leaf down:up ratio R "
                                                    "(1 = non-blocking; two-tier kinds).")] = 1.0,
    node_name: Annotated[str | None, typer.Option("--node-name", help="Node name template, e.g. node{n:04d} "
                                                  "(names fit a 64-byte InfiniBand node description).")] = None,
    nic_name: Annotated[str | None, typer.Option("--nic-name", help="NIC name template, e.g. mlx5_{nic}.")] = None,
    leaf_name: Annotated[str | None, typer.Option("--leaf-name", help="Leaf name template, "
                                                  "e.g. p{plane}-leaf{leaf:02d}.")] = None,
    spine_name: Annotated[str | None, typer.Option("--spine-name", help="Spine name template, "
                                                   "e.g. p{plane}-spine{spine:02d}.")] = None,
    core_name: Annotated[str | None, typer.Option("--core-name", help="Core name template "
                                                  "(ft3), e.g. p{plane}-core{core:04d}.")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write cabling.csv, switches.csv, plan.json, "
                                             "topology.dot, topology.conf and topology.svg here.")] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Plan every switch and cable of a multi-plane (or multi-rail, FT2, FT3) fat tree."""
    from dsctl.output.files import write_files
    from dsctl.topology import api

    store = profile_store()
    node = store.node(node_profile)
    sw = store.switch(switch)
    num_nodes = api.nodes_for(nodes, gpus, node)
    spec = api.make_spec(kind, num_nodes, node, sw, planes=planes, radix=radix, oversubscription=oversubscription,
                         names={"node": node_name, "nic": nic_name, "leaf": leaf_name, "spine": spine_name,
                                "core": core_name})
    summary, files = api.plan_with_files(spec, with_files=out is not None)
    written: list[str] = []
    if out is not None:
        written = [str(p) for p in write_files(out, files)]
    show(api.PlanResult(summary, str(out) if out is not None else None, written), fmt, "topology plan")


@app.command("compare")
def compare(
    radix: Annotated[int | None, typer.Option("--radix", help="Ports per switch (default: from --switch).")] = None,
    switch: Annotated[str, typer.Option("--switch", help="Switch profile for the default costs.")] = "ib-ndr-64",
    switch_cost: Annotated[float | None, typer.Option("--switch-cost", help="USD per switch "
                                                      "(default: from --switch).")] = None,
    link_cost: Annotated[float | None, typer.Option("--link-cost", help="USD per switch-to-switch link "
                                                    "(default: from --switch).")] = None,
    planes: Annotated[int, typer.Option("--planes", help="Planes in the MPFT column.")] = 8,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """FT2, MPFT, FT3, Slim Fly and Dragonfly side by side (the paper's Table 3) for one radix."""
    from dsctl.topology import api

    sw = profile_store().switch(switch)
    result = api.compare(
        radix if radix is not None else sw.num_ports,
        switch_cost if switch_cost is not None else sw.cost_usd,
        link_cost if link_cost is not None else sw.link_cost_usd,
        planes,
    )
    show(result, fmt, "topology compare")


@app.command("verify")
def verify(
    plan_dir: Annotated[Path, typer.Argument(help="Folder written by 'topology plan --out' (or its plan.json).")],
    observed: Annotated[Path, typer.Argument(help="ibnetdiscover output, or a links CSV "
                                             "(a_device,a_port,b_device,b_port).")],
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Compare a plan with the fabric as cabled; exit 1 on any missing, extra, swapped or cross-plane cable."""
    from dsctl.output.progress import progress
    from dsctl.topology import api

    plan_file = plan_dir / "plan.json" if plan_dir.is_dir() else plan_dir
    if plan_dir.is_dir() and not plan_file.exists():
        raise InputError(f"PLAN_DIR {plan_dir} has no plan.json", hint="write one with 'dsctl topology plan --out DIR'")
    plan_text, observed_text = read_text_input(plan_file, "PLAN_DIR"), read_text_input(observed, "OBSERVED")
    with progress("checking every cable against the plan", fmt):
        result = api.verify_texts(plan_text, observed_text, str(plan_file), str(observed))
    show(result, fmt, "topology verify")
