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

__all__ = [
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
