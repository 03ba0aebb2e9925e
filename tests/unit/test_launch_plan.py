"""Schedule figures inside the launch plan (the simulator in dsctl.launch.schedule)."""

from __future__ import annotations

import pytest

import dsctl.launch.figures as plan_module
from dsctl.launch.batch import BatchPlan
from dsctl.launch.figures import schedule_figures as _schedule_figures
from dsctl.launch.layout import ParallelLayout


@pytest.mark.parametrize(("schedule", "pp"), [("dualpipe", 8), ("dualpipev", 4), ("1f1b", 8), ("zb1p", 8)])
def test_extrapolated_makespan_equals_full_simulation(monkeypatch: pytest.MonkeyPatch, schedule: str,
                                                      pp: int) -> None:
    layout = ParallelLayout(64, 8, pp, 8, 1, 512 // pp, schedule)
    batch = BatchPlan(global_batch=1, micro_batches=70, micro_batch_size=1, seq_len=4096)
    monkeypatch.setattr(plan_module, "MAX_SIMULATED_MICRO_BATCHES", 40)
    short = _schedule_figures(layout, batch)
    monkeypatch.setattr(plan_module, "MAX_SIMULATED_MICRO_BATCHES", 1000)
    full = _schedule_figures(layout, batch)
    assert short is not None and full is not None
    assert (short.makespan, short.bubble, short.peak_activations) == (full.makespan, full.bubble,
                                                                      full.peak_activations)


def test_dualpipe_figures_match_readme_formula() -> None:
    layout = ParallelLayout(256, 8, 16, 64, 1, 128, "dualpipe")
    fig = _schedule_figures(layout, BatchPlan(15360, 120, 1, 4096))
    assert fig is not None
    assert fig.bubble == fig.bubble_formula == (16 / 2 - 1) * (3 + 2 - 3)
    assert fig.peak_activations == 17  # PP + 1
