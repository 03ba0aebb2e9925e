"""Step 1 of the launch pipeline: what the user asked for, checked before any layout is tried.

``request -> candidates -> batch -> memory -> explanation -> plan`` (see ``dsctl.launch.plan``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from dsctl.errors import DsctlError, InputError
from dsctl.launch.defaults import DEFAULT_SEQ_LEN
from dsctl.launch.engines.backends import OPTION_BACKEND
from dsctl.launch.rules import check_schedule_layout, check_schedule_name, divisors
from dsctl.launch.tensor_parallel import check_tp
from dsctl.model.recipes import recipe_named
from dsctl.names import shown
from dsctl.profiles.schema import ModelProfile
from dsctl.units import QuantityError, parse_count

#: largest cluster dsctl plans: 131,072 nodes (about a million GPUs); keeps the rank map well inside memory
MAX_NODES = 131_072
#: largest --pp/--ep/--tp/--dp/--micro-batches/--global-batch/--seq-len (2^53: exact as a float, far above any run)
MAX_COUNT = 2**53


#: the fields that only mean something with ``submit``
SUBMIT_ONLY = ("wait", "test_only", "force")


@dataclass(frozen=True)
class LaunchRequest:
    """What the user asked for; ``None`` means "choose for me".

    Besides the plan's own fields it carries what the launch is asked to do with the plan, so that
    :meth:`check` holds every option rule of ``dsctl launch`` and ``dsctl launch layout`` in one place, naming
    fields (the command layer's ``FIELD_OPTIONS`` spells each as its flag): ``max_nodes`` the high end of a node
    range (None: one count); ``find_min_nodes`` search the smallest count instead (``num_nodes`` 0 = not given);
    ``tokens`` / ``within_days`` / ``gpu_hour_usd`` the training budget, deadline and price; ``balancedness_given``
    and ``eplb_stats_given`` which MoE imbalance source was given; ``dry_run`` / ``submit`` / ``wait`` /
    ``test_only`` / ``force`` what happens to the job; ``engine_options`` the backend-only fields given
    (``dsctl.launch.engines.backends.OPTION_BACKEND``); ``hosts`` the torchrun hosts; ``spelling`` how the
    caller's interface spells each field (the command layer's table; empty: the field's own name), for the
    rule texts a plan keeps (a candidate's rejection shown in plan lines and hints), which no error carries to
    the command layer.
    """

    num_nodes: int
    pp: int | None = None
    ep: int | None = None
    tp: int | None = None
    dp: int | None = None
    schedule: str = "dualpipe"
    micro_batches: int | None = None
    global_batch: int | None = None
    seq_len: int = DEFAULT_SEQ_LEN
    backend: str | None = None
    job_name: str | None = None
    train_command: tuple[str, ...] = ()
    #: activation recipe name (``dsctl.model.recipes``); None = not fixed: the layout search tries every recipe
    #: the model can train with, the memory rule uses the model profile's
    recipe: str | None = None
    max_nodes: int | None = None
    find_min_nodes: bool = False
    tokens: float | None = None
    within_days: float | None = None
    gpu_hour_usd: float = 2.0
    balancedness_given: bool = False
    eplb_stats_given: bool = False
    dry_run: bool = False
    submit: bool = False
    wait: bool = False
    test_only: bool = False
    force: bool = False
    engine_options: frozenset[str] = frozenset()
    hosts: tuple[str, ...] = ()
    spelling: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def option(self, name: str) -> str:
        """How the user spells field ``name`` (:attr:`spelling`, else the name itself)."""
        return self.spelling.get(name, name)

    def reason(self, exc: DsctlError) -> str:
        """The message of ``exc`` with its fields spelled, for a rule text the plan keeps."""
        exc.name_options(self.spelling.get)
        return exc.message

    @property
    def tp_or_default(self) -> int:
        """Rule 1: tp 1 unless given."""
        return self.tp if self.tp is not None else 1

    @property
    def node_range(self) -> bool:
        """Whether several node counts are searched (a ``LOW-HIGH`` range, or a deadline to meet)."""
        return (self.max_nodes is not None and self.max_nodes != self.num_nodes) or self.within_days is not None

    def check(self) -> LaunchRequest:
        """The option rules that need no model profile; returns the request planning starts from (a smallest-
        count search starts at one node). Raises InputError naming the first field that breaks a rule."""
        if self.find_min_nodes:
            if self.num_nodes:
                raise InputError("chooses the node count; drop {nodes}", field="find_min_nodes", mentions=("nodes",))
        elif self.num_nodes == 0:
            raise InputError("is required: the number of nodes to plan for, e.g. {nodes} 256", field="nodes",
                             mentions=("nodes",))
        if self.tokens is not None and not 0 < self.tokens < math.inf:
            raise InputError(f"{self.tokens:g}: expected a positive count like 14.8T", field="tokens")
        if not 0.0 <= self.gpu_hour_usd < math.inf:
            raise InputError(f"{self.gpu_hour_usd}: expected a finite price >= 0, e.g. 2", field="gpu_hour_usd")
        if self.eplb_stats_given and self.balancedness_given:
            raise InputError("and {balancedness} both set the MoE imbalance; give one", field="eplb_stats",
                             mentions=("balancedness",))
        self._check_job()
        return replace(self, num_nodes=1) if self.find_min_nodes else self

    def _check_job(self) -> None:
        if self.dry_run and self.submit:
            raise InputError("and {submit} exclude each other; give one", field="dry_run", mentions=("submit",))
        for name in SUBMIT_ONLY:
            if getattr(self, name) and not self.submit:
                raise InputError("applies to {submit} only", field=name, mentions=("submit",))
        for name, owner in OPTION_BACKEND.items():
            if name in self.engine_options and self.backend != owner:
                raise InputError(f"applies to {{backend}} {owner}" + (f", not {self.backend}" if self.backend else ""),
                                 field=name, mentions=("backend",), hint=f"add --backend {owner}, or drop it")
        if not self.submit:
            return
        if self.backend is None:
            raise InputError("needs {backend} slurm, torchrun or kubernetes", field="submit", mentions=("backend",),
                             hint="e.g. dsctl launch --nodes 4 --backend slurm --submit -- train.py")
        if self.test_only and self.backend != "slurm":
            raise InputError(f"asks Slurm whether it would accept the job; it does not apply to {{backend}} "
                             f"{self.backend}", field="test_only", mentions=("backend",))
        if self.wait and self.backend != "slurm":
            raise InputError(f"applies to {{backend}} slurm (torchrun runs in the foreground; kubernetes is "
                             f"applied only); drop it for {{backend}} {self.backend}", field="wait",
                             mentions=("backend",))
        if self.backend == "torchrun" and self.hosts and self.num_nodes == 1 and not self.node_range:
            raise InputError("names the hosts of the job file; {submit} with {backend} torchrun runs one node on "
                             "this host", field="hosts", mentions=("submit", "backend"),
                             hint="drop --hosts to run here, or use --out-dir DIR without --submit and run "
                                  "'bash DIR/torchrun.sh RANK' on each host")
        if self.backend == "torchrun" and (self.num_nodes != 1 or self.node_range):
            nodes = self.num_nodes if self.max_nodes in (None, self.num_nodes) else f"{self.num_nodes}-{self.max_nodes}"
            raise InputError(f"with {{backend}} torchrun runs one node on this host; the plan has {{nodes}} {nodes}",
                             field="submit", mentions=("backend", "nodes"),
                             hint="use --out-dir DIR without --submit and run 'bash DIR/torchrun.sh RANK' on each "
                                  "host, or --backend slurm")

    def checked(self, model: ModelProfile, gpus_per_node: int) -> LaunchRequest:
        """The checks of this request against ``model`` on nodes of ``gpus_per_node`` GPUs that do not depend on
        its node count; returns it with the schedule and recipe names normalised. Raises InputError naming the
        field."""
        schedule = check_schedule_name(self.schedule)
        recipe = None if self.recipe is None else recipe_named(self.recipe).name  # None: the search chooses
        request = replace(self, schedule=schedule, recipe=recipe)
        for name in ("pp", "ep", "tp", "dp", "micro_batches", "global_batch", "seq_len"):
            value = getattr(request, name)
            if value is not None and value < 1:
                raise InputError(f"{value} is not valid: it must be a whole number >= 1", field=name)
            if value is not None and value > MAX_COUNT:
                raise InputError(f"{shown(str(value), 20)} is not valid: dsctl plans counts up to {MAX_COUNT:,}",
                                 field=name)
        if request.tp is not None:  # the rules of the tps a search tries
            check_tp(model, gpus_per_node, request.tp)
        if request.pp is not None:
            check_schedule_layout(schedule, request.pp, None)
        if request.ep is not None and model.moe is not None and model.moe.num_routed_experts % request.ep:
            experts = model.moe.num_routed_experts
            valid = [str(d) for d in divisors(experts)]
            raise InputError(
                f"ep {request.ep} does not divide the {experts} routed experts of {model.name} "
                f"({experts} = {experts // request.ep} x {request.ep} + {experts % request.ep})",
                hint=f"valid ep for this model: {', '.join(valid)}",
            )
        return request


def check_node_count(num_nodes: int) -> None:
    """``nodes`` within 1..:data:`MAX_NODES`; raises InputError."""
    if not 1 <= num_nodes <= MAX_NODES:
        raise InputError(f"{num_nodes:,} is not valid: it must be a whole number from 1 to "
                         f"{MAX_NODES:,} (dsctl's planning limit)", field="nodes")


def parse_node_range(text: str | None) -> tuple[int, int]:
    """``N`` or ``LOW-HIGH`` as (low, high); ``(0, 0)`` when not given (:meth:`LaunchRequest.check` says it is
    required). InputError naming the field otherwise."""
    if text is None:
        return 0, 0
    try:
        values = [int(text)]  # one count (a negative one is refused below)
    except ValueError:
        try:
            values = [int(p) for p in text.strip().split("-")]
        except ValueError:
            values = []
    if len(values) not in (1, 2):
        raise InputError(f"{text!r} is not valid: give a whole number (256) or a range (128-512)", field="nodes")
    for value in values:
        if value < 1:
            raise InputError(f"{value} is not valid: it must be a whole number >= 1", field="nodes")
    return values[0], values[-1]


def parse_dp(text: str) -> int | None:
    """``auto`` (None: GPUs / (pp x tp)) or a whole number >= 1; InputError naming the field otherwise."""
    if text.strip().lower() == "auto":
        return None
    try:
        number = int(text)
    except ValueError:
        raise InputError(f"{text!r} is not valid: use 'auto' or a whole number >= 1", field="dp") from None
    if number < 1:
        raise InputError(f"{number} is not valid: use 'auto' or a whole number >= 1", field="dp")
    return number


def parse_tokens(text: str | None) -> float | None:
    """A token count (14.8T, 500B), None when not given; InputError naming the field otherwise."""
    if text is None:
        return None
    try:
        value = parse_count(text)
    except QuantityError as exc:
        raise InputError(f"{text!r}: {exc}", field="tokens", hint="give a count like 14.8T or 500B") from None
    return value  # a count <= 0 breaks a rule of LaunchRequest.check


def parse_hosts(text: str | None) -> tuple[str, ...]:
    """Comma-separated host names in node-rank order; InputError naming the field for an empty entry."""
    if text is None:
        return ()
    hosts = tuple(h.strip() for h in text.split(","))
    if not all(hosts):
        raise InputError(f"{text!r} has an empty entry: give host names separated by commas, e.g. "
                         "{hosts} gpu001,gpu002", field="hosts", mentions=("hosts",))
    return hosts
