"""Read back what another dsctl printed with ``--format json`` (a node's report in ``health fleet`` and
``trace overlap --slurm``): one typed reader that checks the envelope header before anything reads the data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dsctl.output.data import SCHEMA_VERSION


@dataclass(frozen=True)
class Header:
    """The ``dsctl`` key of a JSON result (docs/output.md)."""

    schema_version: int
    command: str
    dsctl_version: str
    exit_code: int


@dataclass(frozen=True)
class NodeReport:
    """One node's answer: its header and data (the document without the header) when it is a ``command`` report
    of this schema version; else ``data`` is None and ``reason`` says why (one line)."""

    node: str
    header: Header | None
    data: Mapping[str, Any] | None
    reason: str = ""


def read_header(document: Mapping[str, Any]) -> Header | str:
    """The envelope header of ``document``, or why there is none that this dsctl reads."""
    raw = document.get("dsctl")
    if not isinstance(raw, Mapping):
        return "answer has no dsctl header (not dsctl --format json output)"
    version = raw.get("schema_version")
    if version != SCHEMA_VERSION:
        return (f"answer has schema_version {version!r} and this dsctl reads {SCHEMA_VERSION}: run the same dsctl "
                "version on the nodes")
    code = raw.get("exit_code")
    return Header(SCHEMA_VERSION, str(raw.get("command", "")), str(raw.get("dsctl_version", "")),
                  code if isinstance(code, int) and not isinstance(code, bool) else -1)


def read_node_report(node: str, document: Mapping[str, Any] | None, command: str, reason: str = "") -> NodeReport:
    """``document`` (a node's parsed stdout, None when it gave none: ``reason``) as a ``command`` report."""
    if document is None:
        return NodeReport(node, None, None, reason or "no answer")
    header = read_header(document)
    if isinstance(header, str):
        return NodeReport(node, None, None, header)
    if header.command != command:
        return NodeReport(node, header, None, f"answer is a dsctl {header.command or '?'} report, not {command}")
    if "error" in document:
        error = document["error"]
        message = error.get("message", "") if isinstance(error, Mapping) else str(error)
        return NodeReport(node, header, None, f"dsctl failed on the node: {message}")
    return NodeReport(node, header, {k: v for k, v in document.items() if k != "dsctl"})
