"""Entry points of ``dsctl storage``: input parsing helpers and the chains / check-chains results."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from dsctl.errors import InputError
from dsctl.progress_count import Report, Stages
from dsctl.storage.balance import Balance, measure
from dsctl.storage.chaintable import MAX_CHAINS_PER_DISK, MAX_DISKS, IdScheme, check_ids, render_files
from dsctl.storage.choice import REDIRECT_LIMIT, choose_targets_per_ssd, fallback_targets_per_ssd
from dsctl.storage.crosscheck import CHAINS, CREATE, CheckResult, check_files
from dsctl.storage.graphics import pair_share_svg
from dsctl.storage.layout import build_layout, layout_cost_us
from dsctl.units import QuantityError, parse_bytes

MAX_CHAIN_NODES = 2_000
MAX_TARGETS_TOTAL = 2_000_000
#: estimated cost of measuring and rendering one chain (weighs the progress count's last stage only)
FILES_COST_US_PER_CHAIN = 4
#: ``[0-9]+(?:\.[0-9]+)?`` rather than ``[0-9]*\.?[0-9]+``: two digit runs that can split a long run every way
#: backtrack quadratically (16 s for 10,000 digits and a letter)
_RATE = re.compile(r"^\s*((?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][-+]?\d+)?)\s*([KMGT]?)(i?)([Bb])(?:/s|ps)\s*$")


def parse_size(text: str, option: str) -> float:
    """Bytes from ``"10 PiB"``, ``"2.5TB"``; InputError naming ``option`` otherwise (must be > 0, < 1 ZB)."""
    try:
        value = parse_bytes(text)
    except QuantityError as exc:
        raise InputError(f"{option} {text!r}: {exc}") from exc
    except OverflowError:
        raise InputError(f"{option} {text!r} must be less than 1 ZB") from None
    if not 0 < value < 1e21:
        raise InputError(f"{option} {text!r} must be more than 0 bytes and less than 1 ZB")
    return float(value)


def parse_rate(text: str, option: str) -> float:
    """Bytes per second from ``"20 GiB/s"``, ``"25 GB/s"`` or ``"200 Gb/s"`` (lower-case b = bits)."""
    match = _RATE.match(text)
    if not match:
        raise InputError(f"{option} {text!r} is not a rate; write it like '20 GiB/s', '25 GB/s' or '200 Gb/s'")
    number, prefix, binary, unit = match.groups()
    scale = (1024 if binary else 1000) ** " KMGT".index(prefix or " ")
    value = float(number) * scale / (8 if unit == "b" else 1)
    if not 0 < value < 1e18:
        raise InputError(f"{option} {text!r} must be positive and below 1 EB/s")
    return value


@dataclass(frozen=True)
class ChainsResult:
    """A generated chain table and its balance."""

    num_nodes: int
    ssds_per_node: int
    replication: int
    targets_per_ssd: int
    chains_per_disk: int
    chain_table_id: int
    first_node_id: int
    last_node_id: int
    method: str
    rotated: bool
    balance: Balance
    notes: list[str]
    upload: list[str]
    out_dir: str | None
    files: list[str]
    files_text: Mapping[str, str] = field(repr=False, metadata={"output": False})


def upload_steps(table_id: int) -> list[str]:
    """The deploy guide's upload sequence (admin_cli prefix left out), for the files written here."""
    return [
        f"init-cluster --mgmtd mgmtd_main.toml {table_id} 1048576 16   (once, before mgmtd starts)",
        "admin_cli ... < create_target_cmd.txt",
        '"upload-chains generated_chains.csv"  (add --set-preferred-target-order to keep the rotated order)',
        f'"upload-chain-table --desc dsctl {table_id} generated_chain_table.csv"',
        '"list-chains" and "list-chain-tables" to check',
    ]


def generate_chains(num_nodes: int, ssds_per_node: int, replication: int, targets_per_ssd: int | None,
                    chain_table_id: int, scheme: IdScheme, chunk_sizes: tuple[str, ...] = (),
                    rotate: bool = True, with_svg: bool = False, report: Report | None = None) -> ChainsResult:
    """Build, measure and render dsctl's chain table (see ``dsctl.storage.layout``). ``report(done, total)``
    counts the design search, the chains ordered, then the files rendered (weighed by estimated cost; a rebuild
    with more targets per SSD adds a stage before the files) and ends at the total."""
    if not 2 <= num_nodes <= MAX_CHAIN_NODES:
        raise InputError(f"{num_nodes} must be 2..{MAX_CHAIN_NODES} (3FS chains need at least 2 storage "
                         "nodes for replication)", field="nodes")
    if not 1 <= ssds_per_node <= MAX_DISKS:  # checked before any float arithmetic (309 digits overflow a float)
        raise InputError(f"{str(ssds_per_node)[:40]} must be 1..{MAX_DISKS} (a target id has 3 digits "
                         "for the disk)", field="ssds_per_node")
    if not 2 <= replication <= num_nodes:
        raise InputError(f"{replication} must be 2..{{nodes}} ({num_nodes}): every replica of a chain "
                         "sits on a different node", field="replication", mentions=("nodes",))
    if not 1 <= chain_table_id <= 4_294_967_295:
        raise InputError(f"{chain_table_id} must be 1..4294967295 (0 is invalid in 3FS)", field="chain_table_id")
    chosen_note = None
    if targets_per_ssd is None:
        r, chosen_note = choose_targets_per_ssd(num_nodes, replication, ssds_per_node)
    else:
        r = targets_per_ssd
    if r < 1:
        raise InputError(f"{r} must be at least 1", field="targets_per_ssd")
    b = num_nodes * r // replication
    if b < 1:
        raise InputError(f"{num_nodes} x {{targets_per_ssd}} {r} is fewer than one chain of "
                         f"{replication}; raise {{targets_per_ssd}}", field="nodes", mentions=("targets_per_ssd",))
    check_ids(scheme, num_nodes, ssds_per_node, r, b)
    if num_nodes * r * ssds_per_node > MAX_TARGETS_TOTAL:
        raise InputError(f"{num_nodes * r * ssds_per_node:,} targets is more than dsctl writes "
                         f"({MAX_TARGETS_TOTAL:,}); lower {{targets_per_ssd}} or {{ssds_per_node}}",
                         mentions=("targets_per_ssd", "ssds_per_node"))
    chains = ssds_per_node * (num_nodes * r // replication)
    stages = Stages(report, [layout_cost_us(num_nodes, ssds_per_node, replication, r, rotate),
                             chains * FILES_COST_US_PER_CHAIN])
    layout, method = build_layout(num_nodes, ssds_per_node, replication, r, rotate=rotate, report=stages.part(0))
    balance = measure(layout.nodes, layout.disk, num_nodes)
    notes = [chosen_note] if chosen_note else []
    if targets_per_ssd is None and balance.redirect.max_over_ideal > REDIRECT_LIMIT:
        for r2 in fallback_targets_per_ssd(num_nodes, replication, ssds_per_node, r):
            b2 = num_nodes * r2 // replication
            if b2 > MAX_CHAINS_PER_DISK or num_nodes * r2 * ssds_per_node > MAX_TARGETS_TOTAL:
                break
            again = stages.add(layout_cost_us(num_nodes, ssds_per_node, replication, r2, rotate), before=-1)
            layout2, method2 = build_layout(num_nodes, ssds_per_node, replication, r2, rotate=rotate,
                                            report=stages.part(again))
            balance2 = measure(layout2.nodes, layout2.disk, num_nodes)
            if balance2.redirect.max_over_ideal < balance.redirect.max_over_ideal:
                notes.append(f"targets per SSD {r2}: the table built with {r} reached "
                             f"{balance.redirect.max_over_ideal:.2f}x the even share after a node failure, {r2} "
                             f"gives {balance2.redirect.max_over_ideal:.2f}x")
                r, b, layout, method, balance = r2, b2, layout2, method2, balance2
            if balance.redirect.max_over_ideal <= REDIRECT_LIMIT:
                break
        check_ids(scheme, num_nodes, ssds_per_node, r, b)
    needed = -(-(num_nodes - 1) // (replication - 1))
    if r < needed:
        notes.append(f"{r} targets per SSD cannot give every node pair a shared chain on one disk index (needs "
                     f"{needed}" + ("; a target id allows at most 99)" if needed > 99 else ")"))
    if (num_nodes * r) % replication:
        notes.append(f"{(num_nodes * r) % replication} target slot(s) per disk index unused: nodes x targets-per-ssd "
                     f"is not a multiple of replication {replication}")
    if balance.redirect.max_over_ideal > REDIRECT_LIMIT:
        notes.append(f"node-failure read redirect is {balance.redirect.max_over_ideal:.2f}x the even share (above "
                     f"{REDIRECT_LIMIT}x)" + ("; leave out --targets-per-ssd to let dsctl pick one that balances"
                                               if targets_per_ssd is not None else ""))
    files = render_files(layout, scheme, chunk_sizes)
    stages.part(-1)(1, 2)
    if with_svg:
        files["pair_share.svg"] = pair_share_svg(balance.pair_share_matrix, scheme.first_node_id,
                                                 f"{num_nodes} nodes x {ssds_per_node} SSDs, replication "
                                                 f"{replication}, {r} targets per SSD")
    stages.finish()
    return ChainsResult(num_nodes, ssds_per_node, replication, r, b, chain_table_id, scheme.first_node_id,
                        scheme.first_node_id + num_nodes - 1, method, rotate, balance,
                        notes, upload_steps(chain_table_id), None, [], files)


def check_chains(chains_text: str, where: str, create_text: str | None = None) -> CheckResult:
    """Check one ``generated_chains.csv`` text (and its create-target commands when given)."""
    texts: dict[str, str | None] = {CHAINS: chains_text}
    if create_text is not None:
        texts[CREATE] = create_text
    return check_files(texts, where)
