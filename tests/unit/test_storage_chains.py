"""dsctl storage chains: designs, balance statistics, the upstream id mapping and file formats."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsctl.errors import InputError
from dsctl.storage.api import check_chains, generate_chains
from dsctl.storage.balance import measure
from dsctl.storage.chaintable import UINT32_MAX, IdScheme, chain_id, check_ids, render_files, target_ids
from dsctl.storage.design import build_design, pair_share_matrix, sum_squares_lower_bound
from dsctl.storage.graphics import pair_share_svg
from dsctl.storage.layout import ascending_layout, build_layout

DATA = Path(__file__).resolve().parents[1] / "data" / "storage"


def _hist(blocks: np.ndarray, v: int) -> dict[int, int]:
    share = pair_share_matrix(blocks, v)
    keys, counts = np.unique(share[np.triu_indices(v, 1)], return_counts=True)
    return dict(zip(keys.tolist(), counts.tolist(), strict=True))


# (v, k, r) -> the best pair-share histogram integers allow (upstream's in the comment, sheet section 5)
EXACT = {
    (5, 2, 6): {1: 5, 2: 5},      # upstream 1:5, 2:5
    (5, 3, 3): {1: 5, 2: 5},      # upstream 1:5, 2:5
    (5, 3, 6): {3: 10},           # deploy-guide example, upstream 3:10
    (6, 2, 5): {1: 15},
    (6, 3, 3): {1: 12, 2: 3},     # upstream 0:1, 1:10, 2:4
    (7, 3, 3): {1: 21},           # Fano plane
    (9, 3, 4): {1: 36},           # STS(9)
    (10, 3, 6): {1: 30, 2: 15},   # upstream 0:6, 1:18, 2:21
    (10, 3, 9): {2: 45},
    (12, 3, 6): {1: 60, 2: 6},    # upstream 0:13, 1:34, 2:19
    (15, 3, 7): {1: 105},         # STS(15); upstream 0:30, 1:45, 2:30
    (25, 3, 12): {1: 300},        # STS(25); upstream 0:83, 1:134, 2:83
    (50, 3, 27): {1: 1100, 2: 125},
}


@pytest.mark.parametrize(("v", "k", "r"), list(EXACT))
def test_designs_reach_the_most_even_pair_share(v: int, k: int, r: int) -> None:
    design = build_design(v, k, r)
    assert design.blocks.shape == (v * r // k, k)
    assert np.bincount(design.blocks.ravel(), minlength=v).tolist() == [r] * v
    assert _hist(design.blocks, v) == EXACT[(v, k, r)]
    share = pair_share_matrix(design.blocks, v)
    assert int((np.triu(share, 1) ** 2).sum()) == sum_squares_lower_bound(v, len(design.blocks), k)


def test_180_nodes_is_near_balanced_per_disk_and_over_all_disks() -> None:
    layout, _ = build_layout(180, 16, 3, 90)
    b = measure(layout.nodes, layout.disk, 180)
    assert b.num_chains == 86_400 and b.num_targets == 259_200
    assert set(b.pair_share_disk0) <= {0, 1, 2} and b.pair_share_disk0[1] > 15_000
    assert b.redirect.ideal == pytest.approx(8.04, abs=0.01)
    assert b.redirect.max <= 10 and b.redirect.min >= 6.5  # upstream-style cannot run here at all
    assert b.head.max - b.head.min <= 4 and b.tail.max - b.tail.min <= 4


def _upstream_style(v: int, k: int, r: int, disks: int) -> np.ndarray:
    design = build_design(v, k, r)
    return ascending_layout([design.blocks] * disks, v, k).nodes


@pytest.mark.parametrize(("v", "k", "r", "redirect", "sync"), [
    (5, 3, 6, (24, 24, 24), (48, 0, 24)),    # deploy-guide example
    (7, 3, 3, (8, 8, 8), (16, 0, 8)),        # Fano plane
    (9, 3, 4, (8, 8, 8), (16, 0, 8)),        # STS(9)
    (6, 2, 5, (16, 16, 16), (16, 16, 16)),
    (10, 3, 9, (10, 10, 10), (20, 0, 10)),
])
def test_measures_reproduce_the_sheet_for_ascending_order(v: int, k: int, r: int, redirect: tuple[int, ...],
                                                           sync: tuple[int, ...]) -> None:
    """Same design, same ascending member order as the upstream tool -> the sheet's section-5 numbers."""
    nodes = _upstream_style(v, k, r, 16 if (v, r) != (10, 9) else 10)
    disk = np.repeat(np.arange(16 if (v, r) != (10, 9) else 10), v * r // k)
    b = measure(nodes, disk, v)
    assert (b.redirect.max, b.redirect.min, b.redirect.ideal) == redirect
    assert (b.sync_source.max, b.sync_source.min, b.sync_source.ideal) == sync


@pytest.mark.parametrize(("v", "k", "r"), [(5, 3, 6), (7, 3, 3), (9, 3, 4), (6, 2, 5), (25, 3, 12)])
def test_rotation_balances_resync_head_and_tail(v: int, k: int, r: int) -> None:
    layout, _ = build_layout(v, 16, k, r)
    b = measure(layout.nodes, layout.disk, v)
    ideal = 16 * r / (v - 1)
    assert b.sync_source.min >= ideal - 1.5 and b.sync_source.max <= ideal + 1.5
    assert b.head.max - b.head.min <= 2 and b.tail.max - b.tail.min <= 2


@pytest.mark.parametrize(("disks", "chains"), [(1, 10), (999, 10), (500, 99_999)])
def test_uint32_advice_names_a_prefix_that_fits(disks: int, chains: int) -> None:
    # the advised prefix must itself fit: with many disk indexes 42 overflows too
    with pytest.raises(InputError, match=r"^chain_id_prefix 43 gives chain id ") as info:
        check_ids(IdScheme(chain_prefix=43), 5, disks, 6, chains)
    advised = int(info.value.message.split("use a prefix of ")[1].split()[0])
    assert chain_id(advised, disks - 1, chains) <= UINT32_MAX
    assert chain_id(advised + 1, disks - 1, chains) > UINT32_MAX


def test_id_examples_of_the_sheet() -> None:
    scheme = IdScheme(first_node_id=10001, target_prefix=1, chain_prefix=9)
    assert chain_id(scheme.chain_prefix, 0, 1) == 900100001
    assert chain_id(scheme.chain_prefix, 15, 10) == 901600010
    layout = ascending_layout([np.array([[0, 1]])], 2, 2)
    assert target_ids(layout, scheme).tolist() == [[101000100101, 101000200101]]


def test_files_are_byte_exact_for_a_hand_derived_incidence_matrix() -> None:
    """v=3, k=2, r=2, 2 disks; incidence chain1={1,2}, chain2={1,3}, chain3={2,3} (upstream 1-based)."""
    blocks = np.array([[0, 1], [0, 2], [1, 2]])
    layout = ascending_layout([blocks, blocks], 3, 2)
    files = render_files(layout, IdScheme(10001, 1, 9))
    folder = DATA / "tiny_v3_k2_r2_d2"
    for name, text in files.items():
        assert text.encode() == (folder / name).read_bytes(), name


def test_chunk_sizes_go_into_create_target() -> None:
    layout = ascending_layout([np.array([[0, 1]])], 2, 2)
    text = render_files(layout, IdScheme(), ("1MB", "4MB"))["create_target_cmd.txt"]
    assert text.splitlines()[0] == ("create-target --node-id 10001 --disk-index 0 --target-id 101000100101 "
                                    "--chain-id 900100001 --chunk-size 1MB 4MB --use-new-chunk-engine")


@pytest.mark.parametrize("size", ["\u0661MB", "1\uff10MB", "\u00b9MB", "1 MB", "-1MB", "1mb"])
def test_a_chunk_size_admin_cli_cannot_read_is_refused(size: str) -> None:
    """'\u0661MB' (an Arabic-Indic 1) and '1\uff10MB' (a fullwidth 0) matched \\d and were written into
    create_target_cmd.txt as they came."""
    from dsctl.storage.chaintable import check_chunk_sizes

    with pytest.raises(InputError, match="is not an admin_cli size"):
        check_chunk_sizes(["1MB", size])
    assert check_chunk_sizes(["1MB", "512K", "64"]) == ("1MB", "512K", "64")


@settings(max_examples=25)
@given(v=st.integers(2, 24), k=st.integers(2, 4), r=st.integers(1, 12), disks=st.integers(1, 4))
def test_generated_tables_keep_the_invariants(v: int, k: int, r: int, disks: int) -> None:
    if k > v or v * r < k:
        return
    result = generate_chains(v, disks, k, r, 1, IdScheme())
    rows = [line.split(",") for line in result.files_text["generated_chains.csv"].splitlines()]
    assert rows[0] == ["ChainId"] + ["TargetId"] * k
    body = rows[1:]
    assert len(body) == disks * (v * r // k)
    assert all(len(row) == k + 1 for row in body)
    chain_ids = [int(row[0]) for row in body]
    assert chain_ids == sorted(chain_ids) and len(set(chain_ids)) == len(chain_ids)
    targets = [int(t) for row in body for t in row[1:]]
    assert len(set(targets)) == len(targets)                         # every target once
    for row in body:
        nodes = [(int(t) // 100_000) % 1_000_000 for t in row[1:]]
        assert len(set(nodes)) == k                                   # members on distinct nodes
        assert {(int(t) // 100) % 1000 for t in row[1:]} == {(int(row[0]) // 100_000) % 1000}  # one disk index
    per_node = np.bincount([(t // 100_000) % 1_000_000 - 10001 for t in targets], minlength=v)
    assert per_node.max() - per_node.min() <= disks                   # fair share of targets
    creates = result.files_text["create_target_cmd.txt"].splitlines()
    assert len(creates) == len(targets)
    b = result.balance
    if v * r % k == 0 and v * r // k >= v:                            # positions rotated: heads spread out
        assert b.head.max - b.head.min <= max(2, disks)


def test_check_chains_reports_balance_and_problems() -> None:
    folder = DATA / "tiny_v3_k2_r2_d2"
    text = (folder / "generated_chains.csv").read_text()
    ok = check_chains(text, "x.csv", (folder / "create_target_cmd.txt").read_text())
    assert ok.exit_code == 0 and ok.num_nodes == 3 and ok.balance is not None
    assert ok.balance.pair_share_disk0 == {1: 3}
    assert ok.balance.tail.max == 4 and ok.balance.tail.min == 0  # ascending order: node 10001 never tails
    same_node = text.replace("900100001,101000100101,101000200101", "900100001,101000100101,101000100199")
    bad = check_chains(same_node, "x.csv")
    assert bad.exit_code == 1 and "two targets on node 10001" in bad.problems[0].problem
    short = text.replace("900100001,101000100101,101000200101", "900100001,101000100101")
    assert check_chains(short, "x.csv").exit_code == 1


@pytest.mark.parametrize("text", ["", "Chain,TargetId\n1,2\n", "ChainId,TargetId\n1,x\n", "ChainId,TargetId\n"])
def test_check_chains_reports_malformed_csv_with_its_line(text: str) -> None:
    result = check_chains(text, "x.csv")
    assert result.exit_code == 1 and result.problems[0].where.startswith("generated_chains.csv line ")


@pytest.mark.parametrize(("args", "field"), [
    ((1, 16, 3, None), "nodes"),
    ((5, 16, 1, None), "replication"),
    ((5, 16, 6, None), "replication"),
    ((5, 0, 3, None), "ssds_per_node"),
    ((5, 16, 3, 100), "targets_per_ssd"),
    ((5, 1000, 3, 3), "ssds_per_node"),
])
def test_bad_chain_inputs_name_the_option(args: tuple[int, int, int, int | None], field: str) -> None:
    with pytest.raises(InputError) as err:
        generate_chains(*args, 1, IdScheme())
    assert err.value.field == field and err.value.message.startswith(f"{field} ") and "--" not in err.value.message


def test_chain_prefix_overflowing_uint32_is_refused() -> None:
    with pytest.raises(InputError, match=r"^chain_id_prefix 43 gives chain id 4301600005 above the uint32 maximum"):
        generate_chains(5, 16, 3, 3, 1, IdScheme(chain_prefix=43))
    generate_chains(5, 16, 3, 3, 1, IdScheme(chain_prefix=42))


def test_pair_share_svg_is_well_formed() -> None:
    result = generate_chains(12, 4, 3, 6, 1, IdScheme(), with_svg=True)
    root = ElementTree.fromstring(result.files_text["pair_share.svg"])
    assert root.tag.endswith("svg")
    assert len(root.findall(".//{http://www.w3.org/2000/svg}rect")) >= 12 * 12


def test_notes_for_capped_or_partial_tables() -> None:
    partial = generate_chains(8, 2, 3, 2, 1, IdScheme())
    assert any("unused" in n for n in partial.notes)
    assert any("cannot give every node pair" in n for n in partial.notes)
    assert generate_chains(7, 2, 3, 3, 1, IdScheme()).notes == []


def test_all_disk_cyclic_path_evens_totals_when_one_disk_cannot() -> None:
    """r(k-1) < v-1: each disk has pair-shares 0/1, the totals over disks stay within one of each other."""
    layout, method = build_layout(64, 16, 3, 6)
    assert method == "cyclic (all disks)"
    b = measure(layout.nodes, layout.disk, 64)
    assert set(b.pair_share_disk0) <= {0, 1, 2}
    assert max(b.pair_share_total) - min(b.pair_share_total) <= 2


def test_large_pair_share_svg_is_drawn_in_node_groups() -> None:
    share = np.full((401, 401), 3, dtype=np.int64)
    np.fill_diagonal(share, 0)
    svg = pair_share_svg(share, 10001, "test")
    root = ElementTree.fromstring(svg)
    assert "cell = 3 nodes" in svg and "10401" in svg and "min 3, max 3" in svg
    assert len(root.findall(".//{http://www.w3.org/2000/svg}rect")) < 180 * 180
