"""Built-in and user profiles: model shapes, node hardware, switches, storage servers.

``dsctl.profiles.schema`` holds the frozen dataclasses (importable from domain code);
``dsctl.profiles.loader`` reads the YAML files (the only module here that imports yaml).
"""

from dsctl.profiles.schema import (
    AttentionSpec,
    ModelProfile,
    MoESpec,
    NodeProfile,
    Profile,
    ProfileKind,
    PublishedFigures,
    StorageProfile,
    SwitchProfile,
)

#: the built-in profiles every command uses when neither the command line nor dsctl.toml names one
DEFAULT_MODEL = "deepseek-v3"
DEFAULT_NODE_PROFILE = "h800-hgx"
DEFAULT_STORAGE = "3fs-reference"
DEFAULT_SWITCH = "ib-ndr-64"

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_NODE_PROFILE",
    "DEFAULT_STORAGE",
    "DEFAULT_SWITCH",
    "AttentionSpec",
    "MoESpec",
    "ModelProfile",
    "NodeProfile",
    "Profile",
    "ProfileKind",
    "PublishedFigures",
    "StorageProfile",
    "SwitchProfile",
]
