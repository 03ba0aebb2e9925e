"""dsctl storage size: the sheet's sizing model against the published 3FS figures."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.profiles.loader import ProfileStore
from dsctl.storage.api import parse_rate, parse_size
from dsctl.storage.sizing import SizingInputs, auto_targets_per_ssd, size
from dsctl.units import GIB, PIB, TIB


@pytest.fixture(scope="module")
def ref():  # type: ignore[no-untyped-def]
    return ProfileStore().storage("3fs-reference")


def test_peak_read_of_the_180_node_test_at_the_published_efficiency(ref) -> None:  # type: ignore[no-untyped-def]
    # README: 180 nodes (2x200 Gb/s, 16x14 TiB), 500+ clients at 200 Gb/s: ~6.6 TiB/s aggregate read.
    result = size(ref, SizingInputs(num_nodes=180, num_clients=500, client_nic_bytes_per_s=200e9 / 8,
                                    efficiency=0.81))
    assert result.read.bound_by == "storage_nic"
    assert result.read.bytes_per_s / TIB == pytest.approx(6.63, abs=0.01)
    assert result.read.bytes_per_s / (6.6 * TIB) == pytest.approx(1.0045, abs=0.002)  # +0.45 %
    # line-rate ceiling of the sheet: 180 x 400 Gb/s = 8.19 TiB/s
    assert result.read.candidates["storage_nic"] / 0.81 / TIB == pytest.approx(8.19, abs=0.01)
    assert result.per_node_read_bytes_per_s / GIB == pytest.approx(37.7, abs=0.1)  # sheet: ~37.5 GiB/s


def test_raw_and_usable_capacity_of_the_180_node_cluster(ref) -> None:  # type: ignore[no-untyped-def]
    result = size(ref, SizingInputs(num_nodes=180, fill=1.0))
    assert result.raw_capacity_bytes / TIB == 40_320  # 39.4 PiB
    assert result.usable_capacity_bytes / PIB == pytest.approx(13.1, abs=0.05)  # sheet: ~13.1 PiB at r = 3
    assert size(ref, SizingInputs(num_nodes=180)).usable_capacity_bytes == pytest.approx(
        result.usable_capacity_bytes * 0.95)


def test_one_kvcache_client_reaches_40_gib_per_s_at_86_percent(ref) -> None:  # type: ignore[no-untyped-def]
    result = size(ref, SizingInputs(num_nodes=10, num_clients=1, client_nic_bytes_per_s=400e9 / 8, efficiency=0.86))
    assert result.read.bound_by == "client_nic"
    assert result.read.bytes_per_s / GIB == pytest.approx(40.0, abs=0.1)


def test_write_ceiling_divides_storage_side_by_replication(ref) -> None:  # type: ignore[no-untyped-def]
    result = size(ref, SizingInputs(num_nodes=10, replication=3, efficiency=1.0))
    nic = 10 * 2 * 200e9 / 8
    ssd = 10 * 16 * 5e9
    assert result.write.bytes_per_s == pytest.approx(min(nic, ssd) / 3)
    assert result.write.bound_by == "storage_nic"


def test_degraded_read_loses_one_over_v_minus_one(ref) -> None:  # type: ignore[no-untyped-def]
    result = size(ref, SizingInputs(num_nodes=5))
    assert result.degraded_read.bytes_per_s == pytest.approx(result.read.bytes_per_s / (1 + 1 / 4))


def test_targets_met_and_missed_with_smallest_node_counts(ref) -> None:  # type: ignore[no-untyped-def]
    ok = size(ref, SizingInputs(num_nodes=180, dataset_bytes=10 * PIB))
    assert ok.exit_code == 0 and ok.targets[0].met
    small = size(ref, SizingInputs(num_nodes=20, dataset_bytes=10 * PIB, checkpoint_bytes=20 * TIB,
                                   checkpoint_budget_s=60))
    assert small.exit_code == 1
    dataset, ckpt = small.targets
    assert not dataset.met and dataset.min_nodes == 145
    again = size(ref, SizingInputs(num_nodes=dataset.min_nodes, dataset_bytes=10 * PIB))
    assert again.exit_code == 0
    # 20 nodes write 20 nodes x 50 GB/s x 0.81 / 3 = 270 GB/s: 20 TiB take 81.4 s > 60 s; 28 nodes suffice
    assert not ckpt.met and ckpt.available == pytest.approx(81.45, abs=0.01) and ckpt.min_nodes == 28
    assert size(ref, SizingInputs(num_nodes=28, checkpoint_bytes=20 * TIB, checkpoint_budget_s=60)).exit_code == 0


def test_read_target_needs_enough_nodes(ref) -> None:  # type: ignore[no-untyped-def]
    result = size(ref, SizingInputs(num_nodes=10, num_clients=100, client_nic_bytes_per_s=400e9 / 8,
                                    read_per_client_bytes_per_s=20 * GIB))
    (target,) = result.targets
    assert not target.met and result.exit_code == 1
    assert target.min_nodes == 54  # 2000 GiB/s / 37.7 GiB/s per node
    assert size(ref, SizingInputs(num_nodes=54, num_clients=100, client_nic_bytes_per_s=400e9 / 8,
                                  read_per_client_bytes_per_s=20 * GIB)).exit_code == 0


def test_auto_targets_per_ssd_matches_the_upstream_table() -> None:
    cases = {(5, 3): 3, (6, 2): 5, (7, 3): 3, (9, 3): 4, (10, 3): 6, (12, 3): 6, (15, 3): 7, (25, 3): 12,
             (50, 3): 27, (180, 3): 90}
    for (v, k), r in cases.items():
        assert auto_targets_per_ssd(v, k) == r
    assert auto_targets_per_ssd(5, 3, minimum=6) == 6


@pytest.mark.parametrize(("inputs", "field"), [
    (SizingInputs(num_nodes=0), "nodes"),
    (SizingInputs(num_nodes=5, replication=1), "replication"),
    (SizingInputs(num_nodes=2, replication=3), "replication"),
    (SizingInputs(num_nodes=5, fill=1.5), "fill"),
    (SizingInputs(num_nodes=5, efficiency=0), "efficiency"),
    (SizingInputs(num_nodes=5, checkpoint_bytes=1e12), "checkpoint"),
    (SizingInputs(num_nodes=5, read_per_client_bytes_per_s=1e9), "read_per_client"),
    (SizingInputs(num_nodes=5, num_clients=1, client_nic_bytes_per_s=50e9, read_per_client_bytes_per_s=49e9),
     "read_per_client"),
    (SizingInputs(num_nodes=5, num_clients=1, client_nic_bytes_per_s=50e9, checkpoint_bytes=1e15,
                  checkpoint_budget_s=1), "checkpoint_time_s"),
])
def test_bad_inputs_name_the_option(ref, inputs: SizingInputs, field: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as err:
        size(ref, inputs)
    assert err.value.field == field and err.value.message.startswith(f"{field} ") and "--" not in err.value.message


@pytest.mark.parametrize(("text", "value"), [("20 GiB/s", 20 * GIB), ("25 GB/s", 25e9), ("200 Gb/s", 25e9),
                                             ("1.5TiB/s", 1.5 * TIB), ("400Gbps", 50e9)])
def test_parse_rate(text: str, value: float) -> None:
    assert parse_rate(text, "--x") == pytest.approx(value)


@settings(max_examples=40)
@given(st.text(max_size=12))
def test_parsers_reject_junk_with_the_option_name(text: str) -> None:
    for parser in (parse_rate, parse_size):
        try:
            value = parser(text, "--opt")
        except InputError as exc:
            assert "--opt" in exc.message
        else:
            assert value > 0


def test_parse_size_overflow_is_an_input_error() -> None:
    with pytest.raises(InputError, match="--dataset"):
        parse_size("1e400 PiB", "--dataset")
