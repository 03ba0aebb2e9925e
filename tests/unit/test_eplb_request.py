"""RebalanceRequest checks its own option rules and names the field (never the option) in every refusal."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import numpy as np
import pytest

from dsctl.commands import eplb as eplb_commands
from dsctl.eplb.move_cost import MoveFabric
from dsctl.eplb.placement import placement_from_phy2log
from dsctl.eplb.request import DEFAULT_TOLERANCE, MIGRATION_FIELDS, RebalanceRequest
from dsctl.errors import InputError

PREVIOUS = placement_from_phy2log(np.arange(8).reshape(1, 8) % 4, 4)
FABRIC = MoveFabric("{}", "plan.json", 200e9)


@pytest.mark.parametrize(("given", "field", "text"), [
    ({"algorithm": "fast"}, "algorithm", "'fast' is not valid: choose reference or balanced"),
    ({"policy": "best"}, "policy", "'best' is not valid: choose auto, hierarchical or global"),
    ({"bytes_per_param": 0.0}, "bytes_per_param", "0.0 must be a positive number of bytes (1 = FP8, 2 = BF16)"),
    ({"bytes_per_param": float("nan")}, "bytes_per_param", "nan must be a positive number of bytes"),
    ({"tolerance": 1.0}, "tolerance", "1.0 must be in [0, 1) (a fraction: 0.01 = 1% of the balancedness)"),
    ({"tolerance": float("nan")}, "tolerance", "nan must be in [0, 1)"),
    ({"max_moves": -1}, "max_moves", "-1 must be >= 0 (replicas moved over all layers)"),
    ({"max_move_bytes": -5}, "max_move_bytes", "-5 must be >= 0"),
    ({"min_gain": 1.0}, "min_gain", "1.0 must be in [0, 1) (a fraction of the max load per step)"),
    ({"step_time_s": 0.0}, "step_time_s", "0.0 must be a positive number of seconds"),
    ({"node_profile": "h100-hgx"}, "node_profile", "only applies with a planned fabric (its NVLink bandwidth)"),
    ({"max_moves": 3}, "max_moves", "3 only applies with a previous placement (migration-aware planning)"),
    ({"tolerance": 0.05}, "tolerance", "0.05 only applies with a previous placement (migration-aware planning)"),
    ({"fabric": FABRIC}, "fabric", "only applies with a previous placement (migration-aware planning)"),
    ({"previous": PREVIOUS, "step_time_s": 0.1}, "step_time_s",
     "only applies with a planned fabric (the fabric the moves are timed on)"),
])
def test_each_rule_refuses_naming_its_field(given: dict[str, Any], field: str, text: str) -> None:
    with pytest.raises(InputError) as err:
        RebalanceRequest(**given)
    assert err.value.field == field and err.value.text.startswith(text)
    assert err.value.message == f"{field} {err.value.text}"  # no command layer: the field's own name leads
    assert "--" not in err.value.message


def test_the_rules_accept_what_they_allow() -> None:
    assert RebalanceRequest().accepted_tolerance == DEFAULT_TOLERANCE
    assert RebalanceRequest(tolerance=DEFAULT_TOLERANCE).warnings == (
        "--tolerance only applies with --previous; ignored",)
    full = RebalanceRequest(previous=PREVIOUS, tolerance=0.0, max_moves=0, max_move_bytes=0, min_gain=0.0,
                            fabric=FABRIC, node_profile="h100-hgx", step_time_s=0.5)
    assert full.warnings == () and full.accepted_tolerance == 0.0 and full.layout_missing is True
    assert RebalanceRequest(replicas=16, gpus=8, nodes=2).layout_missing is False


def test_every_option_field_has_its_flag_in_the_command_table() -> None:
    """The one table in dsctl/commands/eplb.py spells every field a user sets by an option, with a real option."""
    not_options = {"model", "sources", "expert_bytes", "num_dense_layers", "node_profile"}  # model: the common table
    table = eplb_commands.FIELD_OPTIONS
    assert {f.name for f in fields(RebalanceRequest)} - not_options <= set(table)
    assert set(MIGRATION_FIELDS) <= set(table)
    import typer.main

    group = typer.main.get_group(eplb_commands.app)
    flags = {opt for command in group.commands.values() for p in command.params for opt in p.opts}
    for field, spelled in table.items():
        assert set(spelled.split("/")) <= flags, (field, spelled)
