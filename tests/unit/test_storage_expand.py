"""storage expand: a balanced new version, moved data at the lower bound, a safe migration order."""

from __future__ import annotations

from collections import defaultdict

import pytest

from dsctl.errors import InputError
from dsctl.storage.api import generate_chains
from dsctl.storage.chaintable import IdScheme
from dsctl.storage.choice import REDIRECT_LIMIT
from dsctl.storage.crosscheck import CHAINS, CREATE, REMOVE, TABLE, check_files
from dsctl.storage.expand import ExpandResult, expand

FOUR = (CHAINS, TABLE, CREATE, REMOVE)


def _grow(v: int, n: int, disks: int, k: int = 3) -> tuple[dict[str, str], ExpandResult]:
    old = generate_chains(v, disks, k, None, 1, IdScheme()).files_text
    return old, expand({name: old[name] for name in FOUR}, "old", n, 2e12, 0.0, 0.0)


def _chains(text: str) -> dict[int, list[int]]:
    return {int(r.split(",")[0]): [int(t) for t in r.split(",")[1:]] for r in text.splitlines()[1:]}


def assert_sound(old: dict[str, str], result: ExpandResult, k: int) -> None:
    """Balanced, moved data within 1.1x of the bound, check-chains passes, and replaying the migration
    from the old chains gives the new ones without a chain ever below k-1 members or two steps in flight."""
    assert result.exit_code == 0 and result.check_problems == []
    assert result.balance.redirect.max_over_ideal <= REDIRECT_LIMIT
    assert min(result.balance.pair_share_total) >= 1
    assert result.moved_bytes <= 1.1 * result.lower_bound_bytes
    assert result.moved_bytes == result.replacements * 2e12
    assert check_files({name: result.files_text[name] for name in FOUR}, "new").exit_code == 0
    chains = _chains(old[CHAINS])
    final = _chains(result.files_text[CHAINS])
    in_wave: dict[int, set[int]] = defaultdict(set)
    last_wave = 0
    for step in result.steps:
        assert step.wave >= last_wave  # waves run in order
        last_wave = step.wave
        assert step.chain_id not in in_wave[step.wave]  # one member of a chain in flight at a time
        in_wave[step.wave].add(step.chain_id)
        members = chains[step.chain_id]
        assert step.old_target in members and step.new_target not in members
        members.append(step.new_target)           # update-chain --mode add: k + 1 members, k serving
        assert len(members) - 1 >= k - 1
        members.remove(step.old_target)           # offline + remove the old member: back to k
        assert len(members) == k
    new_chains = _chains(result.files_text["new_chains.csv"])
    replayed = {**chains, **new_chains}  # built once: rebuilding it per chain is quadratic (86,400 chains at 180)
    assert replayed.keys() == final.keys()
    for cid, members in final.items():
        assert sorted(members) == sorted(replayed[cid])


def test_expand_25_to_30_nodes() -> None:
    old, result = _grow(25, 5, 16)
    assert (result.old_nodes, result.new_nodes, result.first_new_node_id) == (25, 30, 10026)
    assert result.replacements == 5 * 16 * 10  # each new node takes its even share: 100 * 3 / 30 per disk
    assert result.moved_over_bound == 1.0
    assert result.targets_kept == 1600 * 3 - 800
    assert_sound(old, result, 3)


@pytest.mark.parametrize(("v", "n", "disks", "k"), [(25, 5, 4, 3), (25, 5, 16, 2), (30, 6, 8, 5), (20, 2, 16, 3)])
def test_expand_other_shapes(v: int, n: int, disks: int, k: int) -> None:
    old, result = _grow(v, n, disks, k)
    assert_sound(old, result, k)


def test_runbook_orders_add_before_remove() -> None:
    _, result = _grow(9, 2, 2)
    lines = [line for line in result.files_text["migration_steps.txt"].splitlines() if not line.startswith("#")]
    first = result.steps[0]
    assert lines[:5] == [
        f"create-target --node-id {first.new_node} --disk-index {first.disk_index} --target-id {first.new_target} "
        f"--chain-id {first.chain_id}  --use-new-chunk-engine",
        f"update-chain --mode add {first.chain_id} {first.new_target}",
        f"offline-target --node-id {first.old_node} --target-id {first.old_target}",
        f"update-chain --mode remove {first.chain_id} {first.old_target}",
        f"remove-target --node-id {first.old_node} --target-id {first.old_target}"]


def test_broken_source_is_refused_naming_the_problem() -> None:
    old = generate_chains(9, 2, 3, None, 1, IdScheme()).files_text
    texts: dict[str, str | None] = {name: old[name] for name in FOUR}
    texts[TABLE] = "ChainId\n"
    with pytest.raises(InputError, match=r"generated_chain_table\.csv"):
        expand(texts, "old", 2, None, 1e12, 0.5)
    with pytest.raises(InputError, match=r"^add_nodes 0 must be 1\.\.") as caught:
        expand({name: old[name] for name in FOUR}, "old", 0, None, 1e12, 0.5)
    assert caught.value.field == "add_nodes"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0])
def test_a_target_size_that_is_no_size_is_refused_naming_it(bad: float) -> None:
    old = generate_chains(9, 2, 3, None, 1, IdScheme()).files_text
    with pytest.raises(InputError, match=r"must be a finite size of at least 0 bytes") as caught:
        expand({name: old[name] for name in FOUR}, "old", 2, bad, 1e12, 0.5)
    assert caught.value.field == "target_bytes"


@pytest.mark.slow
def test_expand_180_to_200_nodes() -> None:
    """The published 180-node cluster (16 SSDs) grown by 20 nodes."""
    old, result = _grow(180, 20, 16)
    assert result.new_targets_per_ssd == 90  # old nodes keep ids 1..90, so 90 is the most the id digits allow
    assert result.replacements == 20 * 16 * 81  # 5400 * 3 / 200 = 81 old-chain members per new node and disk
    assert result.moved_over_bound == 1.0
    assert_sound(old, result, 3)


def test_node_limit_bounds_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    from dsctl.storage import expand as module

    monkeypatch.setattr(module, "MAX_NODES_AFTER", 10)
    old = generate_chains(9, 1, 3, None, 1, IdScheme()).files_text
    with pytest.raises(InputError, match="more than 10") as caught:
        expand({name: old[name] for name in FOUR}, "old", 2, None, 1e12, 0.5)
    caught.value.name_options({"source": "--from", "add_nodes": "--add-nodes"}.get)
    assert caught.value.message.startswith("--from old has 9 nodes; with --add-nodes 2 that is more than 10")


def test_progress_counts_every_replacement_and_new_chain() -> None:
    """Issue 30: ``report(done, total)`` climbs to its total, which is the replacements plus the new chains."""
    old = generate_chains(25, 4, 3, None, 1, IdScheme()).files_text
    seen: list[tuple[float, float]] = []
    result = expand({name: old[name] for name in FOUR}, "old", 5, 2e12, 0.0, 0.0,
                    lambda done, total: seen.append((done, total)))
    assert {total for _, total in seen} == {result.replacements + result.chains_added}
    done = [d for d, _ in seen]
    assert done[0] == 0 and done[-1] == result.replacements + result.chains_added
    assert done == sorted(done) and len(set(done)) > 4 + 2  # rounds of every disk index, not only the end


def test_a_table_of_one_target_chains_is_refused() -> None:
    """check-chains passes chains of one target; expand crashed on them (ValueError from an empty list of pairs,
    exit 4; before issue 32 the plan never ended)."""
    ids = [(900100000 + c, 101000000000 + c * 100_000 + 101) for c in range(1, 5)]  # node 10000 + c, disk 0
    texts: dict[str, str | None] = {
        CHAINS: "ChainId,TargetId\n" + "".join(f"{c},{t}\n" for c, t in ids),
        TABLE: "ChainId\n" + "".join(f"{c}\n" for c, _ in ids),
        CREATE: "".join(f"create-target --node-id {10000 + i} --disk-index 0 --target-id {t} --chain-id {c}  "
                        "--use-new-chunk-engine\n" for i, (c, t) in enumerate(ids, 1)),
        REMOVE: "".join(f"offline-target --node-id {10000 + i} --target-id {t}\n"
                        f"remove-target --node-id {10000 + i} --target-id {t}\n" for i, (_, t) in enumerate(ids, 1))}
    assert check_files(texts, "t").problems == []
    with pytest.raises(InputError, match=r"^source t: chains of 1 target; expand plans for chains of 2 or more"):
        expand(texts, "t", 1, 1e12, 0.0, 0.0)


def test_the_pair_share_matrix_holds_no_pair_long_arrays() -> None:
    """expand counts its pair-shares with design.pair_share_matrix: its work arrays stay chain-long. Issue 32's
    single bincount held every targets x (k - 1) pair entry at once, twice (~19 GB for a k = 1,000 table that
    passes the input limits); it fails this bound."""
    import tracemalloc

    import numpy as np

    from dsctl.storage.design import pair_share_matrix

    rng = np.random.default_rng(5)
    v, k, b = 300, 40, 1_000
    blocks = np.stack([rng.permutation(v)[:k] for _ in range(b)])  # 40,000 targets, 1.56M pair entries
    want = np.zeros((v, v), dtype=np.int64)
    for row in blocks[:50].tolist():
        for a in row:
            for z in row:
                want[a, z] += a != z
    assert np.array_equal(pair_share_matrix(blocks[:50], v), want)
    tracemalloc.start()
    try:
        pair_share_matrix(blocks, v)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    all_pairs_bytes = b * k * (k - 1) * 8  # 12.5 MB
    assert peak < 3 * v * v * 8 + 8 * b * 8 < all_pairs_bytes
