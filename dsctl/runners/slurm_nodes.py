"""Slurm's view of nodes: node states (``sinfo``) and draining (``scontrol update``); hostlists are dsctl's own
(:mod:`dsctl.cluster.hostlist`, no scontrol). :mod:`dsctl.runners.fleet` runs one job step on the nodes these
functions name and check.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from dsctl.cluster import hostlist
from dsctl.cluster.hostlist import MAX_HOSTLIST_CHARS as MAX_HOSTLIST_CHARS
from dsctl.cluster.hostlist import MAX_NODES as MAX_NODES
from dsctl.cluster.hostlist import unique_names as unique_names
from dsctl.cluster.hostlist import valid_node_name as valid_node_name
from dsctl.errors import EnvironmentMissing, InputError
from dsctl.health.drain import drain_argv
from dsctl.runners.process import capture, require

SRUN_HINT = ("install Slurm's client tools (Debian: apt-get install slurm-client) on a host that can reach "
             "slurmctld; the nodes need dsctl on PATH (or give its path)")
#: sinfo states (``%T``, suffix flags removed) in which a node accepts a new job step
USABLE_STATES = frozenset({"idle", "mixed", "allocated", "completing"})
#: longest hostlist handed to sinfo/srun as one argument (Linux refuses one argv string above 128 KiB)
MAX_ARG_CHARS = 64 * 1024


def expand_hostlist(expression: str, *, option: str = "--nodes") -> list[str]:
    """The nodes of a ``-w/--nodelist`` hostlist (``node[001-004,010]``), in order, once each: dsctl's own
    grammar (:func:`dsctl.cluster.hostlist.node_names`), no scontrol, so it works where Slurm is not configured."""
    return hostlist.node_names(expression, option=option)


def parse_sinfo_states(text: str) -> dict[str, tuple[str, str]]:
    """``sinfo -h -N -o '%N %T %E'`` lines -> node -> (state, reason). A node listed twice (two partitions)
    keeps its first line; ``none`` as reason becomes empty."""
    states: dict[str, tuple[str, str]] = {}
    for line in text.splitlines():
        parts = line.split(None, 2)
        if len(parts) < 2:
            continue
        reason = parts[2].strip() if len(parts) > 2 else ""
        states.setdefault(parts[0], (parts[1], "" if reason.lower() == "none" else reason))
    return states


def usable(state: str) -> bool:
    """True for a sinfo ``%T`` state that accepts a job step now (``idle``, ``mixed``...; not ``idle*`` = not
    responding, ``idle~`` = powered down, ``drained``, ``down``)."""
    return state in USABLE_STATES


def hostlist_chunks(nodes: Sequence[str], max_chars: int = MAX_ARG_CHARS) -> list[str]:
    """``nodes`` as Slurm hostlist expressions of at most ``max_chars`` characters each (ranges compressed:
    ``gpu[00001-65536]``), so that no argument reaches the kernel's 128 KiB limit on one argv string
    (``sinfo -n`` with 14,000 plain names did, near 14,000 nodes)."""
    whole = hostlist.compress(nodes)
    if len(whole) <= max_chars:
        return [whole]
    chunks: list[str] = []
    part: list[str] = []
    size = 0
    for name in nodes:  # names are at most 64 characters, far below max_chars
        if part and size + len(name) + 1 > max_chars // 2:
            chunks.append(hostlist.compress(part))
            part, size = [], 0
        part.append(name)
        size += len(name) + 1
    if part:
        chunks.append(hostlist.compress(part))
    return chunks


def slurm_states(nodes: Sequence[str], partition: str | None) -> dict[str, tuple[str, str]]:
    """State and reason of each node from sinfo (nodes Slurm does not know are absent); one sinfo per hostlist
    chunk (:func:`hostlist_chunks`)."""
    sinfo = require("sinfo", SRUN_HINT)
    states: dict[str, tuple[str, str]] = {}
    for chunk in hostlist_chunks(nodes):
        argv = [sinfo, "-h", "-N", "-o", "%N %T %E", "-n", chunk]
        if partition:
            argv += ["-p", partition]
        done = capture(argv, timeout_s=60.0)
        if done.returncode != 0:
            raise EnvironmentMissing(f"sinfo failed: {last_line(done.stderr) or done.returncode}",
                                     hint="is slurmctld reachable from this host? (try: sinfo)")
        for node, state in parse_sinfo_states(done.stdout).items():
            states.setdefault(node, state)
    if partition and not states:
        known = capture([sinfo, "-h", "-o", "%R"], timeout_s=60.0).stdout.split()
        if partition not in known:
            raise InputError(f"--partition {partition}: no such partition",
                             hint=f"partitions: {', '.join(sorted(set(known))) or '(none)'}")
    return states


def last_line(text: str) -> str:
    """The last non-empty line of a tool's message, at most 200 characters ("" when there is none)."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else ""


def drain_node(node: str, reason: str) -> str | None:
    """``scontrol update NodeName=NODE State=DRAIN Reason=REASON``; ``None`` when done, else scontrol's error."""
    if not valid_node_name(node):
        raise InputError(f"{node!r} is not a node name")
    scontrol = require("scontrol", SRUN_HINT)
    done = capture(list(drain_argv(node, reason, scontrol)), timeout_s=30.0)
    if done.returncode == 0:
        return None
    return last_line(done.stderr or done.stdout) or f"scontrol exited {done.returncode}"


def node_drain_state(node: str) -> tuple[bool, str]:
    """(drain flag set, reason) of ``node`` from ``scontrol show node -o``, read before any drain.

    Slurm must confirm that ``node`` is exactly one node of that name: one record, whose ``NodeName`` is ``node``
    (a site's NodeSet name, an alias or a node Slurm does not know is not). Otherwise EnvironmentMissing (exit 3)
    naming scontrol, so nothing is drained on a name Slurm reads differently from dsctl."""
    if not valid_node_name(node):
        raise InputError(f"{node!r} is not a node name")
    scontrol = require("scontrol", SRUN_HINT)
    argv = [scontrol, "show", "node", "-o", node]
    done = capture(argv, timeout_s=30.0)
    records = [line for line in done.stdout.splitlines() if line.strip()]
    names = [scontrol_field(line, "NodeName") for line in records]
    if done.returncode != 0 or names != [node]:
        found = (f"exit {done.returncode}: {last_line(done.stderr or done.stdout)}" if done.returncode != 0
                 else f"{len(names)} records" if len(names) != 1 else f"NodeName={names[0]}")
        raise EnvironmentMissing(f"scontrol show node -o {node}: Slurm does not confirm {node} as exactly one node "
                                 f"of that name ({found}); nothing was drained",
                                 hint="check the plan's node names against 'sinfo -N' (a NodeSet or alias is not "
                                      "a node)")
    state = re.search(r"(?:^|\s)State=(\S+)", done.stdout)
    flags = state.group(1).split("+") if state else []
    return "DRAIN" in flags or "DRAINED" in flags, scontrol_field(done.stdout, "Reason") or ""


def confirm_single_nodes(nodes: Sequence[str]) -> None:
    """Slurm confirms, before any work, that each of ``nodes`` is exactly one node of that name: ``scontrol show
    node -o`` on the names (one call per :func:`hostlist_chunks` chunk) must return one record per name and none
    other. A site NodeSet or alias that looks like a plain node name expands to other records there, so a burn-in
    that would drain it is refused before its first round (issue 33); :func:`node_drain_state` checks each node
    again right before its drain. EnvironmentMissing (exit 3) naming scontrol and the first name it does not
    confirm."""
    bad = [n for n in nodes if not valid_node_name(n)]
    if bad:
        raise InputError(f"{bad[0]!r} is not a node name")
    scontrol = require("scontrol", SRUN_HINT)
    wanted = set(nodes)
    seen: dict[str, int] = {}
    for chunk in hostlist_chunks(list(dict.fromkeys(nodes))):
        done = capture([scontrol, "show", "node", "-o", chunk], timeout_s=60.0)
        if done.returncode != 0:
            raise EnvironmentMissing(f"scontrol show node -o {chunk[:60]}: exit {done.returncode}: "
                                     f"{last_line(done.stderr or done.stdout)}; nothing was run or drained",
                                     hint="--drain needs Slurm to know every tested node; check the plan's node "
                                          "names against 'sinfo -N'")
        for line in done.stdout.splitlines():
            name = scontrol_field(line, "NodeName") if line.strip() else None
            if name is not None:
                seen[name] = seen.get(name, 0) + 1
    absent = [n for n in nodes if n not in seen]
    repeated = [n for n in nodes if seen.get(n, 0) > 1]
    extra = sorted(n for n in seen if n not in wanted)
    if absent or repeated or extra:
        found = (f"{absent[0]} is not a node" if absent else f"{repeated[0]} is listed {seen[repeated[0]]} times"
                 if repeated else f"the names expand to {len(seen):,} nodes, {extra[0]} among them")
        raise EnvironmentMissing(f"scontrol show node -o: Slurm does not confirm the {len(wanted):,} tested names as "
                                 f"single nodes ({found}); nothing was run or drained",
                                 hint="a NodeSet or alias is not a node: name single nodes in the plan or with -w")


def scontrol_field(text: str, key: str) -> str | None:
    """The value of ``key`` in a ``scontrol show ... -o`` line, spaces included (a reason, a path): it runs to the
    next `` Key=`` field or the end of the line; ``None`` when the line has no such field."""
    match = re.search(rf"(?:^|\s){re.escape(key)}=(.*?)(?=\s+[A-Za-z][\w:/]*=|\s*$)", text, re.MULTILINE)
    return match.group(1).strip() if match else None
