"""dsctl storage size|chains|check-chains."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from dsctl.commands._common import FormatOpt, profile_store, read_text_input, show
from dsctl.errors import InputError
from dsctl.output.formats import OutputFormat

app = typer.Typer(
    name="storage",
    help="3FS cluster sizing, chain-table generation and chain-table checks.",
    no_args_is_help=True,
)


@app.command("size")
def size_cmd(
    nodes: Annotated[int, typer.Option("--nodes", "-n", help="Storage nodes (3FS storage services).")],
    storage: Annotated[str, typer.Option("--storage", help="Storage node profile.")] = "3fs-reference",
    replication: Annotated[int, typer.Option("--replication", "-k", help="Replicas per chain.")] = 3,
    targets_per_ssd: Annotated[int | None, typer.Option("--targets-per-ssd", help="Targets per SSD (default: "
                                                        "smallest r that lets every node pair share a chain).")] = None,
    clients: Annotated[int | None, typer.Option("--clients", help="Client nodes reading/writing 3FS.")] = None,
    client_node: Annotated[str, typer.Option("--client-node", help="Node profile of the clients (storage NICs).")]
    = "h800-hgx",
    client_nic: Annotated[str | None, typer.Option("--client-nic", help="Override the client's storage NIC "
                                                   "bandwidth, e.g. '200 Gb/s'.")] = None,
    fill: Annotated[float, typer.Option("--fill", help="Usable fraction of each SSD (3FS recycles at 0.95).")]
    = 0.95,
    efficiency: Annotated[float, typer.Option("--efficiency", help="Achieved fraction of line rate (0.81 in the "
                                              "published 180-node read test).")] = 0.81,
    dataset: Annotated[str | None, typer.Option("--dataset", help="Data to store, e.g. '5 PiB'.")] = None,
    checkpoint: Annotated[str | None, typer.Option("--checkpoint", help="Checkpoint size, e.g. '10 TiB'.")] = None,
    checkpoint_seconds: Annotated[float | None, typer.Option("--checkpoint-seconds", help="Time budget to write "
                                                             "one checkpoint.")] = None,
    read_per_client: Annotated[str | None, typer.Option("--read-per-client", help="Read rate each client needs, "
                                                        "e.g. '20 GiB/s'.")] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Usable capacity, read/write ceilings, degraded read and checkpoint time of a 3FS cluster."""
    from dsctl.storage import api
    from dsctl.storage.sizing import SizingInputs, client_nic_bytes_per_s, size

    store = profile_store()
    profile = store.storage(storage)
    node = store.node(client_node)
    client_bytes = (api.parse_rate(client_nic, "--client-nic") if client_nic is not None
                    else client_nic_bytes_per_s(node))
    inputs = SizingInputs(
        num_nodes=nodes, replication=replication, targets_per_ssd=targets_per_ssd, num_clients=clients,
        client_nic_bytes_per_s=client_bytes, fill=fill, efficiency=efficiency,
        dataset_bytes=api.parse_size(dataset, "--dataset") if dataset is not None else None,
        checkpoint_bytes=api.parse_size(checkpoint, "--checkpoint") if checkpoint is not None else None,
        checkpoint_budget_s=checkpoint_seconds,
        read_per_client_bytes_per_s=(api.parse_rate(read_per_client, "--read-per-client")
                                     if read_per_client is not None else None),
    )
    show(size(profile, inputs), fmt, "storage size")


@app.command("chains")
def chains_cmd(
    nodes: Annotated[int, typer.Option("--nodes", "-n", help="Storage nodes (services) in the table.")],
    ssds_per_node: Annotated[int, typer.Option("--ssds-per-node", "-d", help="SSDs (disk indexes) per node.")],
    replication: Annotated[int, typer.Option("--replication", "-k", help="Targets per chain.")] = 3,
    targets_per_ssd: Annotated[int | None, typer.Option("--targets-per-ssd", "-r", help="Targets per SSD "
                                                        "(default: the upstream tool's automatic r).")] = None,
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
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write the four 3FS files and pair_share.svg "
                                             "here.")] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Generate a balanced 3FS chain table (chains, chain table, create/remove-target commands)."""
    from dsctl.output.files import write_files
    from dsctl.output.progress import progress
    from dsctl.storage import api
    from dsctl.storage.chaintable import IdScheme, check_chunk_sizes

    sizes = check_chunk_sizes(chunk_size or [])
    scheme = IdScheme(first_node_id=first_node_id, target_prefix=target_id_prefix, chain_prefix=chain_id_prefix)
    with progress(f"chain table for {nodes} nodes", fmt):
        result = api.generate_chains(nodes, ssds_per_node, replication, targets_per_ssd, chain_table_id, scheme,
                                     sizes, rotate=not no_rotate, with_svg=out is not None)
    if out is not None:
        written = write_files(out, result.files_text)
        result = dataclasses.replace(result, out_dir=str(out), files=[str(p) for p in written])
    show(result, fmt, "storage chains")


@app.command("check-chains")
def check_cmd(
    source: Annotated[Path, typer.Argument(help="Folder with generated_chains.csv (and create_target_cmd.txt), "
                                           "or the CSV itself.")],
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Balance of an existing chain table; exit 1 if a chain repeats a node or chains differ in length."""
    from dsctl.storage import api

    create_text = None
    if source.is_dir():
        csv = source / "generated_chains.csv"
        if not csv.exists():
            raise InputError(f"SOURCE {source} has no generated_chains.csv")
        cmds = source / "create_target_cmd.txt"
        if cmds.exists():
            create_text = read_text_input(cmds, "SOURCE")
    else:
        csv = source
    text = read_text_input(csv, "SOURCE")
    if len(text) > 200_000_000:
        raise InputError(f"SOURCE {csv} is larger than 200 MB")
    show(api.check_chains(text, str(csv), create_text), fmt, "storage check-chains")
