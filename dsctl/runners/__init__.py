"""Subprocess runners for ``dsctl launch --submit`` (sbatch, scontrol, torchrun, kubectl).

Not a domain package: these modules start processes and read their output. They take argv lists and paths
from the command layer and return plain values; renderers live in ``dsctl.launch.engines``.
"""
