"""YAML text of a node profile whose achieved rates were calibrated from a trace (``dsctl launch calibrate -o``).

The source profile's YAML is kept (its keys, in order; comments are not) with the calibrated fields replaced:
``gpu.achieved.*``, ``compute_nics.efficiency`` and ``nvlink.achievable_per_direction``; ``name`` is the output
file's stem (a profile's name is its file name) and ``kind: node`` says what it is wherever the file is put. The
text is built back into a profile before it is returned, so a file that would not load is never written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from dsctl.errors import InputError
from dsctl.names import NAME
from dsctl.profiles.build import BUILDERS
from dsctl.profiles.doc import Doc
from dsctl.profiles.loader import read_yaml
from dsctl.profiles.schema import AchievedCompute, NodeProfile, ProfileKind


def calibrated_node_yaml(node: NodeProfile, name: str, header: list[str]) -> str:
    """The YAML text of ``node`` (its source file's keys, the calibrated values) under ``name``, with ``header``
    as leading comment lines. Raises InputError when ``name`` is not a valid profile name."""
    if not NAME.fullmatch(name):
        raise InputError(f"{name}.yaml: {name!r} is not a valid profile name (the file name without .yaml): "
                         "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", field="out")
    data: dict[str, Any] = {}
    if node.path and Path(node.path).is_file():
        loaded = read_yaml(Path(node.path))
        data = dict(loaded) if isinstance(loaded, dict) else {}
    data = {"name": name, "kind": "node", **{k: v for k, v in data.items() if k not in ("name", "kind")}}
    gpu = dict(data.get("gpu") or {})
    gpu["achieved"] = {key: round(float(getattr(node.achieved, key)), 4)
                       for key in AchievedCompute.__dataclass_fields__}
    data["gpu"] = gpu
    nics = dict(data.get("compute_nics") or {})
    nics["efficiency"] = round(node.nic_efficiency, 4)
    data["compute_nics"] = nics
    nvlink = dict(data.get("nvlink") or {})
    nvlink["achievable_per_direction"] = f"{node.nvlink_achievable_bytes_per_s / 1e9:.4g} GB/s"
    data["nvlink"] = nvlink
    text = "".join(f"# {line}\n" for line in header)
    text += yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=120)
    BUILDERS[ProfileKind.NODE](Doc(yaml.safe_load(text), Path(f"{name}.yaml"), "", None), name)
    return text
