"""Pipeline schedule simulator for ``dsctl launch schedule``: 1F1B, ZB1P, DualPipe and DualPipeV.

``simulate(schedule, num_stages, num_micro_batches, costs, comm_model)`` generates each rank's op order (for
DualPipe and DualPipeV: the order DeepSeek's reference code executes), times it with an event simulation and
compares the bubble with the DualPipe README formulas. ``timeline_svg(result)`` draws the timeline.
"""

from dsctl.launch.schedule.api import COMM_MODELS, ScheduleResult, schedule_ops, simulate
from dsctl.launch.schedule.costs import OpCosts
from dsctl.launch.schedule.ops import Op, parse_op
from dsctl.launch.schedule.params import SCHEDULES, check_schedule_params
from dsctl.launch.schedule.svg import MAX_SVG_OPS, check_svg_size, min_ops, timeline_svg
from dsctl.launch.schedule.timed import TimedOp, TimedSchedule, simulate_stage_costs

__all__ = [
    "COMM_MODELS",
    "MAX_SVG_OPS",
    "SCHEDULES",
    "Op",
    "OpCosts",
    "ScheduleResult",
    "TimedOp",
    "TimedSchedule",
    "check_schedule_params",
    "check_svg_size",
    "min_ops",
    "parse_op",
    "schedule_ops",
    "simulate",
    "simulate_stage_costs",
    "timeline_svg",
]
