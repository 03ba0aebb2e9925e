"""Step 1 of the launch pipeline: what the user asked for, checked before any layout is tried.

``request -> candidates -> batch -> memory -> explanation -> plan`` (see ``dsctl.launch.plan``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dsctl.errors import InputError
from dsctl.launch.defaults import DEFAULT_SEQ_LEN
from dsctl.launch.rules import check_schedule_layout, check_schedule_name, divisors
from dsctl.model.recipes import recipe_named
from dsctl.names import shown
from dsctl.profiles.schema import ModelProfile

#: largest cluster dsctl plans: 131,072 nodes (about a million GPUs); keeps the rank map well inside memory
MAX_NODES = 131_072
#: largest --pp/--ep/--tp/--dp/--micro-batches/--global-batch/--seq-len (2^53: exact as a float, far above any run)
MAX_COUNT = 2**53


@dataclass(frozen=True)
class LaunchRequest:
    """What the user asked for; ``None`` means "choose for me"."""

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

    @property
    def tp_or_default(self) -> int:
        """Rule 1: tp 1 unless given."""
        return self.tp if self.tp is not None else 1


def check_node_count(num_nodes: int) -> None:
    """``--nodes`` within 1..:data:`MAX_NODES`; raises InputError."""
    if not 1 <= num_nodes <= MAX_NODES:
        raise InputError(f"{num_nodes:,} is not valid: it must be a whole number from 1 to "
                         f"{MAX_NODES:,} (dsctl's planning limit)", field="nodes")


def check_request(model: ModelProfile, request: LaunchRequest) -> LaunchRequest:
    """The checks of ``request`` that do not depend on its node count; returns it with the schedule name
    normalised. Raises InputError."""
    schedule = check_schedule_name(request.schedule)
    recipe = None if request.recipe is None else recipe_named(request.recipe).name  # None: the search chooses
    request = replace(request, schedule=schedule, recipe=recipe)
    for name in ("pp", "ep", "tp", "dp", "micro_batches", "global_batch", "seq_len"):
        value = getattr(request, name)
        if value is not None and value < 1:
            raise InputError(f"{value} is not valid: it must be a whole number >= 1", field=name)
        if value is not None and value > MAX_COUNT:
            raise InputError(f"{shown(str(value), 20)} is not valid: dsctl plans counts up to {MAX_COUNT:,}",
                             field=name)
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
