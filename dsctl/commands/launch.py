"""dsctl launch [OPTIONS] -- TRAIN_SCRIPT [ARGS...]  |  dsctl launch layout ...  |  dsctl launch schedule ...

With ``--backend`` (and ``--out-dir`` or ``--submit``) the launch also writes and runs its job: see launch_run.py.

``launch`` is both a command (the plan / dry run) and a group. ``LaunchGroup`` treats the first positional
argument as a subcommand only if it names one; everything after ``--`` is the training command.
"""

from __future__ import annotations

from difflib import get_close_matches
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from dsctl.commands._common import COMMON_FIELD_OPTIONS, FormatOpt, profile_store, show
from dsctl.commands.launch_calibrate import register_calibrate
from dsctl.commands.launch_options import PlanArgs, plan_options
from dsctl.commands.launch_schedule import register_schedule
from dsctl.errors import InputError, one_of
from dsctl.launch.defaults import DEFAULT_JOB_NAME, DEFAULT_PORT
from dsctl.output.formats import OutputFormat
from dsctl.units import DAY_S

#: request field -> the option that sets it (dsctl.launch and dsctl.steptime errors name fields; see
#: dsctl.commands._common.option_for)
FIELD_OPTIONS: dict[str, str] = {
    "nodes": "--nodes",
    "pp": "--pp",
    "ep": "--ep",
    "tp": "--tp",
    "dp": "--dp",
    "schedule": "--schedule",
    "micro_batches": "--micro-batches",
    "global_batch": "--global-batch",
    "balancedness": "--balancedness",
    "eplb_stats": "--eplb-stats",
    "objective": "--objective",
    "tokens": "--tokens",
    "within_days": "--within-days",
    "chunk_layers": "--chunk-layers",
    "backend": "--backend",
    "job_name": "--job-name",
    "port": "--port",
    "cpus_per_task": "--cpus-per-task",
    "time_limit": "--time",
    "partition": "--partition",
    "hosts": "--hosts",
    "image": "--image",
    "sbatch_args": "--sbatch-arg",
    "nccl_env": "--nccl-env",
    "comm_model": "--comm-model",
    "f_cost": "--f-cost",
    "b_cost": "--b-cost",
    "w_cost": "--w-cost",
    "fb_cost": "--fb-cost",
    "svg": "--svg",
    "find_min_nodes": "--min-nodes",
    "gpu_hour_usd": "--gpu-hour-usd",
    "dry_run": "--dry-run",
    "submit": "--submit",
    "wait": "--wait",
    "test_only": "--test-only",
    "force": "--force",
    "account": "--account",
    "qos": "--qos",
    "reservation": "--reservation",
    "exclude": "--exclude",
    "nodelist": "--nodelist",
    "exclusive": "--exclusive",
    "out": "--out-dir",  # launch and launch layout; calibrate writes a profile file
    "calibrate out": "--out",
}

#: every field as the launch commands spell it, for the rule texts a plan keeps (LaunchRequest.spelling)
SPELLING: dict[str, str] = {**COMMON_FIELD_OPTIONS, **{k: v for k, v in FIELD_OPTIONS.items() if " " not in k}}

TRAIN_COMMAND_KEY = "dsctl.launch.train_command"


class LaunchGroup(TyperGroup):
    """A group whose callback is also the ``launch`` command itself.

    Arguments after the first ``--`` are the training command and never reach option parsing. Before it, a
    positional argument is a subcommand if it names one, and an error otherwise (the training command must
    follow ``--``).
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        args = list(args)
        if not args and not ctx.resilient_parsing:
            return super().parse_args(ctx, args)  # no_args_is_help: print the help
        if "--" in args:
            cut = args.index("--")
            head, tail, has_sep = args[:cut], args[cut + 1:], True
        else:
            head, tail, has_sep = args, [], False
        if head:
            rest = super().parse_args(ctx, head)
        else:
            # 'dsctl launch -- train.py': options are missing, not the whole command line, so the launch itself
            # runs and reports what is required (--nodes) instead of printing the help
            self.no_args_is_help = False
            try:
                rest = super().parse_args(ctx, head)
            finally:
                self.no_args_is_help = True
        protected = list(getattr(ctx, "_protected_args", []) or [])
        if protected:
            name = protected[0]
            if self.get_command(ctx, name) is None:
                close = get_close_matches(name, self.list_commands(ctx), n=1)
                raise InputError(
                    f"'{name}' is not a launch subcommand ({one_of(self.list_commands(ctx))}) and the training "
                    f"command must follow '--'",
                    hint=f"did you mean 'dsctl launch {close[0]}'?" if close
                    else f"dsctl launch --nodes N [options] -- {name} ...",
                )
            if has_sep:
                ctx.args = [*ctx.args, "--", *tail]
            return list(ctx.args)
        ctx.meta[TRAIN_COMMAND_KEY] = tuple(tail)
        return rest


class Backend(str, Enum):
    slurm = "slurm"
    torchrun = "torchrun"
    kubernetes = "kubernetes"
    k8s = "k8s"  # alias of kubernetes


app = typer.Typer(
    name="launch",
    cls=LaunchGroup,
    no_args_is_help=True,
    help="Plan a training launch (parallel layout, memory fit, rank map, pipeline schedule) and write or submit "
         "its job for Slurm, torchrun or Kubernetes (dsctl launch --nodes N \\[options] \\[--backend B] "
         "\\[--out-dir DIR] \\[--submit] -- TRAIN_SCRIPT \\[ARGS...]).",
)

NodesOpt = Annotated[int | None, typer.Option("--nodes", "-N", help="Number of nodes (required).")]
OutOpt = Annotated[Path | None, typer.Option("--out-dir", help="Folder to write layout.json and ranks.csv into.")]
#: help panels of the options only a job needs (the layout and search ones: launch_options.py)
JOB_PANEL = "Job files and submission (--backend)"
SLURM_PANEL = "Slurm (--backend slurm)"
COST_PANEL = "Cost and node count (--tokens, a --nodes range)"


def _reject_group_options(ctx: typer.Context) -> None:
    given = []
    for name in ctx.params:
        source = ctx.get_parameter_source(name)
        if source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP"):
            given.append(name)
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise InputError(f"options given before '{ctx.invoked_subcommand}' ({flags}) belong to the launch itself",
                         hint=f"put them after the subcommand: dsctl launch {ctx.invoked_subcommand} [options]")


@app.callback(invoke_without_command=True)
@plan_options
def launch(
    ctx: typer.Context,
    nodes: Annotated[str | None, typer.Option(
        "--nodes", "-N", help="Number of nodes (required), or a range LOW-HIGH: the search runs at LOW, HIGH and "
                              "the powers of two (and their 1.5 multiples) between, and plans the best count "
                              "(--objective; with --tokens and --within-days, the deadline).")] = None,
    *,
    plan: PlanArgs,
    backend: Annotated[Backend | None, typer.Option(
        "--backend", case_sensitive=False, rich_help_panel=JOB_PANEL,
        help="Job engine: with --out-dir also write its job file (job.sbatch, torchrun.sh, jobset.yaml); "
             "with --submit run it. k8s = kubernetes.")] = None,
    job_name: Annotated[str | None, typer.Option(
        "--job-name", rich_help_panel=JOB_PANEL,
        help="Job name (Slurm job, JobSet, log file) \\[default: dsctl-train].")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the plan and, with --backend, the job file it would run; nothing is written "
                          "(not even --out-dir) or submitted.")] = False,
    submit: Annotated[bool, typer.Option(
        "--submit", rich_help_panel=JOB_PANEL,
        help="Write the job files (into --out-dir, default ./JOB_NAME) and run them: sbatch, local torchrun, or "
             "kubectl apply.")] = False,
    out: Annotated[Path | None, typer.Option(
        "--out-dir", help="Folder for layout.json, ranks.csv and, with --backend, the job file.")] = None,
    wait: Annotated[bool, typer.Option("--wait", rich_help_panel=SLURM_PANEL,
                                       help="Slurm: wait for the job's end and report its state.")] = False,
    wait_timeout: Annotated[float, typer.Option("--wait-timeout-s", min=1, rich_help_panel=SLURM_PANEL,
                                                help="Seconds --wait waits at most.")] = DAY_S,
    test_only: Annotated[bool, typer.Option(
        "--test-only", rich_help_panel=SLURM_PANEL,
        help="Slurm: ask sbatch --test-only whether the job would be accepted; queue nothing.")] = False,
    force: Annotated[bool, typer.Option("--force", rich_help_panel=JOB_PANEL,
                                        help="Submit even if the plan does not fit in GPU memory.")] = False,
    port: Annotated[int, typer.Option("--port", rich_help_panel=JOB_PANEL,
                                      help="Rendezvous TCP port on the first node.")] = DEFAULT_PORT,
    cpus_per_task: Annotated[int | None, typer.Option(
        "--cpus-per-task", rich_help_panel=SLURM_PANEL,
        help="Slurm CPUs per node's torchrun agent \\[default: one per GPU].")] = None,
    partition: Annotated[str | None, typer.Option("--partition", rich_help_panel=SLURM_PANEL,
                                                  help="Slurm partition.")] = None,
    time_limit: Annotated[str | None, typer.Option("--time", rich_help_panel=SLURM_PANEL,
                                                   help="Slurm time limit, e.g. 2-00:00:00.")] = None,
    hosts: Annotated[str | None, typer.Option(
        "--hosts", rich_help_panel=JOB_PANEL,
        help="torchrun: comma-separated hosts in node-rank order (first = rendezvous).")] = None,
    image: Annotated[str | None, typer.Option("--image", rich_help_panel=JOB_PANEL,
                                              help="Kubernetes: container image.")] = None,
    account: Annotated[str | None, typer.Option("--account", rich_help_panel=SLURM_PANEL,
                                                help="Slurm account to charge.")] = None,
    qos: Annotated[str | None, typer.Option("--qos", rich_help_panel=SLURM_PANEL,
                                            help="Slurm quality of service.")] = None,
    reservation: Annotated[str | None, typer.Option("--reservation", rich_help_panel=SLURM_PANEL,
                                                    help="Slurm reservation.")] = None,
    exclude: Annotated[str | None, typer.Option(
        "--exclude", rich_help_panel=SLURM_PANEL, help="Slurm: nodes never to use, e.g. gpu[013,077].")] = None,
    nodelist: Annotated[str | None, typer.Option(
        "--nodelist", "-w", rich_help_panel=SLURM_PANEL,
        help="Slurm: nodes the job must include, e.g. gpu[001-016].")] = None,
    exclusive: Annotated[bool, typer.Option("--exclusive", rich_help_panel=SLURM_PANEL,
                                            help="Slurm: whole nodes, shared with no other job.")] = False,
    sbatch_arg: Annotated[list[str] | None, typer.Option(
        "--sbatch-arg", rich_help_panel=SLURM_PANEL,
        help="Slurm: one more #SBATCH option, e.g. --sbatch-arg=--mail-type=END (repeatable).")] = None,
    nccl_env: Annotated[list[str] | None, typer.Option(
        "--nccl-env", rich_help_panel=JOB_PANEL,
        help="NCCL_NAME=VALUE exported to every worker (repeatable); NCCL_IB_HCA defaults to the node profile's "
             "compute NICs when it names them.")] = None,
    tokens: Annotated[str | None, typer.Option(
        "--tokens", rich_help_panel=COST_PANEL,
        help="Trained tokens (e.g. 14.8T): the plan adds their GPU hours, days and cost at the predicted step "
             "time.")] = None,
    gpu_hour_usd: Annotated[float, typer.Option(
        "--gpu-hour-usd", min=0.0, rich_help_panel=COST_PANEL, help="Rental price per GPU hour for --tokens.")]
    = 2.0,
    within_days: Annotated[float | None, typer.Option(
        "--within-days", min=0.001, rich_help_panel=COST_PANEL,
        help="With --tokens and a --nodes range: the deadline in days the chosen node count must meet.")] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Plan a training launch (layout, memory, rank map, schedule), write its job files, submit it."""
    if ctx.invoked_subcommand is not None:
        _reject_group_options(ctx)
        return
    from dsctl.commands import launch_run
    from dsctl.launch.engines.backends import normal_backend
    from dsctl.launch.engines.slurm_options import SlurmOptions, job_environment
    from dsctl.launch.engines.spec import JobOptions
    from dsctl.launch.plan import plan_launch
    from dsctl.launch.request import parse_hosts, parse_node_range, parse_tokens
    from dsctl.output.progress import progress

    engine = normal_backend(backend.value) if backend else None
    site = _site_values(ctx, engine)  # dsctl.toml defaults that belong to another backend are left out
    partition, time_limit, image, account, qos, reservation, exclude = (
        None if name in site else value for name, value in (
            ("partition", partition), ("time_limit", time_limit), ("image", image), ("account", account),
            ("qos", qos), ("reservation", reservation), ("exclude", exclude)))
    engine_values = {"hosts": hosts, "image": image, "partition": partition, "time_limit": time_limit,
                     "cpus_per_task": cpus_per_task, "account": account, "qos": qos, "reservation": reservation,
                     "exclude": exclude, "nodelist": nodelist, "exclusive": exclusive or None,
                     "sbatch_args": sbatch_arg or None}
    low, high = parse_node_range(nodes)
    request = plan.request(low, max_nodes=high, spelling=SPELLING, backend=engine, job_name=job_name,
                           train_command=tuple(ctx.meta.get(TRAIN_COMMAND_KEY, ())), tokens=parse_tokens(tokens),
                           within_days=within_days, gpu_hour_usd=gpu_hour_usd, dry_run=dry_run, submit=submit,
                           wait=wait, test_only=test_only, force=force, hosts=parse_hosts(hosts),
                           engine_options=frozenset(k for k, v in engine_values.items() if v is not None))
    slurm = SlurmOptions(account=account, qos=qos, reservation=reservation, exclude=exclude, nodelist=nodelist,
                         exclusive=exclusive, sbatch_args=tuple(sbatch_arg or ()))
    store = profile_store()
    node = store.node(plan.node_profile)
    options = JobOptions(job_name=job_name or DEFAULT_JOB_NAME, port=port, cpus_per_task=cpus_per_task,
                         partition=partition, time_limit=time_limit, image=image, hosts=request.hosts, slurm=slurm,
                         extra_env=job_environment(node.compute_nic_devices, tuple(nccl_env or ())))
    model_profile = store.model(plan.model)
    search, balancedness, fabric_text = plan.search(model_profile, node.num_gpus)
    if request.node_range:
        from dsctl.launch.sweep import plan_node_range

        with progress("searching layouts over the node range (counts searched)", fmt, total=1) as report:
            result = plan_node_range(model_profile, node, request, search, low, high, request.tokens, within_days,
                                     request.gpu_hour_usd, balancedness=balancedness, fabric_plan=fabric_text,
                                     progress=report)
    else:
        with progress("searching layouts (layouts predicted)", fmt, total=1) as report:
            result = plan_launch(model_profile, node, request, suggest_min_nodes=True, progress=report,
                                 tokens=request.tokens, gpu_hour_usd=request.gpu_hour_usd, balancedness=balancedness,
                                 fabric_plan=fabric_text, search=search)
    if submit:
        with progress(f"waiting for Slurm job {options.job_name}" if wait else "submitting", fmt) as report:
            run = launch_run.submit(result, engine, options, out, wait=wait, wait_timeout_s=wait_timeout,
                                    test_only=test_only, force=force, report=report)
        show(run, fmt, "launch")
        return
    if out is not None and not dry_run:
        names = launch_run.write_plan_and_job(result, engine, options, out)
        if engine is not None:
            typer.echo(f"wrote {', '.join(names)} to {out}", err=True)
    if dry_run and fmt is OutputFormat.table:
        typer.echo("--dry-run: nothing written" + (f" (--out-dir {out} left as it was)" if out is not None else "")
                   + ", nothing submitted" + ("; the job file follows the plan" if engine is not None else ""),
                   err=True)
    preview = launch_run.job_preview(result, engine, options) if engine is not None and dry_run else {}
    if engine is not None and out is None and not dry_run:
        typer.echo(f"note: --backend {engine} alone writes no job file: add --out-dir DIR to write it, --dry-run to "
                   "print it, --submit to run it", err=True)
    try:
        show(result, fmt, "launch")
    finally:  # also after a plan that does not fit (exit 1): the reader sees what would have run
        if preview and fmt is OutputFormat.table:
            for name, text in preview.items():
                typer.echo(f"\n--- {name} (--dry-run: not written, not submitted) ---\n{text.rstrip()}")


def _site_values(ctx: typer.Context, engine: str | None) -> set[str]:
    """Parameters set by the site configuration (not the command line) for a backend other than ``engine``."""
    from dsctl.launch.engines.backends import other_backend_options

    return other_backend_options(engine, (name for name in ctx.params
                                          if getattr(ctx.get_parameter_source(name), "name", "") == "DEFAULT_MAP"))


@app.command("layout")
@plan_options
def layout(
    ctx: typer.Context,
    nodes: NodesOpt = None,
    *,
    plan: PlanArgs,
    explain: Annotated[bool, typer.Option("--explain", help="List the process groups (ranks, nodes, planes).")]
    = False,
    min_nodes_: Annotated[bool, typer.Option(
        "--min-nodes", help="Find the smallest node count whose layout fits in GPU memory (instead of --nodes) "
                            "and show that layout.")] = False,
    out: OutOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """The layout 'dsctl launch' plans with the same options, and its rank map; --explain prints the groups."""
    from dsctl.launch.layout_report import plan_layout
    from dsctl.launch.request import parse_node_range
    from dsctl.output.emit import render_json
    from dsctl.output.files import write_files
    from dsctl.output.progress import progress

    store = profile_store()
    model_profile, node = store.model(plan.model), store.node(plan.node_profile)
    low = parse_node_range(None if nodes is None else str(nodes))[0]  # 0: not given
    request = plan.request(low, find_min_nodes=min_nodes_, spelling=SPELLING)
    search, balancedness, fabric_text = plan.search(model_profile, node.num_gpus)
    with progress("searching the smallest node count that fits" if min_nodes_ else "searching layouts",
                  fmt, total=1) as report:
        report_ = plan_layout(model_profile, node, request, explain=explain, find_min_nodes=min_nodes_,
                              progress=report, search=search, balancedness=balancedness, fabric_plan=fabric_text)
    if out is not None:
        write_files(out, {"layout.json": render_json(report_.plan.layout_file()),
                          "ranks.csv": report_.plan.ranks.to_csv()})
    show(report_, fmt, "launch layout")


register_schedule(app)
register_calibrate(app)
