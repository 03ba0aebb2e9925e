"""LaunchRequest.check holds the option rules of 'dsctl launch' and 'dsctl launch layout', naming fields; the
submission result carries its own exit code."""

from __future__ import annotations

from typing import Any

import pytest

from dsctl.commands.launch import FIELD_OPTIONS
from dsctl.errors import InputError
from dsctl.launch.engines.result import LaunchRun
from dsctl.launch.request import LaunchRequest, parse_dp, parse_hosts, parse_node_range, parse_tokens


@pytest.mark.parametrize(("fields", "field", "mentions", "spelled"), [
    ({"num_nodes": 0}, "nodes", ("nodes",), "--nodes is required: the number of nodes to plan for, e.g. --nodes 256"),
    ({"find_min_nodes": True}, "find_min_nodes", ("nodes",), "--min-nodes chooses the node count; drop --nodes"),
    ({"tokens": 0.0}, "tokens", (), "--tokens 0: expected a positive count like 14.8T"),
    ({"gpu_hour_usd": float("inf")}, "gpu_hour_usd", (), "--gpu-hour-usd inf: expected a finite price >= 0, e.g. 2"),
    ({"eplb_stats_given": True, "balancedness_given": True}, "eplb_stats", ("balancedness",),
     "--eplb-stats and --balancedness both set the MoE imbalance; give one"),
    ({"dry_run": True, "submit": True}, "dry_run", ("submit",), "--dry-run and --submit exclude each other; give one"),
    ({"force": True}, "force", ("submit",), "--force applies to --submit only"),
    ({"engine_options": frozenset({"image"}), "backend": "slurm"}, "image", ("backend",),
     "--image applies to --backend kubernetes, not slurm"),
    ({"engine_options": frozenset({"sbatch_args"})}, "sbatch_args", ("backend",),
     "--sbatch-arg applies to --backend slurm"),
    ({"submit": True}, "submit", ("backend",), "--submit needs --backend slurm, torchrun or kubernetes"),
    ({"submit": True, "backend": "torchrun", "test_only": True}, "test_only", ("backend",),
     "--test-only asks Slurm whether it would accept the job; it does not apply to --backend torchrun"),
    ({"submit": True, "backend": "kubernetes", "wait": True}, "wait", ("backend",),
     "--wait applies to --backend slurm (torchrun runs in the foreground; kubernetes is applied only); drop it for "
     "--backend kubernetes"),
    ({"submit": True, "backend": "torchrun", "max_nodes": 4}, "submit", ("backend", "nodes"),
     "--submit with --backend torchrun runs one node on this host; the plan has --nodes 1-4"),
    ({"submit": True, "backend": "torchrun", "hosts": ("a",)}, "hosts", ("submit", "backend"),
     "--hosts names the hosts of the job file; --submit with --backend torchrun runs one node on this host"),
])
def test_each_option_rule_names_its_fields(fields: dict[str, Any], field: str, mentions: tuple[str, ...],
                                           spelled: str) -> None:
    request = LaunchRequest(**{"num_nodes": 1, **fields})
    with pytest.raises(InputError) as caught:
        request.check()
    exc = caught.value
    assert (exc.field, exc.mentions) == (field, mentions)
    assert not exc.text.startswith("-")  # the domain names fields; the flag is the command layer's
    exc.name_options(FIELD_OPTIONS.get)
    assert exc.message == spelled


def test_a_valid_request_passes_and_a_smallest_count_search_starts_at_one_node() -> None:
    plain = LaunchRequest(4, submit=True, backend="slurm", wait=True, engine_options=frozenset({"partition"}))
    assert plain.check() is plain
    assert LaunchRequest(0, find_min_nodes=True).check().num_nodes == 1
    assert LaunchRequest(128, max_nodes=512).node_range and LaunchRequest(128, within_days=30).node_range
    assert not LaunchRequest(128, max_nodes=128).node_range


def test_the_option_parsers_name_their_field() -> None:
    assert parse_node_range("128-512") == (128, 512) and parse_node_range(" 8 ") == (8, 8)
    assert parse_node_range(None) == (0, 0)
    assert parse_dp("auto") is None and parse_dp("16") == 16
    assert parse_tokens("14.8T") == pytest.approx(14.8e12) and parse_tokens(None) is None
    assert parse_hosts("a, b") == ("a", "b")
    for call, field in ((lambda: parse_node_range("1-2-3"), "nodes"), (lambda: parse_node_range("0"), "nodes"),
                        (lambda: parse_dp("0"), "dp"), (lambda: parse_tokens("lots"), "tokens"),
                        (lambda: parse_hosts("a,,b"), "hosts")):
        with pytest.raises(InputError) as caught:
            call()
        assert caught.value.field == field


def _run(state: str, job_exit_code: int | None = None) -> LaunchRun:
    return LaunchRun(backend="slurm", job_name="j", layout="PP1", world_size=8, out_dir="/o", files=(), command=(),
                     state=state, job_exit_code=job_exit_code)


@pytest.mark.parametrize(("state", "job_code", "exit_code"), [
    ("SUBMITTED", None, 0), ("ACCEPTED", None, 0), ("APPLIED", None, 0), ("COMPLETED", 0, 0), ("FAILED", 1, 1),
    ("TIMEOUT", None, 1), ("RUNNING", None, 1), ("EXITED", 0, 0), ("EXITED", 137, 137),
])
def test_a_submission_carries_its_exit_code(state: str, job_code: int | None, exit_code: int) -> None:
    run = _run(state, job_code)
    assert run.exit_code == exit_code and run.to_data()["exit_code"] == exit_code
