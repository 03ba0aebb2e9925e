"""The health source factory (one option -> backend table) and the check table."""

from __future__ import annotations

import pytest

from dsctl.errors import InputError
from dsctl.health.checks import BY_ID, CHECKS, area_of
from dsctl.health.source import DEFAULT_LIVE_INTERVAL_S, SOURCE_KINDS, choose_source

RECORD = {"hostname": "n1", "interval_s": 7.5, "gpus": [], "infiniband": {"devices": []}}


def test_each_option_selects_its_backends_and_says_so() -> None:
    live = choose_source()
    assert live.kind.name == "live" and live.interval_s == DEFAULT_LIVE_INTERVAL_S and live.sysfs_root == "/"
    assert live.origin.startswith("default (no --from-record/--sysfs-root): GPUs from NVML of this machine")
    root = choose_source(sysfs_root="/srv/sys", interval_s=2.0)
    assert (root.kind.name, root.sysfs_root, root.interval_s, root.live) == ("sysfs-root", "/srv/sys", 2.0, True)
    assert root.origin.startswith("--sysfs-root /srv/sys: ")
    rec = choose_source(record_name="n1.yaml", read_record=lambda: dict(RECORD))
    assert (rec.kind.name, rec.interval_s, rec.live) == ("record", 7.5, False)
    assert rec.record is not None and rec.record["hostname"] == "n1"
    assert choose_source(record_name="n1.yaml", read_record=lambda: dict(RECORD), interval_s=0).interval_s == 0.0
    assert [k.option for k in SOURCE_KINDS] == ["--from-record", "--sysfs-root", None]


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"record_name": "a.yaml", "sysfs_root": "/x"}, "^sysfs_root and from_record exclude each other$"),
    ({"record_name": "a.yaml", "interval_s": 5.0}, "^interval_s does not apply to from_record (except 0"),
    ({"interval_s": 4000.0}, "up to 3600"),
    ({"interval_s": float("nan")}, "^interval_s must be 0 .one sample, rate checks skipped. or a number"),
    ({"record_name": "a.yaml", "read_record": lambda: [1, 2]}, "expected a mapping"),
    ({"record_name": "a.yaml", "read_record": lambda: {**RECORD, "interval_s": 2**70}}, "64-bit integers"),
])
def test_conflicting_or_bad_options_are_input_errors(kwargs: dict, needle: str) -> None:
    with pytest.raises(InputError, match=needle.replace("(", r"\(")):
        choose_source(**kwargs)


def test_options_are_checked_before_the_record_is_read() -> None:
    def unread() -> None:
        raise AssertionError("read")

    with pytest.raises(InputError, match="exclude each other"):
        choose_source(record_name="a.yaml", read_record=unread, sysfs_root="/x")


def test_every_check_is_declared_once_with_its_area() -> None:
    ids = [c.id for c in CHECKS]
    assert len(ids) == len(set(ids)) == 34 and ids[0] == "G1" and ids[-1] == "G22"
    assert {c.id for c in CHECKS if c.area == "nvlink"} == {"G6", "G7", "G8", "G9", "G10"}
    assert {c.id for c in CHECKS if c.rate} == {"G8", "G13", "R5", "R6"}
    assert {c.id for c in CHECKS if c.needs_gpus} == {"R9", "R10", "R12"}
    assert all(c.area == "rdma" for c in CHECKS if c.needs_ports)
    assert area_of("G8") == "nvlink" and area_of("G99") == "gpu" and area_of("R99") == "rdma"
    assert area_of("R3") == BY_ID["R3"].area == "rdma"
