"""Engine options, the job facts a renderer needs, and the ``DSCTL_*`` environment that carries the layout.

The layout reaches the training script as environment variables (strings), so that it can build its process
groups without reading dsctl's files:

=====================  ============================================================================
variable               meaning
=====================  ============================================================================
``DSCTL_PP``           pipeline-parallel degree (pipeline ranks)
``DSCTL_EP``           expert-parallel degree (ranks per EP group)
``DSCTL_TP``           tensor-parallel degree
``DSCTL_DP``           dense data-parallel degree
``DSCTL_EDP``          expert data-parallel degree (``tp x dp / ep`` replicas of each routed expert)
``DSCTL_RANK_ORDER``   ``tp-cp-ep-dp-pp``: Megatron's order string, fastest-varying dimension first
``DSCTL_NUM_NODES``    nodes in the job
``DSCTL_GPUS_PER_NODE``  workers per node (torchrun ``--nproc-per-node``)
``DSCTL_SCHEDULE``     pipeline schedule (dualpipe, dualpipev, 1f1b, zb1p, interleaved)
``DSCTL_NUM_STAGES``   model stages (2 x pp under DualPipeV and interleaved)
``DSCTL_ZERO_STAGE``   ZeRO stage (1, 2 or 3)
``DSCTL_RECIPE``       activation recipe the plan assumes (``deepseek``)
``DSCTL_GLOBAL_BATCH`` sequences per step
``DSCTL_MICRO_BATCHES``  micro-batches per pipeline per step
``DSCTL_MICRO_BATCH_SIZE``  sequences per micro-batch
``DSCTL_SEQ_LEN``      tokens per sequence
``DSCTL_MODEL``        model profile name
``DSCTL_JOB_NAME``     job name
=====================  ============================================================================

Rank arithmetic the variables imply (``docs/launch.md`` section 4): ``rank = node x gpus_per_node + local_gpu``;
dense view ``rank = tp_rank + tp x (dp_rank + dp x pp_rank)``; expert view
``rank = ep_rank + ep x (edp_rank + edp x pp_rank)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from dsctl.errors import DsctlError, ExitCode, InputError
from dsctl.launch.defaults import DEFAULT_JOB_NAME, DEFAULT_PORT
from dsctl.launch.engines.slurm_options import SlurmOptions, check_slurm_options
from dsctl.launch.plan import LaunchPlan
from dsctl.names import HOST, IMAGE, K8S_NAME, SLURM_NAME, check_name

#: the backends ``--backend`` accepts (``k8s`` is an alias of ``kubernetes``)
BACKENDS: tuple[str, ...] = ("slurm", "torchrun", "kubernetes")

_SLURM_TIME = re.compile(r"\d{1,9}|\d{1,9}:\d{2}(:\d{2})?|\d{1,6}-\d{1,2}(:\d{2}(:\d{2})?)?")


@dataclass(frozen=True)
class JobOptions:
    """Engine options from the command line (everything the plan itself does not decide).

    ``port`` is the rendezvous TCP port on the first node; ``cpus_per_task`` the CPUs Slurm gives each node's
    torchrun agent (``None``: one per worker); ``hosts`` the hosts of a ``torchrun`` launch in node order (the
    first is the rendezvous host); ``log_path`` the Slurm ``--output`` pattern (``None``: ``<job>-%j.out`` in the
    submission folder).
    """

    job_name: str = DEFAULT_JOB_NAME
    port: int = DEFAULT_PORT
    cpus_per_task: int | None = None
    partition: str | None = None
    time_limit: str | None = None
    image: str | None = None
    hosts: tuple[str, ...] = ()
    log_path: str | None = None
    #: Slurm account, QOS, node lists, raw #SBATCH lines (see slurm_options.py)
    slurm: SlurmOptions = field(default_factory=SlurmOptions)
    #: extra job variables after the DSCTL_* layout (NCCL_IB_HCA, --nccl-env), as (name, value) pairs
    extra_env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class JobSpec:
    """The facts every renderer uses, taken from a :class:`LaunchPlan` and checked once."""

    job_name: str
    num_nodes: int
    gpus_per_node: int
    train_command: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    port: int
    summary: str

    @property
    def world_size(self) -> int:
        """Workers (ranks) in the job."""
        return self.num_nodes * self.gpus_per_node


class NotSubmitted(DsctlError):
    """The plan ran and said the job would fail (it does not fit in memory). Exit code 1."""

    exit_code = ExitCode.CHECK_FAILED


def check_submittable(plan: LaunchPlan, force: bool) -> None:
    """:class:`NotSubmitted` when ``plan`` does not fit in GPU memory, unless ``force``."""
    if plan.exit_code and not force:
        raise NotSubmitted(f"the plan does not fit in GPU memory ({plan.layout.describe()}); nothing was submitted",
                           hint="see the plan with --dry-run; --force submits anyway")


def layout_env(plan: LaunchPlan, job_name: str) -> tuple[tuple[str, str], ...]:
    """The ``DSCTL_*`` variables of a plan as ``(name, value)`` pairs, in a fixed order (see the module doc)."""
    lay = plan.layout
    batch = plan.batch
    pairs = {
        "DSCTL_PP": lay.pp, "DSCTL_EP": lay.ep, "DSCTL_TP": lay.tp, "DSCTL_DP": lay.dp,
        "DSCTL_EDP": plan.expert_dp, "DSCTL_RANK_ORDER": plan.rank_map.order.split(" ")[0],
        "DSCTL_NUM_NODES": plan.num_nodes, "DSCTL_GPUS_PER_NODE": plan.gpus_per_node,
        "DSCTL_SCHEDULE": plan.schedule, "DSCTL_NUM_STAGES": plan.num_stages, "DSCTL_ZERO_STAGE": plan.zero_stage,
        "DSCTL_RECIPE": plan.memory.recipe,
        "DSCTL_GLOBAL_BATCH": batch.global_batch, "DSCTL_MICRO_BATCHES": batch.micro_batches,
        "DSCTL_MICRO_BATCH_SIZE": batch.micro_batch_size, "DSCTL_SEQ_LEN": batch.seq_len,
        "DSCTL_MODEL": plan.model, "DSCTL_JOB_NAME": job_name,
    }
    return tuple((name, str(value)) for name, value in pairs.items())


def check_job_name(name: str, backend: str) -> str:
    """Return ``name`` if ``backend`` accepts it as a job name, else raise InputError naming ``--job-name``."""
    if backend == "kubernetes":
        if not K8S_NAME.fullmatch(name):
            raise InputError(
                f"{name!r} is not valid for Kubernetes: use 1-40 lowercase letters, digits or '-', "
                "starting and ending with a letter or digit (it names the JobSet, its Service and its pods)",
                field="job_name", hint="e.g. --job-name v3-pretrain")
    elif not SLURM_NAME.fullmatch(name):
        raise InputError(f"{name!r} is not valid: use 1-63 letters, digits, '.', '_' or '-', "
                         "starting with a letter or digit", field="job_name", hint="e.g. --job-name v3-pretrain")
    return name


def check_options(options: JobOptions, backend: str, num_nodes: int) -> None:
    """Check the engine options that do not depend on the plan; InputError names the option."""
    if backend not in BACKENDS:
        raise InputError(f"{backend!r} is not valid: use slurm, torchrun or kubernetes", field="backend")
    check_job_name(options.job_name, backend)
    if not 1 <= options.port <= 65_535:
        raise InputError(f"{options.port} is not a TCP port: use 1-65535 (torchrun's default is 29500)",
                         field="port")
    if options.cpus_per_task is not None and options.cpus_per_task < 1:
        raise InputError(f"{options.cpus_per_task} is not valid: use a whole number >= 1", field="cpus_per_task")
    if options.time_limit is not None and not _SLURM_TIME.fullmatch(options.time_limit):
        raise InputError(f"{options.time_limit!r} is not a Slurm time limit: use MINUTES, HH:MM:SS, "
                         "D-HH or D-HH:MM:SS", field="time_limit", hint="e.g. --time 2-00:00:00 for two days")
    if options.partition is not None and not SLURM_NAME.fullmatch(options.partition):
        raise InputError(f"{options.partition!r} is not a valid partition name", field="partition")
    for host in options.hosts:
        if not HOST.fullmatch(host):
            raise InputError(f": {host!r} is not a host name or address", field="hosts")
    if options.image is not None:
        check_name(options.image, "--image", IMAGE, "use a container image reference such as "
                   "registry.example.com/team/train:v1 (letters, digits and '._/:@+-'; no whitespace)")
    if options.hosts and len(options.hosts) != num_nodes:
        raise InputError(f"lists {len(options.hosts)} host(s) but the plan has {{nodes}} {num_nodes}: "
                         "give one host per node, the rendezvous host first", field="hosts", mentions=("nodes",))
    if len(set(options.hosts)) != len(options.hosts):
        raise InputError("lists a host twice: give each node once, in node-rank order", field="hosts")


def job_spec(plan: LaunchPlan, options: JobOptions, backend: str) -> JobSpec:
    """Check ``options`` against ``plan`` for ``backend`` and collect what the renderers need.

    Raises InputError when the training command (after ``--``) is missing or an option is invalid.
    """
    check_options(options, backend, plan.num_nodes)
    check_slurm_options(options.slurm)
    check_name(plan.model, "model profile")  # profile names reach the scripts' comments and DSCTL_MODEL
    check_name(plan.node_profile, "node profile")
    if not plan.train_command:
        raise InputError(f"{backend} needs the training command after '--' to write a job", field="backend",
                         hint="dsctl launch --nodes N --backend slurm --out-dir job/ -- train.py --config v3.yaml")
    return JobSpec(
        job_name=options.job_name, num_nodes=plan.num_nodes, gpus_per_node=plan.gpus_per_node,
        train_command=tuple(plan.train_command), env=(*layout_env(plan, options.job_name), *options.extra_env),
        port=options.port,
        summary=f"{plan.model} on {plan.num_nodes} x {plan.node_profile}, {plan.layout.describe()} "
                f"(expert-DP {plan.expert_dp}), {plan.schedule}, {plan.world_size} ranks",
    )
