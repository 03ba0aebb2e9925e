"""Open the backends a :class:`~dsctl.health.source.SourceChoice` names: live NVML + sysfs, or a record replayed
through the real NVML adapter over the fake NVML module and a sysfs tree rendered into a temporary folder."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from dsctl.errors import InputError
from dsctl.health.model import HostFacts
from dsctl.health.sample import Sources
from dsctl.health.source import SourceChoice

GPU_AREAS = frozenset({"gpu", "nvlink"})


@contextmanager
def open_source(choice: SourceChoice, areas: tuple[str, ...],
                sleep: Callable[[float], None] = time.sleep) -> Iterator[Sources]:
    """The backends of ``choice`` for ``areas`` (NVML only when gpu or nvlink is among them); a record's
    temporary sysfs tree is removed afterwards. ``sleep`` waits between live samples (a record advances its fake
    to the second sample instead)."""
    from dsctl.health.backends.host import read_host_facts
    from dsctl.health.backends.nvml import backend_from_record, live_backend
    from dsctl.health.backends.sysfs import SysfsReader, render_sysfs, write_counters

    want_gpus = bool(GPU_AREAS & set(areas))
    if choice.record is not None and choice.raw_record is not None:
        node = choice.record
        backend, fake = backend_from_record(choice.raw_record, source=choice.name)
        with tempfile.TemporaryDirectory(prefix="dsctl-health-") as tmp:
            render_sysfs(node, Path(tmp))

            def advance(_: float) -> None:
                fake.advance()
                write_counters(node, Path(tmp), "t1")

            yield Sources(backend if want_gpus else None, SysfsReader(tmp), advance, choice.interval_s,
                          node["hostname"], HostFacts(**node["host"]) if node["host"] is not None else None,
                          node["kernel_log"], replayed=choice.name, origin=choice.origin)
        return
    root = Path(choice.sysfs_root)
    if not root.is_dir():
        raise InputError(f"{root}: not a folder", field="sysfs_root")
    host = read_host_facts()
    yield Sources(live_backend() if want_gpus else None, SysfsReader(root), sleep, choice.interval_s,
                  host.hostname or "unknown-host", host, origin=choice.origin)
