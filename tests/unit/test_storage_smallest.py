"""storage size without --nodes: the smallest cluster meeting every need, and the cost of losing one node."""

from __future__ import annotations

import pytest

from dsctl.errors import InputError
from dsctl.profiles.loader import ProfileStore
from dsctl.profiles.schema import StorageProfile
from dsctl.storage.sizing import SizingInputs, plan, size
from dsctl.units import PIB, TIB


@pytest.fixture(scope="module")
def ref() -> StorageProfile:
    return ProfileStore().storage("3fs-reference")


def _smallest(ref: StorageProfile, **needs: float) -> int:
    result = plan(ref, SizingInputs(num_nodes=0, **needs), smallest=True)  # type: ignore[arg-type]
    assert result.exit_code == 0
    # minimal: one node fewer misses a need
    assert size(ref, SizingInputs(num_nodes=result.num_nodes - 1, **needs)).exit_code == 1  # type: ignore[arg-type]
    return result.num_nodes


def test_dataset_alone(ref: StorageProfile) -> None:
    # usable per node = 16 x 14 TiB x 0.95 / 3 = 70.9 TiB -> 10 PiB needs 145 nodes
    assert _smallest(ref, dataset_bytes=10 * PIB) == 145


def test_read_and_write_needs(ref: StorageProfile) -> None:
    # per node: read min(16 x 7 GB/s, 2 x 200 Gb/s) x 0.81 = 40.5 GB/s; write that / 3 = 13.5 GB/s
    assert _smallest(ref, read_bytes_per_s=1e12) == 25                   # 1 TB/s / 40.5 GB/s = 24.7
    assert _smallest(ref, write_bytes_per_s=1e12) == 75                  # 1 TB/s / 13.5 GB/s = 74.1
    assert _smallest(ref, dataset_bytes=1 * PIB, read_bytes_per_s=1e12) == 25


def test_deepseek_v3_training_checkpoint_with_optimizer_states(ref: StorageProfile) -> None:
    model = ProfileStore().model("deepseek-v3")
    result = plan(ref, SizingInputs(num_nodes=0, checkpoint_budget_s=60), smallest=True, checkpoint_model=model)
    target = next(t for t in result.targets if t.name == "checkpoint_seconds")
    assert target.met and result.exit_code == 0
    assert any("x 8 bytes" in n and "5.46 TB" in n for n in result.notes)  # 682.6B params x (4 + 2 + 2) bytes
    assert result.num_nodes == 7  # 5.46 TB / 60 s = 91 GB/s of client writes / 13.5 GB/s per node
    assert result.smallest_for == "checkpoint_seconds"


def test_cost_of_losing_one_node(ref: StorageProfile) -> None:
    result = size(ref, SizingInputs(num_nodes=180, dataset_bytes=10 * PIB, recovery_bytes_per_s=10e9))
    loss = result.one_node_loss
    assert loss is not None and result.num_ssds == 180 * 16
    assert loss.raw_capacity_bytes == 16 * 14 * TIB
    assert loss.usable_capacity_bytes == pytest.approx(result.usable_capacity_bytes / 180)
    assert loss.data_bytes == pytest.approx(10 * PIB * 3 / 180)         # the replicas it held
    assert loss.rebuild_s == pytest.approx(loss.data_bytes / 10e9)
    assert loss.read_loss_fraction == pytest.approx(1 - 1 / (1 + 1 / 179))
    default = size(ref, SizingInputs(num_nodes=180)).one_node_loss
    assert default is not None and default.recovery_bytes_per_s == pytest.approx(40.5e9)


def test_no_need_and_impossible_needs_are_input_errors(ref: StorageProfile) -> None:
    with pytest.raises(InputError, match=r"^give nodes, or at least one need \(dataset, read, write,"):
        plan(ref, SizingInputs(num_nodes=0), smallest=True)
    with pytest.raises(InputError, match=r"^read 931\.3 GiB/s cannot be met by any number of storage nodes"):
        plan(ref, SizingInputs(num_nodes=0, num_clients=2, client_nic_bytes_per_s=25e9, read_bytes_per_s=1e12),
             smallest=True)
    with pytest.raises(InputError, match=r"^checkpoint and checkpoint_model both set the checkpoint size; give one$"):
        plan(ref, SizingInputs(num_nodes=0, checkpoint_bytes=1e12, checkpoint_budget_s=5), smallest=True,
             checkpoint_model=ProfileStore().model("deepseek-v3"))
