"""dsctl launch [OPTIONS] -- TRAIN_SCRIPT [ARGS...]  |  dsctl launch layout ...  |  dsctl launch schedule ...

With ``--backend`` (and ``--out-dir`` or ``--submit``) the launch also writes and runs its job: see launch_run.py.

``launch`` is both a command (the plan / dry run) and a group. ``LaunchGroup`` treats the first positional
argument as a subcommand only if it names one; everything after ``--`` is the training command.
"""

from __future__ import annotations

from difflib import get_close_matches
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from dsctl.commands._common import FormatOpt, Recipe, RecipeOpt, profile_store, read_text_input, show
from dsctl.commands.launch_calibrate import register_calibrate
from dsctl.commands.launch_schedule import register_schedule
from dsctl.errors import InputError, one_of
from dsctl.launch.defaults import DEFAULT_JOB_NAME, DEFAULT_PORT, DEFAULT_SEQ_LEN
from dsctl.output.formats import OutputFormat
from dsctl.profiles import DEFAULT_MODEL, DEFAULT_NODE_PROFILE

if TYPE_CHECKING:
    from dsctl.launch.plan import LaunchRequest

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


class Schedule(str, Enum):
    dualpipe = "dualpipe"
    dualpipev = "dualpipev"
    f1b1 = "1f1b"
    zb1p = "zb1p"


class Objective(str, Enum):
    fastest = "fastest"
    headroom = "headroom"
    fewest_nodes = "fewest-nodes"


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
ModelOpt = Annotated[str, typer.Option("--model", "-m", help="Model profile.")]
NodeProfileOpt = Annotated[str, typer.Option("--node-profile", help="Node profile (GPUs per node, HBM).")]
PPOpt = Annotated[int | None, typer.Option("--pp", help="Pipeline ranks per pipeline \\[default: smallest that fits].")]
EPOpt = Annotated[int | None, typer.Option("--ep", help="Expert parallelism \\[default: one expert group per node].")]
TPOpt = Annotated[int | None, typer.Option("--tp", help="Tensor parallelism \\[default: 1].")]
DPOpt = Annotated[str, typer.Option("--dp", help="Data parallelism: 'auto' = GPUs / (pp x tp), or a number.")]
ScheduleOpt = Annotated[Schedule, typer.Option("--schedule", case_sensitive=False, help="Pipeline schedule.")]
MicroOpt = Annotated[int | None, typer.Option("--micro-batches", help="Micro-batches per pipeline per step.")]
GlobalOpt = Annotated[int | None, typer.Option("--global-batch", help="Sequences per step \\[default: 15360].")]
SeqOpt = Annotated[int, typer.Option("--seq-len", help="Tokens per sequence.")]
OutOpt = Annotated[Path | None, typer.Option("--out-dir", help="Folder to write layout.json and ranks.csv into.")]


def _dp(value: str) -> int | None:
    if value.strip().lower() == "auto":
        return None
    try:
        number = int(value)
    except ValueError:
        raise InputError(f"--dp {value!r} is not valid: use 'auto' or a whole number >= 1") from None
    if number < 1:
        raise InputError(f"--dp {number} is not valid: use 'auto' or a whole number >= 1")
    return number


def _request(nodes: int | None, pp: int | None, ep: int | None, tp: int | None, dp: str, schedule: Schedule,
             micro_batches: int | None, global_batch: int | None, seq_len: int, recipe: Recipe | None = None,
             **extra: Any) -> LaunchRequest:
    from dsctl.launch.plan import LaunchRequest

    if nodes is None:
        raise InputError("--nodes is required: the number of nodes to plan for, e.g. --nodes 256")
    return LaunchRequest(num_nodes=nodes, pp=pp, ep=ep, tp=tp, dp=_dp(dp), schedule=schedule.value,
                         micro_batches=micro_batches, global_batch=global_batch, seq_len=seq_len,
                         recipe=recipe.value if recipe is not None else None, **extra)


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
def launch(
    ctx: typer.Context,
    nodes: Annotated[str | None, typer.Option(
        "--nodes", "-N", help="Number of nodes (required), or a range LOW-HIGH: the search runs at LOW, HIGH and "
                              "the powers of two (and their 1.5 multiples) between, and plans the best count "
                              "(--objective; with --tokens and --within-days, the deadline).")] = None,
    model: ModelOpt = DEFAULT_MODEL,
    node_profile: NodeProfileOpt = DEFAULT_NODE_PROFILE,
    pp: PPOpt = None,
    ep: EPOpt = None,
    tp: TPOpt = None,
    dp: DPOpt = "auto",
    schedule: ScheduleOpt = Schedule.dualpipe,
    micro_batches: MicroOpt = None,
    global_batch: GlobalOpt = None,
    seq_len: SeqOpt = DEFAULT_SEQ_LEN,
    recipe: RecipeOpt = None,
    backend: Annotated[Backend | None, typer.Option(
        "--backend", case_sensitive=False,
        help="Job engine: with --out-dir also write its job file (job.sbatch, torchrun.sh, jobset.yaml); "
             "with --submit run it. k8s = kubernetes.")] = None,
    job_name: Annotated[str | None, typer.Option(
        "--job-name", help="Job name (Slurm job, JobSet, log file) \\[default: dsctl-train].")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the plan and, with --backend, the job file it would run; nothing is written "
                          "(not even --out-dir) or submitted.")] = False,
    submit: Annotated[bool, typer.Option(
        "--submit", help="Write the job files (into --out-dir, default ./JOB_NAME) and run them: sbatch, local "
                         "torchrun, or kubectl apply.")] = False,
    out: Annotated[Path | None, typer.Option(
        "--out-dir", help="Folder for layout.json, ranks.csv and, with --backend, the job file.")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Slurm: wait for the job's end and report its state.")]
    = False,
    wait_timeout: Annotated[float, typer.Option("--wait-timeout-s", min=1, help="Seconds --wait waits at most.")]
    = 86_400.0,
    test_only: Annotated[bool, typer.Option(
        "--test-only", help="Slurm: ask sbatch --test-only whether the job would be accepted; queue nothing.")]
    = False,
    force: Annotated[bool, typer.Option("--force", help="Submit even if the plan does not fit in GPU memory.")]
    = False,
    port: Annotated[int, typer.Option("--port", help="Rendezvous TCP port on the first node.")] = DEFAULT_PORT,
    cpus_per_task: Annotated[int | None, typer.Option(
        "--cpus-per-task", help="Slurm CPUs per node's torchrun agent \\[default: one per GPU].")] = None,
    partition: Annotated[str | None, typer.Option("--partition", help="Slurm partition.")] = None,
    time_limit: Annotated[str | None, typer.Option("--time", help="Slurm time limit, e.g. 2-00:00:00.")] = None,
    hosts: Annotated[str | None, typer.Option(
        "--hosts", help="torchrun: comma-separated hosts in node-rank order (first = rendezvous).")] = None,
    image: Annotated[str | None, typer.Option("--image", help="Kubernetes: container image.")] = None,
    account: Annotated[str | None, typer.Option("--account", help="Slurm account to charge.")] = None,
    qos: Annotated[str | None, typer.Option("--qos", help="Slurm quality of service.")] = None,
    reservation: Annotated[str | None, typer.Option("--reservation", help="Slurm reservation.")] = None,
    exclude: Annotated[str | None, typer.Option(
        "--exclude", help="Slurm: nodes never to use, e.g. gpu[013,077].")] = None,
    nodelist: Annotated[str | None, typer.Option(
        "--nodelist", "-w", help="Slurm: nodes the job must include, e.g. gpu[001-016].")] = None,
    exclusive: Annotated[bool, typer.Option("--exclusive", help="Slurm: whole nodes, shared with no other job.")]
    = False,
    sbatch_arg: Annotated[list[str] | None, typer.Option(
        "--sbatch-arg", help="Slurm: one more #SBATCH option, e.g. --sbatch-arg=--mail-type=END (repeatable).")]
    = None,
    nccl_env: Annotated[list[str] | None, typer.Option(
        "--nccl-env", help="NCCL_NAME=VALUE exported to every worker (repeatable); NCCL_IB_HCA defaults to the "
                           "node profile's compute NICs when it names them.")] = None,
    tokens: Annotated[str | None, typer.Option(
        "--tokens", help="Trained tokens (e.g. 14.8T): the plan adds their GPU hours, days and cost at the "
                         "predicted step time.")] = None,
    gpu_hour_usd: Annotated[float, typer.Option(
        "--gpu-hour-usd", min=0.0, help="Rental price per GPU hour for --tokens.")] = 2.0,
    balancedness: Annotated[float, typer.Option(
        "--balancedness", help="Expert load balance for the step prediction: mean / max tokens per GPU, in (0, 1] "
                               "(1 = absolutely balanced; 'dsctl eplb' reports it).")] = 1.0,
    fabric: Annotated[Path | None, typer.Option(
        "--fabric", help="A planned fabric (plan.json or the folder of 'dsctl topology plan --out-dir'): the step "
                         "prediction's EP all-to-alls run through the fabric simulator on it instead of the node "
                         "profile's closed form.")] = None,
    objective: Annotated[Objective, typer.Option(
        "--objective", case_sensitive=False,
        help="What the layout search prefers: the fastest predicted step that fits, the most memory headroom "
             "within 10% of the fastest, or (with a --nodes range) the fewest nodes.")] = Objective.fastest,
    within_days: Annotated[float | None, typer.Option(
        "--within-days", min=0.001, help="With --tokens and a --nodes range: the deadline in days the chosen node "
                                         "count must meet.")] = None,
    eplb_stats: Annotated[Path | None, typer.Option(
        "--eplb-stats", help="Expert-load statistics (the input of 'dsctl eplb'): their balancedness sets the MoE "
                             "imbalance of the step prediction instead of --balancedness.")] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Plan a training launch (layout, memory, rank map, schedule), write its job files, submit it."""
    if ctx.invoked_subcommand is not None:
        _reject_group_options(ctx)
        return
    from dsctl.commands import launch_run
    from dsctl.launch.engines.backends import check_option_backend, normal_backend
    from dsctl.launch.engines.slurm_options import SlurmOptions, job_environment
    from dsctl.launch.engines.spec import JobOptions
    from dsctl.launch.plan import plan_launch
    from dsctl.launch.rules import SCHEDULES
    from dsctl.launch.search import SearchOptions
    from dsctl.output.progress import progress

    if dry_run and submit:
        raise InputError("--dry-run and --submit exclude each other; give one")
    for flag, given in (("--wait", wait), ("--test-only", test_only), ("--force", force)):
        if given and not submit:
            raise InputError(f"{flag} applies to --submit only")
    engine = normal_backend(backend.value) if backend else None
    site = _site_values(ctx, engine)  # dsctl.toml defaults that belong to another backend are left out
    partition, time_limit, image, account, qos, reservation, exclude = (
        None if name in site else value for name, value in (
            ("partition", partition), ("time_limit", time_limit), ("image", image), ("account", account),
            ("qos", qos), ("reservation", reservation), ("exclude", exclude)))
    slurm = SlurmOptions(account=account, qos=qos, reservation=reservation, exclude=exclude, nodelist=nodelist,
                         exclusive=exclusive, sbatch_args=tuple(sbatch_arg or ()))
    check_option_backend(engine, {"--hosts": hosts is not None, "--image": image is not None,
                                             "--partition": partition is not None, "--time": time_limit is not None,
                                             "--cpus-per-task": cpus_per_task is not None, **slurm.given()})
    store = profile_store()
    node = store.node(node_profile)
    options = JobOptions(job_name=job_name or DEFAULT_JOB_NAME, port=port, cpus_per_task=cpus_per_task,
                         partition=partition, time_limit=time_limit, image=image, hosts=_hosts(hosts), slurm=slurm,
                         extra_env=job_environment(node.compute_nic_devices, tuple(nccl_env or ())))
    train_command = tuple(ctx.meta.get(TRAIN_COMMAND_KEY, ()))
    low, high = _node_range(nodes)
    request = _request(low, pp, ep, tp, dp, schedule, micro_batches, global_batch, seq_len, recipe,
                       backend=engine, job_name=job_name, train_command=train_command)
    model_profile = store.model(model)
    on_line = {name for name in ("schedule", "balancedness")
             if getattr(ctx.get_parameter_source(name), "name", "DEFAULT") not in ("DEFAULT", "DEFAULT_MAP")}
    loads = None
    if eplb_stats is not None:
        if "balancedness" in on_line:
            raise InputError("--eplb-stats and --balancedness both set the MoE imbalance; give one")
        loads, balancedness = _expert_loads(eplb_stats, model_profile, node.num_gpus)
    search = SearchOptions(objective=objective.value,
                           schedules=(schedule.value,) if "schedule" in on_line else SCHEDULES, expert_loads=loads)
    budget, price, fabric_text = _tokens(tokens), _price(gpu_hour_usd), _fabric_text(fabric)
    if high != low or within_days is not None:
        from dsctl.launch.sweep import plan_node_range

        with progress("searching layouts over the node range", fmt):
            plan = plan_node_range(model_profile, node, request, search, low, high, budget, within_days, price,
                                   balancedness=balancedness, fabric_plan=fabric_text)
    else:
        with progress("searching layouts", fmt) as report:
            plan = plan_launch(model_profile, node, request, suggest_min_nodes=True, progress=report,
                               tokens=budget, gpu_hour_usd=price, balancedness=balancedness,
                               fabric_plan=fabric_text, search=search)
    if submit:
        with progress(f"waiting for Slurm job {options.job_name}" if wait else "submitting", fmt) as report:
            run = launch_run.submit(plan, engine, options, out, wait=wait, wait_timeout_s=wait_timeout,
                                    test_only=test_only, force=force, report=report)
        show(run, fmt, "launch")
        return
    if out is not None and not dry_run:
        names = launch_run.write_plan_and_job(plan, engine, options, out)
        if engine is not None:
            typer.echo(f"wrote {', '.join(names)} to {out}", err=True)
    if dry_run and fmt is OutputFormat.table:
        typer.echo("--dry-run: nothing written" + (f" (--out-dir {out} left as it was)" if out is not None else "")
                   + ", nothing submitted" + ("; the job file follows the plan" if engine is not None else ""),
                   err=True)
    preview = launch_run.job_preview(plan, engine, options) if engine is not None and dry_run else {}
    if engine is not None and out is None and not dry_run:
        typer.echo(f"note: --backend {engine} alone writes no job file: add --out-dir DIR to write it, --dry-run to "
                   "print it, --submit to run it", err=True)
    try:
        show(plan, fmt, "launch")
    finally:  # also after a plan that does not fit (exit 1): the reader sees what would have run
        if preview and fmt is OutputFormat.table:
            for name, text in preview.items():
                typer.echo(f"\n--- {name} (--dry-run: not written, not submitted) ---\n{text.rstrip()}")


def _node_range(text: str | None) -> tuple[int, int]:
    """``--nodes N`` or ``--nodes LOW-HIGH`` as (low, high); InputError naming the option otherwise."""
    if text is None:
        raise InputError("--nodes is required: the number of nodes to plan for, e.g. --nodes 256")
    parts = text.strip().split("-")
    try:
        values = [int(p) for p in parts]
    except ValueError:
        values = []
    if len(values) not in (1, 2):
        raise InputError(f"--nodes {text!r} is not valid: give a whole number (256) or a range (128-512)")
    for value in values:
        if value < 1:
            raise InputError(f"--nodes {value} is not valid: it must be a whole number >= 1")
    return values[0], values[-1]


def _fabric_text(fabric: Path | None) -> str | None:
    """``--fabric`` as plan.json text (a folder means its plan.json); InputError naming the option otherwise."""
    if fabric is None:
        return None
    plan_file = fabric / "plan.json" if fabric.is_dir() else fabric
    if fabric.is_dir() and not plan_file.exists():
        raise InputError(f"--fabric {fabric} has no plan.json",
                         hint="write one with 'dsctl topology plan --out-dir DIR'")
    from dsctl.topology import sim

    text = read_text_input(plan_file, "--fabric")
    sim.plan_facts(text, f"--fabric {plan_file}")  # not a plan: one line naming the option, before any planning
    return text


def _expert_loads(path: Path, model: Any, gpus_per_node: int) -> tuple[Any, float]:
    """``--eplb-stats`` as expert loads [layers, experts] and their balancedness at the default EP (one expert
    group per node), for a plan that is not searched."""
    from dsctl.commands._common import read_input
    from dsctl.eplb.stats import parse_stats
    from dsctl.launch.imbalance import stats_balancedness
    from dsctl.launch.rules import default_ep

    loads = parse_stats(str(path), read_input(path, "--eplb-stats"))
    experts = model.moe.num_routed_experts if model.moe is not None else 0
    if loads.shape[1] != experts:
        raise InputError(f"--eplb-stats {path}: {loads.shape[1]} experts per layer, but {model.name} has "
                         f"{experts} routed experts", hint="give routing statistics of this model")
    return loads, stats_balancedness(loads, default_ep(model, gpus_per_node, None))


def _tokens(text: str | None) -> float | None:
    """``--tokens`` as a count (14.8T, 500B); InputError naming the option otherwise."""
    if text is None:
        return None
    from dsctl.units import QuantityError, parse_count

    try:
        value = parse_count(text)
    except QuantityError as exc:
        raise InputError(f"--tokens {text!r}: {exc}", hint="give a count like 14.8T or 500B") from None
    if not 0 < value < float("inf"):
        raise InputError(f"--tokens {text!r}: expected a positive count like 14.8T")
    return value


def _price(usd: float) -> float:
    """``--gpu-hour-usd``: a finite price >= 0."""
    if not 0.0 <= usd < float("inf"):
        raise InputError(f"--gpu-hour-usd {usd}: expected a finite price >= 0, e.g. 2")
    return usd


def _site_values(ctx: typer.Context, engine: str | None) -> set[str]:
    """Parameters set by the site configuration (not the command line) for a backend other than ``engine``."""
    from dsctl.launch.engines.backends import other_backend_options

    return other_backend_options(engine, (name for name in ctx.params
                                          if getattr(ctx.get_parameter_source(name), "name", "") == "DEFAULT_MAP"))


def _hosts(text: str | None) -> tuple[str, ...]:
    if text is None:
        return ()
    hosts = tuple(h.strip() for h in text.split(","))
    if not all(hosts):
        raise InputError(f"--hosts {text!r} has an empty entry: give host names separated by commas, e.g. "
                         "--hosts gpu001,gpu002")
    return hosts


@app.command("layout")
def layout(
    nodes: NodesOpt = None,
    model: ModelOpt = DEFAULT_MODEL,
    node_profile: NodeProfileOpt = DEFAULT_NODE_PROFILE,
    pp: PPOpt = None,
    ep: EPOpt = None,
    tp: TPOpt = None,
    dp: DPOpt = "auto",
    schedule: ScheduleOpt = Schedule.dualpipe,
    micro_batches: MicroOpt = None,
    global_batch: GlobalOpt = None,
    seq_len: SeqOpt = DEFAULT_SEQ_LEN,
    recipe: RecipeOpt = None,
    explain: Annotated[bool, typer.Option("--explain", help="List the process groups (ranks, nodes, planes).")]
    = False,
    min_nodes_: Annotated[bool, typer.Option(
        "--min-nodes", help="Find the smallest node count whose layout fits in GPU memory (instead of --nodes) "
                            "and show that layout.")] = False,
    out: OutOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Choose or check a parallel layout and its rank map; --explain prints the groups."""
    from dsctl.launch.plan import plan_layout
    from dsctl.output.emit import render_json
    from dsctl.output.files import write_files
    from dsctl.output.progress import progress

    store = profile_store()
    model_profile, node = store.model(model), store.node(node_profile)
    if min_nodes_ and nodes is not None:
        raise InputError("--min-nodes chooses the node count; drop --nodes")
    request = _request(1 if min_nodes_ else nodes, pp, ep, tp, dp, schedule, micro_batches, global_batch, seq_len,
                       recipe)
    with progress("searching the smallest node count that fits" if min_nodes_ else "planning the layout",
                  fmt) as report:
        report_ = plan_layout(model_profile, node, request, explain=explain,
                              find_min_nodes=min_nodes_, progress=report)
    if out is not None:
        write_files(out, {"layout.json": render_json(report_.plan.layout_file()),
                          "ranks.csv": report_.plan.ranks.to_csv()})
    show(report_, fmt, "launch layout")


register_schedule(app)
register_calibrate(app)
