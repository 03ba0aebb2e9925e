"""Plan on window t, score on t + 1 (dsctl.eplb.windows) on the generated drift model."""

from __future__ import annotations

import numpy as np
import pytest
from test_eplb_pareto import drift_windows

from dsctl.eplb.windows import replay_windows
from dsctl.errors import InputError

LAYOUT = {"num_replicas": 288, "num_gpus": 32, "num_nodes": 4, "num_groups": 8}


def test_replay_scores_intervals_against_hindsight() -> None:
    windows = drift_windows(5, layers=3, sigma=0.15, seed=4)
    res = replay_windows(windows, **LAYOUT, intervals=(1, 2, 4))
    by = {s.interval: s for s in res.scores}
    # planning on the past delivers less than hindsight, more than never re-planning
    assert res.stale < by[1].delivered < res.oracle
    assert by[1].delivered >= by[2].delivered >= by[4].delivered - 1e-12
    assert by[1].replans == 3 and by[2].replans == 1 and by[4].replans == 0 and by[4].pays_off is None
    assert by[4].delivered == pytest.approx(res.stale)
    assert by[1].replicas_moved_per_window > by[2].replicas_moved_per_window > 0
    assert by[1].pays_off is not None and 0.0 <= by[1].pays_off <= 1.0
    assert res.best_interval in (1, 2, 4)


def test_replay_best_interval_is_long_when_the_load_does_not_drift() -> None:
    still = [np.round(np.random.default_rng(0).lognormal(0, 1, (2, 256)) * 1000)] * 4
    res = replay_windows(still, **LAYOUT, intervals=(1, 3))
    assert res.best_interval == 3 and res.oracle == pytest.approx(res.stale)
    assert all(s.pays_off in (None, 0.0) for s in res.scores)


def test_replay_input_errors() -> None:
    w = drift_windows(2, layers=1)
    with pytest.raises(InputError, match="at least 2"):
        replay_windows(w[:1], **LAYOUT)
    with pytest.raises(InputError, match="differ in shape"):
        replay_windows([w[0], w[1][:, :128]], **LAYOUT)
    with pytest.raises(InputError, match=">= 1"):
        replay_windows(w, **LAYOUT, intervals=(0,))
