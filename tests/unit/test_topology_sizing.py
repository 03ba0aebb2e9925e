"""Table 3 of the ISCA '25 paper from the radix formulas, and the fitted cost model."""

from __future__ import annotations

import pytest

from dsctl.errors import InputError
from dsctl.topology.sizing import (
    compare_topologies,
    dragonfly_params,
    ft2_counts,
    ft3_counts,
    slimfly_params,
)

SWITCH_USD, LINK_USD = 82045, 544
TABLE3 = {  # name: (endpoints, switches, links, cost M$, cost per endpoint k$)
    "FT2": (2048, 96, 2048, 9, 4.39),
    "MPFT": (16384, 768, 16384, 72, 4.39),
    "FT3": (65536, 5120, 131072, 491, 7.5),
    "SF": (32928, 1568, 32928, 146, 4.4),
    "DF": (261632, 16352, 384272, 1522, 5.8),
}


@pytest.fixture(scope="module")
def rows() -> dict[str, object]:
    return {r.name: r for r in compare_topologies(64, SWITCH_USD, LINK_USD)}


@pytest.mark.parametrize("name", list(TABLE3))
def test_radix_64_counts_equal_table_3(rows: dict, name: str) -> None:
    endpoints, switches, links, _, _ = TABLE3[name]
    row = rows[name]
    assert (row.endpoints, row.switches, row.links) == (endpoints, switches, links)


@pytest.mark.parametrize("name", ["FT2", "MPFT", "FT3"])
def test_fat_tree_costs_reproduce_the_published_figures(rows: dict, name: str) -> None:
    _, _, _, musd, kusd = TABLE3[name]
    assert round(rows[name].cost_usd / 1e6) == musd
    assert round(rows[name].cost_per_endpoint_usd / 1e3, 2) == pytest.approx(kusd)


def test_fitted_costs_to_the_cent() -> None:
    rows = {r.name: r for r in compare_topologies(64, SWITCH_USD, LINK_USD)}
    assert rows["FT2"].cost_usd == 96 * 82045 + 2048 * 544 == 8_990_432
    assert rows["MPFT"].cost_usd == pytest.approx(71.92e6, rel=1e-3)
    assert rows["FT3"].cost_usd == pytest.approx(491.37e6, rel=1e-4)


@pytest.mark.parametrize("name", ["SF", "DF"])
def test_slim_fly_and_dragonfly_within_3_percent(rows: dict, name: str) -> None:
    _, _, _, musd, kusd = TABLE3[name]
    assert rows[name].cost_usd / 1e6 == pytest.approx(musd, rel=0.03)
    assert rows[name].cost_per_endpoint_usd / 1e3 == pytest.approx(kusd, rel=0.03)
    assert round(rows["SF"].cost_usd / 1e6, 1) == 146.6
    assert round(rows["DF"].cost_usd / 1e6) == 1551


def test_order_and_keys() -> None:
    result = compare_topologies(64, SWITCH_USD, LINK_USD)
    assert [r.name for r in result] == ["FT2", "MPFT", "FT3", "SF", "DF"]
    assert set(result.to_data()[0]) == {"name", "endpoints", "switches", "links", "cost_usd",
                                        "cost_per_endpoint_usd"}


def test_closed_forms_at_other_radices() -> None:
    assert ft2_counts(128) == (8192, 192, 8192)
    assert ft3_counts(32) == (8192, 1280, 16384)
    assert slimfly_params(64) == {"q": 28, "delta": 0, "network_radix": 42, "endpoints_per_switch": 21}
    # q = 5 (delta = 1): k' = 7, p = 4, 11 ports
    assert slimfly_params(12)["q"] == 5
    assert slimfly_params(8)["q"] == 3  # q = 4 would need 6 + 3 = 9 ports
    assert dragonfly_params(64) == {"endpoints_per_switch": 16, "switches_per_group": 32,
                                    "global_ports_per_switch": 16, "groups": 511}


@pytest.mark.parametrize("radix", [8, 16, 32, 36, 48, 128, 256])
def test_every_design_fits_its_radix(radix: int) -> None:
    sf = slimfly_params(radix)
    assert sf["network_radix"] + sf["endpoints_per_switch"] <= radix
    df = dragonfly_params(radix)
    assert df["endpoints_per_switch"] + df["switches_per_group"] - 1 + df["global_ports_per_switch"] <= radix
    rows = {r.name: r for r in compare_topologies(radix, 1.0, 1.0)}
    assert rows["MPFT"].endpoints == 8 * rows["FT2"].endpoints
    assert all(r.endpoints > 0 and r.cost_per_endpoint_usd > 0 for r in rows.values())


@pytest.mark.parametrize("radix", [63, 7, 6, 2, 0, -4, 2048])
def test_unbuildable_radix_is_rejected(radix: int) -> None:
    with pytest.raises(InputError, match=rf"^radix ({radix} is|must be)") as err:
        compare_topologies(radix, SWITCH_USD, LINK_USD)
    assert err.value.field == "radix"


def test_negative_costs_are_rejected() -> None:
    with pytest.raises(InputError, match=r"^switch_cost and link_cost must be finite and >= 0 \(US dollars\)$"):
        compare_topologies(64, -1.0, LINK_USD)
