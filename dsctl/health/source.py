"""Where a health snapshot's readings come from: this machine, another sysfs tree, or a replayed record.

One table (:data:`SOURCE_KINDS`) maps the options to the backends they select; :func:`choose_source` applies it
to the options given and returns a :class:`SourceChoice` that says what was chosen and why (``origin``).
Pure: the record arrives parsed; :mod:`dsctl.health.backends.source` opens the chosen backends.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dsctl.errors import InputError
from dsctl.health.record.format import check_record_numbers, normalize

#: counters are sampled twice this far apart; longer is a typo (the command would just wait)
MAX_INTERVAL_S = 3600.0
#: seconds between the two counter samples on a live node when --interval-s is not given
DEFAULT_LIVE_INTERVAL_S = 10.0


@dataclass(frozen=True)
class SourceKind:
    """One way to read a node: the option that selects it (None: the default) and the backends it uses."""

    name: str
    option: str | None
    gpus: str
    rdma: str
    live: bool


#: option -> backends, in the order they are tried: the first whose option is given wins
SOURCE_KINDS: tuple[SourceKind, ...] = (
    SourceKind("record", "--from-record", "the NVML adapter over a fake NVML replaying the record",
               "sysfs rendered from the record into a temporary folder", live=False),
    SourceKind("sysfs-root", "--sysfs-root", "NVML of this machine", "sysfs under the given folder", live=True),
    SourceKind("live", None, "NVML of this machine", "sysfs under /", live=True),
)
KIND = {k.name: k for k in SOURCE_KINDS}


@dataclass(frozen=True)
class SourceChoice:
    """The chosen source. ``record`` is the normalised record (kind ``record``), ``raw_record`` the record as
    parsed (the fake NVML reads it); ``sysfs_root`` the folder sysfs is read under (live kinds);
    ``interval_s`` the seconds between the two counter samples (0: one sample)."""

    kind: SourceKind
    interval_s: float
    name: str = ""
    sysfs_root: str = "/"
    record: Mapping[str, Any] | None = None
    raw_record: Mapping[str, Any] | None = None

    @property
    def live(self) -> bool:
        return self.kind.live

    @property
    def origin(self) -> str:
        """Why this source: ``--from-record node.yaml: GPUs from ..., NICs from ...``."""
        given = f"{self.kind.option} {self.name}" if self.kind.option else "default (no --from-record/--sysfs-root)"
        return f"{given}: GPUs from {self.kind.gpus}, NICs from {self.kind.rdma}"


def check_interval(interval_s: float | None) -> None:
    if interval_s is not None and not 0 <= interval_s <= MAX_INTERVAL_S:  # also rejects nan
        raise InputError(f"must be 0 (one sample, rate checks skipped) or a number of seconds up to "
                         f"{MAX_INTERVAL_S:g}, got {interval_s:g}", field="interval_s")


def choose_source(*, record_name: str | None = None, read_record: Callable[[], Any] | None = None,
                  sysfs_root: str | None = None, interval_s: float | None = None) -> SourceChoice:
    """Apply :data:`SOURCE_KINDS` to the options given. ``read_record()`` returns the parsed ``--from-record``
    file (named ``record_name``), called once the options agree; it is validated here (numbers, schema).
    ``interval_s`` None takes the source's default (a record's own interval, 10 s live); 0 takes one sample."""
    check_interval(interval_s)
    if record_name is not None and sysfs_root is not None:
        raise InputError("and {from_record} exclude each other", field="sysfs_root", mentions=("from_record",),
                         hint="a record carries its own sysfs view; drop --sysfs-root")
    if record_name is not None:
        if interval_s is not None and interval_s != 0:
            raise InputError("does not apply to {from_record} (except 0: replay the first sample only)",
                             field="interval_s", mentions=("from_record",),
                             hint="the record carries the interval its two counter samples were taken apart "
                                  "(interval_s)")
        source = f"--from-record {record_name}"
        record = read_record() if read_record is not None else None
        if not isinstance(record, dict):
            raise InputError(f"{source}: expected a mapping of fake-node keys (hostname, gpus, nics, ...)",
                             hint="write one with 'dsctl health record --out node.yaml'")
        check_record_numbers(record, source)
        node = normalize(record, record_name)
        return SourceChoice(KIND["record"], float(node["interval_s"]) if interval_s is None else 0.0, record_name,
                            record=node, raw_record=record)
    interval = DEFAULT_LIVE_INTERVAL_S if interval_s is None else interval_s
    if sysfs_root is not None:
        return SourceChoice(KIND["sysfs-root"], interval, sysfs_root, sysfs_root)
    return SourceChoice(KIND["live"], interval)
