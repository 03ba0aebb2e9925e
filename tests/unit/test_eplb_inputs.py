"""Input rules found by QA: the slot limit (V12), one shared placement reader, --tolerance without --previous."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dsctl.eplb.checks import MAX_SLOTS_PER_EXPERT, MAX_SLOTS_PER_LAYER, check_layout, max_slots_per_layer
from dsctl.eplb.placement_file import read_placement
from dsctl.eplb.rebalance import rebalance
from dsctl.eplb.reference import rebalance_reference
from dsctl.eplb.request import RebalanceRequest
from dsctl.eplb.result import sglang_expert_location
from dsctl.eplb.simulate import simulate
from dsctl.errors import InputError

README = np.array([[90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
                   [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27]], dtype=float)
ARGS = {"replicas": 16, "gpus": 8, "nodes": 2, "groups": 4}


def test_slot_limit_per_layer() -> None:
    assert max_slots_per_layer(256) == MAX_SLOTS_PER_EXPERT * 256 == 4096
    assert max_slots_per_layer(10_000) == MAX_SLOTS_PER_LAYER == 65_536
    assert check_layout(1, 256, 4096, 8, 4, 32).num_replicas == 4096  # the limit itself is allowed
    with pytest.raises(InputError) as err:
        check_layout(58, 256, 100_000_000, 8, 4, 32)
    assert ("replicas 100000000 is above the limit of 4096 slots per layer for 256 experts" in err.value.message
            and "(rule V12)" in err.value.message)
    with pytest.raises(InputError, match="rule V12"):
        check_layout(1, 8192, 70_000 * 2, 1, 1, 2)


def test_huge_replicas_fail_fast() -> None:
    with pytest.raises(InputError, match="rule V12"):
        rebalance_reference(README, 100_000_000, 4, 2, 8)


def _sglang_text(num_dense: int, weight: np.ndarray = README) -> str:
    placement = rebalance_reference(weight, 16, 4, 2, 8)
    return json.dumps(sglang_expert_location(placement, num_dense))


def test_shared_reader_drops_trivial_dense_rows() -> None:
    loaded = read_placement("sgl.json", _sglang_text(3), 2, 12)
    assert loaded.placement.num_layers == 2 and loaded.dropped_leading_layers == 3 and loaded.kind == "sglang"
    assert np.array_equal(loaded.placement.phy2log, rebalance_reference(README, 16, 4, 2, 8).phy2log)
    with pytest.raises(InputError, match="placement has 5 layers but the statistics have 6"):
        read_placement("sgl.json", _sglang_text(3), 6, 12)


def test_previous_and_simulate_read_the_same_sglang_file() -> None:
    """QA: --previous rejected an SGLang file with dense rows that simulate accepted."""
    loaded = read_placement("--previous sgl.json", _sglang_text(3), 2, 12)
    result = rebalance(README, RebalanceRequest(**ARGS, previous=loaded, tolerance=0.01))
    assert result.migration is not None and result.migration.replicas_moved == 0
    assert any("skipped 3 leading layers" in w for w in result.warnings)
    sim = simulate(README, loaded, 8)
    assert any("skipped 3 leading layers" in w for w in sim.warnings)


def test_simulate_gpus_must_be_positive() -> None:
    loaded = read_placement("p.json", _sglang_text(0), 2, 12)
    with pytest.raises(InputError) as err:
        simulate(README, loaded, 0)
    assert err.value.message == "gpus must be >= 1, got 0" and err.value.field == "gpus"
    with pytest.raises(InputError, match="16 = 3 x 5 \\+ 1"):
        simulate(README, loaded, 5)


def test_tolerance_only_applies_with_previous() -> None:
    with pytest.raises(InputError) as err:
        rebalance(README, RebalanceRequest(**ARGS, tolerance=0.05))
    assert err.value.message == "tolerance 0.05 only applies with a previous placement (migration-aware planning)"
    # the default value, given explicitly: a warning only
    warned = rebalance(README, RebalanceRequest(**ARGS, tolerance=0.01))
    assert any("--tolerance only applies with --previous" in w for w in warned.warnings)
    assert not any("tolerance" in w for w in rebalance(README, RebalanceRequest(**ARGS)).warnings)
    with pytest.raises(InputError, match=r"must be in \[0, 1\)"):
        rebalance(README, RebalanceRequest(**ARGS, tolerance=2.0))
