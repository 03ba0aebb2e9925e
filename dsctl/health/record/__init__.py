"""The fake-node record (``tests/data/health/*.yaml``; ``dsctl health record`` writes it, ``--from-record`` and the
tests replay it): ``format`` is the record format (schema, validation, default merging: :func:`normalize`,
:func:`per_link`), ``write`` turns a :class:`~dsctl.health.model.NodeSnapshot` into a record
(:func:`snapshot_record`). See docs/health.md.
"""

from dsctl.health.record.format import SCHEMA, normalize, per_link
from dsctl.health.record.write import snapshot_record

__all__ = ["SCHEMA", "normalize", "per_link", "snapshot_record"]
