"""Option rules that moved from the trace, topology simulate and health fleet commands into their domain packages
name fields, and each command group's table spells them as the flags users type."""

from __future__ import annotations

import importlib
from collections.abc import Callable

import pytest

from dsctl.commands._common import option_for
from dsctl.errors import InputError
from dsctl.health.fleet import MAX_SLURM_INTERVAL_S, check_fleet_options, slurm_check_interval
from dsctl.topology.sim import check_options
from dsctl.trace.request import OverlapRequest, check_stragglers, check_window

CASES: list[tuple[str, Callable[[], object], str]] = [
    ("trace overlap", lambda: OverlapRequest(step=3, all_steps=True).check(),
     "--step and --all-steps exclude each other; give one"),
    ("trace overlap", lambda: OverlapRequest(slurm=True).check(),
     "--slurm and -w/--nodelist go together: --slurm -w node[001-016]"),
    ("trace overlap", lambda: OverlapRequest(nodes="n[1-2]").check(),
     "--slurm and -w/--nodelist go together: --slurm -w node[001-016]"),
    ("trace overlap", lambda: OverlapRequest(slurm=True, nodes="n1", explain_classes=True).check(),
     "--slurm reports the overlap table only; drop --svg, --explain-classes and --all-steps"),
    ("trace stragglers", lambda: check_stragglers("start", False, False), "--align 'start': expected ends or none"),
    ("trace stragglers", lambda: check_stragglers("ends", True, False),
     "--plan needs --ranks (the rank map says which node and GPU each rank ran on)"),
    ("trace timeline", lambda: check_window(5.0, 5.0), "--from-us 5 --to-us 5: --to-us must be after --from-us"),
    ("topology simulate", lambda: check_options("all-reduce", "m", True, None, None, True, False),
     "--eplb-plan and --stats go together (a placement and the statistics it was made from)"),
    ("topology simulate", lambda: check_options("ep-dispatch", "llama", False, None, None, False, False),
     "--model llama has no MoE layers; ep-dispatch/ep-combine need one"),
    ("topology simulate", lambda: check_options("all-reduce", "m", True, 0, None, False, False),
     "--nodes must be at least 1, got 0"),
    # checked before the command lists that many node ids (99,999,999,999 was a MemoryError, exit 4)
    ("topology simulate", lambda: check_options("all-reduce", "m", True, 99_999_999_999, None, False, False),
     "--nodes must be at most 4,194,304 (a plan's largest), got 99999999999"),
    ("topology simulate", lambda: check_options("all-reduce", "m", True, None, 0, False, False),
     "--ep must be at least 1 GPU, got 0"),
    ("health fleet", lambda: check_fleet_options(120.0, 0.0, None, False),
     "--timeout-s and --launch-timeout-s must be seconds in (0, 86400]"),
    ("health fleet", lambda: check_fleet_options(120.0, 60.0, 5.0, True),
     "--interval-s does not apply to --from-record"),
    ("health fleet", lambda: check_fleet_options(120.0, 60.0, 120.0, False),
     "--interval-s 120 must be positive and below --timeout-s 120"),
    ("health check", lambda: slurm_check_interval(MAX_SLURM_INTERVAL_S + 1),
     "--interval-s 31 with --slurm-healthcheck: at most 30 s"),
]


@pytest.mark.parametrize(("command", "call", "shown"), CASES)
def test_a_moved_rule_names_fields_the_command_spells(command: str, call: Callable[[], object], shown: str) -> None:
    importlib.import_module(f"dsctl.commands.{command.split()[0]}")  # option_for reads the loaded group's table
    with pytest.raises(InputError) as caught:
        call()
    exc = caught.value
    assert exc.field is not None and not exc.text.startswith("-")
    exc.name_options(lambda field: option_for(field, command))
    assert exc.message == shown


def test_valid_options_pass() -> None:
    OverlapRequest(step=3).check()
    OverlapRequest(slurm=True, nodes="n[1-2]", step=1).check()
    check_stragglers("none", True, True)
    check_window(1.0, 2.0)
    check_window(None, 2.0)
    check_options("ep-dispatch", "deepseek-v3", True, 2, 16, True, True)
    check_fleet_options(120.0, 60.0, 5.0, False)
    assert slurm_check_interval(None) == 10.0 and slurm_check_interval(MAX_SLURM_INTERVAL_S) == MAX_SLURM_INTERVAL_S
