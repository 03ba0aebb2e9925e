"""What the layout search (``dsctl.launch.search``) produces: each layout tried as a :class:`Trial` (fitting and
predicted) or a :class:`Rejected` (why it lost), and the :class:`SearchResult` that ranks them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsctl.launch.batch import BatchPlan
from dsctl.launch.layout import ParallelLayout
from dsctl.launch.memory import MemoryEstimate
from dsctl.launch.stages import Stage
from dsctl.model.recipes import DEEPSEEK, ActivationRecipe
from dsctl.steptime import StepTime

if TYPE_CHECKING:
    from dsctl.launch.search import SearchSpace

#: the kinds of rejection, in the order the explanation lists them
REJECTION_KINDS: tuple[str, ...] = ("schedule rule", "divisibility", "EP span", "memory", "dominated",
                                    "outpaced", "step-time model")

@dataclass(frozen=True)
class Trial:
    """One structurally valid layout with its batch, then (stages 3-4) its memory and predicted step."""

    layout: ParallelLayout
    batch: BatchPlan
    notes: tuple[str, ...] = ()
    recipe: ActivationRecipe = DEEPSEEK
    stages: tuple[Stage, ...] = ()
    memory: MemoryEstimate | None = None
    step: StepTime | None = None

    def predicted(self) -> tuple[MemoryEstimate, StepTime]:
        """Memory and step of a trial that went through stages 3-4 (a missing one is a bug)."""
        if self.memory is None or self.step is None:
            raise RuntimeError(f"{self.label()} was ranked without its memory or step prediction")
        return self.memory, self.step

    def predicted_memory_bytes(self) -> int | None:
        return self.memory.max_total_bytes if self.memory is not None else None

    def label(self, with_recipe: bool = False) -> str:
        """``PP16 EP64 dualpipe 120x1`` (micro-batches x sequences each; dp = world / (pp x tp)), then the recipe
        with ``with_recipe``."""
        lay = self.layout
        tp = f" TP{lay.tp}" if lay.tp > 1 else ""
        zero = f" ZeRO-{lay.zero_stage}" if lay.zero_stage != 1 else ""
        text = (f"PP{lay.pp} EP{lay.ep}{tp}{zero} {lay.schedule} "
                f"{self.batch.micro_batches}x{self.batch.micro_batch_size}")
        return f"{text} {self.recipe.name}" if with_recipe else text


@dataclass(frozen=True)
class Rejected:
    """A combination that failed: ``kind`` (one of :data:`REJECTION_KINDS`), the rule's message, what it was."""

    kind: str
    schedule: str
    pp: int
    ep: int
    micro_batch_size: int
    reason: str
    memory_bytes: int | None = None
    recipe: str = DEEPSEEK.name
    zero_stage: int = 1
    tp: int = 1


@dataclass(frozen=True)
class SearchResult:
    """Stages 1-5: the space, the ranked trials (fitting and predicted, best first) and every rejection."""

    space: SearchSpace
    objective: str
    ranked: tuple[Trial, ...]
    rejected: tuple[Rejected, ...]
    hbm_bytes: int
    #: when the request fixes a recipe and no layout fits: the best fitting layout under each other recipe the
    #: model can train with (what would fit instead), fastest first
    alternatives: tuple[Trial, ...] = ()

    @property
    def num_evaluated(self) -> int:
        """Layouts evaluated: every combination of the space (trials and rejections)."""
        return len(self.ranked) + len(self.rejected)

    @property
    def best(self) -> Trial | None:
        return self.ranked[0] if self.ranked else None
