"""dsctl storage size|chains|check-chains."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import typer

from dsctl.commands._common import FormatOpt, profile_store, read_text_input, show
from dsctl.errors import InputError
from dsctl.output.formats import OutputFormat
from dsctl.profiles import DEFAULT_NODE_PROFILE, DEFAULT_STORAGE

#: request field (named by dsctl.storage's errors) -> the option that sets it
FIELD_OPTIONS: dict[str, str] = {
    **{name: "--" + name.replace("_", "-") for name in (
        "nodes", "ssds_per_node", "replication", "chain_table_id", "targets_per_ssd", "target_id_prefix",
        "chain_id_prefix", "first_node_id", "chunk_size", "clients", "fill", "efficiency", "checkpoint",
        "checkpoint_model", "checkpoint_time_s", "read", "write", "recovery_rate", "read_per_client", "dataset",
        "add_nodes", "used", "target_bytes")},
    "expand source": "--from",  # dsctl.storage.expand's chain-table folder
    "out": "--out-dir",
}

app = typer.Typer(
    name="storage",
    help="3FS cluster sizing, chain-table generation and chain-table checks.",
    no_args_is_help=True,
)


@app.command("size")
def size_cmd(
    nodes: Annotated[int | None, typer.Option("--nodes", "-N", help="Storage nodes (3FS storage services); "
                                              "leave out to get the smallest cluster meeting every need.")] = None,
    storage: Annotated[str, typer.Option("--storage", help="Storage node profile.")] = DEFAULT_STORAGE,
    replication: Annotated[int, typer.Option("--replication", "-k", help="Replicas per chain.")] = 3,
    targets_per_ssd: Annotated[int | None, typer.Option("--targets-per-ssd", help="Targets per SSD (default: "
                                                        "smallest r that lets every node pair share a chain).")] = None,
    clients: Annotated[int | None, typer.Option("--clients", help="Client nodes reading/writing 3FS.")] = None,
    client_node: Annotated[str, typer.Option("--client-node", help="Node profile of the clients (storage NICs).")]
    = DEFAULT_NODE_PROFILE,
    client_nic: Annotated[str | None, typer.Option("--client-nic", help="Override the client's storage NIC "
                                                   "bandwidth, e.g. '200 Gb/s'.")] = None,
    fill: Annotated[float, typer.Option("--fill", help="Usable fraction of each SSD (3FS recycles at 0.95).")]
    = 0.95,
    efficiency: Annotated[float, typer.Option("--efficiency", help="Achieved fraction of line rate (0.81 in the "
                                              "published 180-node read test).")] = 0.81,
    dataset: Annotated[str | None, typer.Option("--dataset", help="Data to store, e.g. '5 PiB'.")] = None,
    checkpoint: Annotated[str | None, typer.Option("--checkpoint", help="Checkpoint size, e.g. '10 TiB'.")] = None,
    checkpoint_seconds: Annotated[float | None, typer.Option("--checkpoint-time-s", help="Time budget to write "
                                                             "one checkpoint.")] = None,
    read_per_client: Annotated[str | None, typer.Option("--read-per-client", help="Read rate each client needs, "
                                                        "e.g. '20 GiB/s'.")] = None,
    read: Annotated[str | None, typer.Option("--read", help="Aggregate read the cluster must serve, e.g. "
                                             "'2 TiB/s'.")] = None,
    write: Annotated[str | None, typer.Option("--write", help="Aggregate client write it must absorb.")] = None,
    checkpoint_model: Annotated[str | None, typer.Option("--checkpoint-model", help="Size the checkpoint as a full "
                                                         "training checkpoint of this model profile (weights and "
                                                         "optimizer states), e.g. deepseek-v3.")] = None,
    recovery_rate: Annotated[str | None, typer.Option("--recovery-rate", help="Rebuild rate after losing a node "
                                                      "(default: one node's write ingest).")] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Usable capacity, read/write ceilings, degraded read and checkpoint time of a 3FS cluster; without
    --nodes, the smallest cluster meeting every need. Also the cost of losing one node."""
    from dsctl.storage import api
    from dsctl.storage.sizing import SizingInputs, client_nic_bytes_per_s, plan

    store = profile_store()
    profile = store.storage(storage)
    node = store.node(client_node)
    client_bytes = (api.parse_rate(client_nic, "--client-nic") if client_nic is not None
                    else client_nic_bytes_per_s(node))
    model = store.model(checkpoint_model) if checkpoint_model is not None else None

    def rate(text: str | None, option: str) -> float | None:
        return api.parse_rate(text, option) if text is not None else None

    inputs = SizingInputs(
        num_nodes=nodes if nodes is not None else 0, replication=replication, targets_per_ssd=targets_per_ssd,
        num_clients=clients,
        client_nic_bytes_per_s=client_bytes, fill=fill, efficiency=efficiency,
        dataset_bytes=api.parse_size(dataset, "--dataset") if dataset is not None else None,
        checkpoint_bytes=api.parse_size(checkpoint, "--checkpoint") if checkpoint is not None else None,
        checkpoint_budget_s=checkpoint_seconds,
        read_per_client_bytes_per_s=rate(read_per_client, "--read-per-client"),
        read_bytes_per_s=rate(read, "--read"), write_bytes_per_s=rate(write, "--write"),
        recovery_bytes_per_s=rate(recovery_rate, "--recovery-rate"),
    )
    show(plan(profile, inputs, smallest=nodes is None, checkpoint_model=model), fmt, "storage size")


@app.command("chains")
def chains_cmd(
    nodes: Annotated[int, typer.Option("--nodes", "-N", help="Storage nodes (services) in the table.")],
    ssds_per_node: Annotated[int, typer.Option("--ssds-per-node", "-d", help="SSDs (disk indexes) per node.")],
    replication: Annotated[int, typer.Option("--replication", "-k", help="Targets per chain.")] = 3,
    targets_per_ssd: Annotated[int | None, typer.Option("--targets-per-ssd", help="Targets per SSD "
                                                        "(default: picked for balance).")] = None,
    chain_table_id: Annotated[int, typer.Option("--chain-table-id", help="Chain table id for the upload "
                                                "commands.")] = 1,
    first_node_id: Annotated[int, typer.Option("--first-node-id", help="3FS node id of the first storage "
                                               "node; the others follow.")] = 10001,
    target_id_prefix: Annotated[int, typer.Option("--target-id-prefix", help="Leading digits of target ids.")] = 1,
    chain_id_prefix: Annotated[int, typer.Option("--chain-id-prefix", help="Leading digits of chain ids.")] = 9,
    chunk_size: Annotated[list[str] | None, typer.Option("--chunk-size", help="Chunk size(s) for create-target, "
                                                         "e.g. 1MB (repeatable).")] = None,
    no_rotate: Annotated[bool, typer.Option("--no-rotate", help="Keep members in ascending node order, as the "
                                            "upstream tool does.")] = False,
    out: Annotated[Path | None, typer.Option("--out-dir", help="Write the four 3FS files and pair_share.svg "
                                             "here.")] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Generate a balanced 3FS chain table (chains, chain table, create/remove-target commands)."""
    from dsctl.output.progress import progress
    from dsctl.storage import api
    from dsctl.storage.chaintable import IdScheme, check_chunk_sizes

    sizes = check_chunk_sizes(chunk_size or [])
    scheme = IdScheme(first_node_id=first_node_id, target_prefix=target_id_prefix, chain_prefix=chain_id_prefix)
    with progress(f"chain table for {nodes} nodes", fmt, total=1) as report:
        result = api.generate_chains(nodes, ssds_per_node, replication, targets_per_ssd, chain_table_id, scheme,
                                     sizes, rotate=not no_rotate, with_svg=out is not None, report=report)
    result = _write_out(result, out)
    show(result, fmt, "storage chains")


@app.command("check-chains")
def check_cmd(
    source: Annotated[Path, typer.Argument(help="Folder with the four chain-table files (generated_chains.csv, "
                                           "generated_chain_table.csv, create_target_cmd.txt, "
                                           "remove_target_cmd.txt), or generated_chains.csv alone.")],
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Check chain-table files against each other and measure balance; exit 1 naming the file and line of
    every problem."""
    from dsctl.storage.crosscheck import CHAINS, FILE_NAMES, check_files

    texts: dict[str, str | None] = {}
    if source.is_dir():
        if not (source / CHAINS).exists():
            raise InputError(f"SOURCE {source} has no {CHAINS}")
        for name in FILE_NAMES:
            texts[name] = _read_table(source / name, "SOURCE") if (source / name).exists() else None
    else:
        texts[CHAINS] = _read_table(source, "SOURCE")
    show(check_files(texts, str(source)), fmt, "storage check-chains")


def _read_table(path: Path, option: str) -> str:
    """One chain-table file, read up to the larger of the input limit and ``MAX_TABLE_FILE_BYTES`` (the files
    ``storage chains`` writes for 1,000 nodes exceed the default 64 MiB input limit: create_target_cmd.txt)."""
    from dsctl.inputs import LIMITS, read_text
    from dsctl.storage.expand import MAX_TABLE_FILE_BYTES

    return read_text(path, option, limit=max(LIMITS.max_input_bytes, MAX_TABLE_FILE_BYTES))


@app.command("expand")
def expand_cmd(
    source: Annotated[Path, typer.Option("--from", help="Folder with the current four chain-table files.")],
    add_nodes: Annotated[int, typer.Option("--add-nodes", help="Storage nodes (services) to add; their ids "
                                           "follow the highest current node id.")],
    out: Annotated[Path | None, typer.Option("--out-dir", help="Write the new table, the new chains alone and "
                                             "the migration runbook here.")] = None,
    target_bytes: Annotated[str | None, typer.Option("--target-bytes", help="Data in each current target, e.g. "
                                                     "'1.2 TiB' (default: SSD capacity x --used / targets per "
                                                     "SSD).")] = None,
    storage: Annotated[str, typer.Option("--storage", help="Storage node profile (SSD capacity).")]
    = DEFAULT_STORAGE,
    used: Annotated[float, typer.Option("--used", help="Fraction of each current SSD holding data.")] = 0.8,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Grow a chain table: a new balanced version over more nodes, as few target moves as balance allows,
    and the ordered in-chain replacements that get there."""
    from dsctl.output.progress import progress
    from dsctl.storage import api
    from dsctl.storage.crosscheck import FILE_NAMES
    from dsctl.storage.expand import expand

    if not source.is_dir():
        raise InputError(f"--from {source} is not a folder with the four chain-table files")
    texts = {name: _read_table(source / name, "--from") if (source / name).exists() else None
             for name in FILE_NAMES}
    if texts[FILE_NAMES[0]] is None:
        raise InputError(f"--from {source} has no {FILE_NAMES[0]}")
    profile = profile_store().storage(storage)
    size_bytes = api.parse_size(target_bytes, "--target-bytes") if target_bytes is not None else None
    with progress(f"expansion plan for {add_nodes} more nodes: replacements and new chains", fmt, total=1) as report:
        result = expand(texts, str(source), add_nodes, size_bytes, profile.ssd_capacity_bytes, used, report)
    result = _write_out(result, out)
    show(result, fmt, "storage expand")


@app.command("doctor")
def doctor_cmd(
    chains: Annotated[Path, typer.Option("--chains", help="Saved output of `admin_cli list-chains`.")],
    targets: Annotated[Path | None, typer.Option("--targets", help="Saved output of `admin_cli list-targets` "
                                                 "(nodes and disks of the targets).")] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Chains that lost redundancy, OFFLINE/LASTSRV targets and their nodes, nodes whose failure would make a
    chain unavailable now, and what to do; exit 1 when any chain lost redundancy."""
    from dsctl.storage.doctor import doctor

    chains_text = read_text_input(chains, "--chains")
    targets_text = read_text_input(targets, "--targets") if targets is not None else None
    show(doctor(chains_text, str(chains), targets_text, str(targets) if targets is not None else None), fmt,
         "storage doctor")


def _write_out(result: Any, out: Path | None) -> Any:
    """Write ``result.files_text`` into ``--out-dir`` (all or nothing) and record where; unchanged without --out-dir."""
    if out is None:
        return result
    from dsctl.output.files import write_files

    written = write_files(out, result.files_text)
    return dataclasses.replace(result, out_dir=str(out), files=[str(p) for p in written])
