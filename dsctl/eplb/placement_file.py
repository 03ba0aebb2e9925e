"""Reading placement files: dsctl's own (``rebalance --out``) and SGLang's ``--init-expert-location`` JSON.

The one reader for ``eplb simulate``, ``eplb rebalance --previous`` and ``topology simulate``. A dsctl file has
``phy2log`` [L][R] (and ``layout``); an SGLang file ``physical_to_logical_map`` [model layers][R], dense layers
included as trivial rows (slot s -> expert s mod E), which are dropped to match the statistics' MoE layers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from dsctl.eplb.checks import MAX_PLAN_SLOTS, MAX_SLOTS_PER_LAYER
from dsctl.eplb.placement import Placement, placement_from_phy2log
from dsctl.errors import InputError
from dsctl.names import shown
from dsctl.textjson import load_json


@dataclass(frozen=True)
class LoadedPlacement:
    """A placement read from a file, with whatever layout facts the file carried (None = unknown)."""

    placement: Placement
    source: str
    kind: str  # "dsctl" | "sglang"
    num_gpus: int | None = None
    num_nodes: int | None = None
    num_groups: int | None = None
    policy: str | None = None
    dropped_leading_layers: int = 0


#: largest expert id, GPU, node or group count read from a placement file (real models have hundreds; arrays
#: are sized from these, so the bound also bounds memory)
MAX_PLACEMENT_ID = 2**20 - 1


_NUMBER = re.compile(r"[0-9]+")


def _check_number_count(name: str, text: str) -> None:
    """Refuse a file of more than MAX_PLAN_SLOTS numbers before the JSON parser builds them (a 64 MiB file of
    small ids is ~30 million Python ints, ~1 GB)."""
    if len(text) <= 2 * MAX_PLAN_SLOTS:  # each number takes at least two characters with its separator
        return
    for count, _ in enumerate(_NUMBER.finditer(text), start=1):
        if count > MAX_PLAN_SLOTS:
            raise InputError(f"{name}: more than {MAX_PLAN_SLOTS:,} numbers; a placement holds at most "
                             f"{MAX_PLAN_SLOTS:,} slots over all layers")


def _keys(data: dict[str, Any]) -> str:
    """The keys of a JSON object for one error line: plain ones as they are, others quoted with escapes."""
    return ", ".join(sorted(k if k.isidentifier() else shown(k) for k in data))[:200] or "none"


def _int_table(name: str, key: str, value: Any) -> np.ndarray:
    if not isinstance(value, list) or not value or not all(isinstance(r, list) and r for r in value):
        raise InputError(f"{name}: \"{key}\" must be a non-empty 2-D list (layers x slots)")
    width = len(value[0])
    if width > MAX_SLOTS_PER_LAYER or width * len(value) > MAX_PLAN_SLOTS:
        raise InputError(f"{name}: \"{key}\" is {len(value):,} layers x {width:,} slots; at most "
                         f"{MAX_SLOTS_PER_LAYER:,} slots per layer and {MAX_PLAN_SLOTS:,} in all")
    for r, row in enumerate(value):
        if len(row) != width:
            raise InputError(f"{name}: \"{key}\" row {r} has {len(row)} slots but row 0 has {width}")
        for c, cell in enumerate(row):
            if isinstance(cell, bool) or not isinstance(cell, int) or not 0 <= cell <= MAX_PLACEMENT_ID:
                shown = repr(cell) if not isinstance(cell, int) or cell < 10**20 else f"{str(cell)[:20]}..."
                raise InputError(f"{name}: \"{key}\" row {r}, slot {c}: {shown} is not an expert id "
                                 f"(integer 0..{MAX_PLACEMENT_ID:,})")
    return np.asarray(value, dtype=np.int64)


def parse_placement(name: str, text: str, num_experts: int | None = None) -> LoadedPlacement:
    """Read a dsctl placement file (``phy2log`` ...) or an SGLang one (``physical_to_logical_map``).

    ``num_experts`` E (from the statistics) sets the expert count; otherwise max id + 1. Replica ranks follow
    slot order. Every expert 0..E-1 must appear at least once per layer.
    """
    _check_number_count(name, text)
    data = load_json(text, name)
    if not isinstance(data, dict):
        raise InputError(f"{name}: expected a JSON object with \"phy2log\" (dsctl) "
                         f"or \"physical_to_logical_map\" (SGLang)")
    raw_layout = data.get("layout")
    layout: dict[str, Any] = raw_layout if isinstance(raw_layout, dict) else {}
    if "phy2log" in data:
        kind, table = "dsctl", _int_table(name, "phy2log", data["phy2log"])
    elif "physical_to_logical_map" in data:
        kind, table = "sglang", _int_table(name, "physical_to_logical_map", data["physical_to_logical_map"])
    else:
        raise InputError(f"{name}: no \"phy2log\" or \"physical_to_logical_map\" key "
                         f"(keys: {_keys(data)})")
    experts = int(num_experts) if num_experts is not None else int(table.max()) + 1
    if int(table.max()) >= experts:
        r, c = (int(v) for v in np.argwhere(table >= experts)[0])
        raise InputError(f"{name}: layer {r}, slot {c} holds expert {int(table[r, c])}, but there are only "
                         f"{experts} experts (ids 0..{experts - 1})")
    placement = placement_from_phy2log(table, experts)
    missing = placement.logcnt == 0
    if missing.any():
        r, e = (int(v) for v in np.argwhere(missing)[0])
        raise InputError(f"{name}: layer {r} has no slot for expert {e}; every expert needs at least one replica")

    def _opt_int(key: str) -> int | None:
        value = layout.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_PLACEMENT_ID:
            return int(value)
        return None

    policy = layout.get("policy") if layout.get("policy") in ("hierarchical", "global") else None
    return LoadedPlacement(placement, name, kind, _opt_int("num_gpus"), _opt_int("num_nodes"),
                           _opt_int("num_groups"), policy)


def drop_trivial_leading_layers(loaded: LoadedPlacement, num_layers: int) -> LoadedPlacement:
    """Match a placement with extra leading layers (an SGLang file with dense layers) to ``num_layers`` MoE layers.

    The extra leading rows must be the trivial map (slot s -> expert s mod E); otherwise the counts must match.
    """
    phy2log = loaded.placement.phy2log
    extra = phy2log.shape[0] - num_layers
    if extra == 0:
        return loaded
    trivial = np.arange(phy2log.shape[1]) % loaded.placement.num_experts
    if extra < 0 or not np.all(phy2log[:extra] == trivial):
        raise InputError(f"{loaded.source}: placement has {phy2log.shape[0]} layers "
                         f"but the statistics have {num_layers}",
                         hint="both must describe the same MoE layers (leading dense layers are dropped only when "
                              "they hold the trivial map)")
    placement = placement_from_phy2log(phy2log[extra:], loaded.placement.num_experts)
    return LoadedPlacement(placement, loaded.source, loaded.kind, loaded.num_gpus, loaded.num_nodes,
                           loaded.num_groups, loaded.policy, extra)


def read_placement(name: str, text: str, num_layers: int, num_experts: int) -> LoadedPlacement:
    """The one reader of placement files, for ``simulate`` and ``rebalance --previous`` alike.

    Parses a dsctl or SGLang file (``parse_placement``) against the statistics' ``num_experts`` E and matches it to
    their ``num_layers`` L MoE layers: leading rows holding the trivial map (the dense layers of an SGLang file,
    e.g. 3 + 58 = 61 rows for DeepSeek-V3) are dropped; any other layer-count mismatch is an InputError.
    """
    return drop_trivial_leading_layers(parse_placement(name, text, num_experts), num_layers)


def placement_warnings(loaded: LoadedPlacement) -> tuple[str, ...]:
    """Warnings about how a placement file was read (dense layers dropped)."""
    if not loaded.dropped_leading_layers:
        return ()
    return (f"{loaded.source}: skipped {loaded.dropped_leading_layers} leading layers holding the trivial "
            f"map (dense layers of an SGLang file)",)
