"""The option set ``dsctl launch`` and ``dsctl launch layout`` share, defined once (issue 28).

:func:`plan_options` adds the layout and search options below to a command's own parameters and hands the command
one :class:`PlanArgs` instead; :meth:`PlanArgs.request` and :meth:`PlanArgs.search` turn them into the domain's
``LaunchRequest`` and ``SearchOptions``, so both commands plan the same layout from the same options.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dsctl.commands._common import Recipe, read_text_input
from dsctl.errors import InputError
from dsctl.launch.defaults import DEFAULT_SEQ_LEN
from dsctl.profiles import DEFAULT_MODEL, DEFAULT_NODE_PROFILE

if TYPE_CHECKING:
    from dsctl.launch.request import LaunchRequest
    from dsctl.launch.search import SearchOptions
    from dsctl.profiles.schema import ModelProfile

#: help panels of ``dsctl launch --help`` (rich): the layout, what-if, job and Slurm options apart
LAYOUT_PANEL = "Layout (what the search may choose; a value given fixes it)"
WHAT_IF_PANEL = "Search and what-if"


class Schedule(str, Enum):
    dualpipe = "dualpipe"
    dualpipev = "dualpipev"
    f1b1 = "1f1b"
    zb1p = "zb1p"
    interleaved = "interleaved"


class Objective(str, Enum):
    fastest = "fastest"
    headroom = "headroom"
    fewest_nodes = "fewest-nodes"


def _opt(*names: str, panel: str = LAYOUT_PANEL, **kwargs: Any) -> Any:
    return typer.Option(*names, rich_help_panel=panel, **kwargs)


#: name -> (annotation, default) of every shared option, in --help order
SHARED: dict[str, tuple[Any, Any]] = {
    "model": (Annotated[str, _opt("--model", "-m", help="Model profile.")], DEFAULT_MODEL),
    "node_profile": (Annotated[str, _opt("--node-profile", help="Node profile (GPUs per node, HBM).")],
                     DEFAULT_NODE_PROFILE),
    "pp": (Annotated[int | None, _opt("--pp", help="Pipeline ranks per pipeline \\[default: searched].")], None),
    "ep": (Annotated[int | None, _opt("--ep", help="Expert parallelism \\[default: searched].")], None),
    "tp": (Annotated[int | None, _opt("--tp", help="Tensor parallelism in a node, with sequence parallelism "
                                                   "\\[default: searched].")], None),
    "dp": (Annotated[str, _opt("--dp", help="Data parallelism: 'auto' = GPUs / (pp x tp), or a number.")], "auto"),
    "schedule": (Annotated[Schedule, _opt("--schedule", case_sensitive=False, show_default=False,
                                          help="Pipeline schedule \\[default: searched].")], Schedule.dualpipe),
    "micro_batches": (Annotated[int | None, _opt("--micro-batches", help="Micro-batches per pipeline per step.")],
                      None),
    "global_batch": (Annotated[int | None, _opt("--global-batch", help="Sequences per step \\[default: 15360].")],
                     None),
    "seq_len": (Annotated[int, _opt("--seq-len", help="Tokens per sequence.")], DEFAULT_SEQ_LEN),
    "recipe": (Annotated[Recipe | None, _opt(
        "--recipe", case_sensitive=False,
        help="Activation recipe: deepseek (DeepSeek-V3's: FP8 caching, "
             "norms and MLA up-projections recomputed), selective (attention core recomputed), full-recompute, "
             "none (plain BF16) \\[default: searched among those the model can train with].")],
               None),
    "objective": (Annotated[Objective, _opt(
        "--objective", panel=WHAT_IF_PANEL, case_sensitive=False,
        help="What the layout search prefers: the fastest predicted step that fits, the most memory headroom "
             "within 10% of the fastest, or (with a --nodes range) the fewest nodes.")], Objective.fastest),
    "balancedness": (Annotated[float, _opt(
        "--balancedness", panel=WHAT_IF_PANEL,
        help="Expert load balance for the step prediction: mean / max tokens per GPU, in (0, 1] (1 = absolutely "
             "balanced; 'dsctl eplb' reports it).")], 1.0),
    "fabric": (Annotated[Path | None, _opt(
        "--fabric", panel=WHAT_IF_PANEL,
        help="A planned fabric (plan.json or the folder of 'dsctl topology plan --out-dir'): the step "
             "prediction's EP all-to-alls run through the fabric simulator on it instead of the node profile's "
             "closed form.")], None),
    "eplb_stats": (Annotated[Path | None, _opt(
        "--eplb-stats", panel=WHAT_IF_PANEL,
        help="Expert-load statistics (the input of 'dsctl eplb'): their balancedness sets the MoE imbalance of "
             "the step prediction instead of --balancedness.")], None),
}


@dataclass(frozen=True)
class PlanArgs:
    """The shared options as given; ``given`` names those on the command line (not defaults)."""

    model: str
    node_profile: str
    pp: int | None
    ep: int | None
    tp: int | None
    dp: str
    schedule: Schedule
    micro_batches: int | None
    global_batch: int | None
    seq_len: int
    recipe: Recipe | None
    objective: Objective
    balancedness: float
    fabric: Path | None
    eplb_stats: Path | None
    given: frozenset[str] = field(default=frozenset())

    def request(self, nodes: int, **extra: Any) -> LaunchRequest:
        """The domain request (``extra``: the command's own fields: backend, job name, training command, ...),
        checked (:meth:`LaunchRequest.check`)."""
        from dsctl.launch.request import LaunchRequest, parse_dp

        return LaunchRequest(num_nodes=nodes, pp=self.pp, ep=self.ep, tp=self.tp, dp=parse_dp(self.dp),
                             schedule=self.schedule.value, micro_batches=self.micro_batches,
                             global_batch=self.global_batch, seq_len=self.seq_len,
                             recipe=self.recipe.value if self.recipe is not None else None,
                             balancedness_given="balancedness" in self.given,
                             eplb_stats_given=self.eplb_stats is not None, **extra).check()

    def search(self, model: ModelProfile, gpus_per_node: int) -> tuple[SearchOptions, float, str | None]:
        """``(search options, balancedness, fabric plan text)``: the schedule given is the only one tried, else
        every one; ``--eplb-stats`` gives each EP degree its balancedness (:meth:`request` refuses it with
        ``--balancedness``)."""
        from dsctl.launch.rules import SCHEDULES
        from dsctl.launch.search import SearchOptions

        loads, balancedness = None, self.balancedness
        if self.eplb_stats is not None:
            loads, balancedness = _expert_loads(self.eplb_stats, model, gpus_per_node)
        schedules = (self.schedule.value,) if "schedule" in self.given else SCHEDULES
        return (SearchOptions(objective=self.objective.value, schedules=schedules, expert_loads=loads),
                balancedness, _fabric_text(self.fabric))


def plan_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command(ctx, ..., plan: PlanArgs)`` as a Typer command that also takes every option of :data:`SHARED`
    (after its own first parameter, ``ctx``)."""
    signature = inspect.signature(command, eval_str=True)
    own = [p for p in signature.parameters.values() if p.name != "plan"]
    shared = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
              for name, (annotation, default) in SHARED.items()]
    ctx, rest = own[0], own[1:]
    keyword = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in rest]

    @functools.wraps(command)
    def wrapper(ctx: typer.Context, **kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) for name in SHARED}
        given = frozenset(name for name in SHARED if getattr(ctx.get_parameter_source(name), "name", "DEFAULT")
                          not in ("DEFAULT", "DEFAULT_MAP"))
        return command(ctx, plan=PlanArgs(**values, given=given), **kwargs)

    params = [ctx.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD), *keyword[:1], *shared, *keyword[1:]]
    wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    del wrapper.__wrapped__  # Typer reads the signature above, not the command's own
    return wrapper


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
    from dsctl.launch.imbalance import model_stats_balancedness
    from dsctl.launch.rules import default_ep

    loads = parse_stats(str(path), read_input(path, "--eplb-stats"))
    experts = model.moe.num_routed_experts if model.moe is not None else 0
    ep = default_ep(model, gpus_per_node, None)
    return loads, model_stats_balancedness(loads, str(path), experts, model.name, ep)
