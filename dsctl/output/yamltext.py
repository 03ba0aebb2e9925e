"""YAML text for files the commands write (health records, Kubernetes manifests): the command layer imports no
yaml itself (tests/unit/test_architecture.py); reading YAML goes through :func:`dsctl.profiles.textyaml.load_yaml`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def dump_yaml(data: Any, *, width: int = 120) -> str:
    """Block-style YAML of ``data`` in key order; short lists inline (``[1, 2]``)."""
    import yaml

    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=width)


def dump_yaml_documents(docs: Iterable[Any]) -> str:
    """Several YAML documents separated by ``---`` (``kubectl apply -f`` reads them), block style, key order."""
    import yaml

    return yaml.safe_dump_all(list(docs), sort_keys=False, default_flow_style=False)
