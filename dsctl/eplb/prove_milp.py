"""``--prove-with``: which prover runs (the search of dsctl.eplb.exact, the HiGHS MILP of dsctl.eplb.milp, or both)
and the MILP's part of ``rebalance --prove``.

``search`` (default): the branch and bound, no dependency, 300,000 nodes a run. ``milp``: HiGHS on every layer
within ``--prove-time-s`` (default 60 s) a run; needs ``pip install 'dsctl[milp]'``. ``auto``: the search, then the
MILP on the layers it left unproved when HiGHS is installed.
"""

from __future__ import annotations

import numpy as np

from dsctl.eplb import milp
from dsctl.eplb.bounds import MAX_PARTITIONS, num_partitions
from dsctl.eplb.checks import EplbLayout
from dsctl.eplb.exact import MAX_PROVE_NODES, ExactResult
from dsctl.eplb.placement import Placement, gpu_loads, placement_from_phy2log
from dsctl.errors import EnvironmentMissing, InputError, one_of

PROVERS = ("search", "milp", "auto")


def choose_method(prove_with: str, prove_time_s: float | None) -> str:
    """``search``, ``milp`` or ``auto`` after checking the options; EnvironmentMissing for ``milp`` without HiGHS."""
    if prove_with not in PROVERS:
        raise InputError(f"{prove_with!r} is not valid: choose {one_of(PROVERS)}", field="prove_with")
    if prove_time_s is not None:
        if prove_with == "search":
            raise InputError("bounds the MILP only: give {prove_with} milp or auto", field="prove_time_s",
                             mentions=("prove_with",),
                             hint=f"the search is bounded by its budget of {MAX_PROVE_NODES:,} search nodes per run")
        if not 0.0 < prove_time_s <= milp.MAX_PROVE_TIME_S:
            raise InputError(f"{prove_time_s} must be in (0, {milp.MAX_PROVE_TIME_S:g}] seconds", field="prove_time_s")
    if prove_with == "milp" and not milp.available():
        raise EnvironmentMissing("milp needs the HiGHS solver, which is not installed", field="prove_with",
                                 hint="pip install 'dsctl[milp]' (the highspy package), or use --prove-with search")
    if prove_with == "auto":
        return "auto" if milp.available() else "search"
    return prove_with


def check_milp_layout(layout: EplbLayout) -> None:
    """The hierarchical MILP enumerates group -> node partitions: refuse layouts with too many (before the work)."""
    if layout.policy == "hierarchical":
        count = num_partitions(layout.num_groups_eff, layout.num_groups_eff // layout.num_nodes_eff)
        if count > MAX_PARTITIONS:
            raise InputError(f"milp: {count:,} group -> node partitions exceed {MAX_PARTITIONS:,}", field="prove_with",
                             hint="use --policy global, or fewer groups per node")


def prove_with_milp(weight: np.ndarray, placement: Placement, layout: EplbLayout, time_s: float | None,
                    rows: np.ndarray | None = None) -> tuple[Placement, ExactResult]:
    """The MILP on ``rows`` (default all layers) of ``weight`` [L, E] from ``placement``, within ``time_s`` (None:
    ``DEFAULT_PROVE_TIME_S``) over all of them; a better plan replaces its layer. The result's ``lower`` holds each
    layer's MILP lower bound (its dual bound where time ran out)."""
    check_milp_layout(layout)
    current = gpu_loads(weight, placement.phy2log, placement.logcnt, layout.num_gpus).max(axis=1)
    rows = np.arange(weight.shape[0]) if rows is None else rows
    got = milp.solve(weight[rows], layout.num_replicas, layout.num_gpus, layout.num_groups_eff,
                     layout.num_nodes_eff, start=current[rows],
                     time_s=milp.DEFAULT_PROVE_TIME_S if time_s is None else time_s)
    optimum, lower = current.copy(), np.zeros_like(current)
    proved = np.zeros(len(current), dtype=bool)
    improved = np.zeros(len(current), dtype=bool)
    phy2log = placement.phy2log.copy()
    optimum[rows], lower[rows], proved[rows], improved[rows] = got.optimum, got.lower, got.proved, got.improved
    phy2log[rows[got.improved]] = got.phy2log[got.improved]
    if improved.any():
        placement = placement_from_phy2log(phy2log, layout.num_experts)
    return placement, ExactResult(optimum, proved, phy2log, improved, lower)


def finish_with_milp(weight: np.ndarray, placement: Placement, layout: EplbLayout, searched: ExactResult,
                     time_s: float | None) -> tuple[Placement, ExactResult]:
    """``auto``: the MILP on the layers the search left unproved; the two results merged per layer."""
    rest = np.flatnonzero(~searched.proved)
    if not rest.size:
        return placement, searched
    placement, got = prove_with_milp(weight, placement, layout, time_s, rest)
    lower = np.where(searched.proved, searched.optimum, got.lower if got.lower is not None else 0.0)
    optimum = np.where(searched.proved, searched.optimum, np.minimum(searched.optimum, got.optimum))
    return placement, ExactResult(optimum, searched.proved | got.proved, placement.phy2log,
                                  searched.improved | got.improved, lower)
