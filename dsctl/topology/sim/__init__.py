"""Flow-level simulation of a workload on a planned fabric (``dsctl topology simulate``), see docs/topology.md.

Modules, from the entry point down: ``api`` (options and jobs in, :class:`SimResult` out), ``solve`` (the two-stage
max-min solve and the result types), ``traffic`` (flow sets: all-to-all, permutation, ring collectives), ``ep``
(expert-parallel dispatch/combine traffic), ``ep_time`` (seconds of one MoE layer's EP exchange, for the step-time
model), ``routing`` (static / ECMP / adaptive next hops and paths), ``maxmin``
(max-min fair rates and the fluid finish-time simulation), ``graph`` (the link graph of a plan), ``svg`` (the plane
picture). The names below are the public surface used by commands, output and benchmarks.
"""

from dsctl.topology.sim.api import (
    MAX_JOBS,
    WORKLOADS,
    EpModel,
    SimRequest,
    Workload,
    check_options,
    parse_jobs,
    plan_facts,
    run,
    transfer_time,
)
from dsctl.topology.sim.ep_time import EpExchange, ep_exchange_seconds
from dsctl.topology.sim.solve import JobResult, LinkUse, PlaneResult, RateSpread, SimResult

__all__ = [
    "MAX_JOBS",
    "WORKLOADS",
    "EpExchange",
    "EpModel",
    "JobResult",
    "LinkUse",
    "PlaneResult",
    "RateSpread",
    "SimRequest",
    "SimResult",
    "Workload",
    "check_options",
    "ep_exchange_seconds",
    "parse_jobs",
    "plan_facts",
    "run",
    "transfer_time",
]
