"""torchrun command lines per node, torchrun.sh, and the sbatch/scontrol output parsers of the Slurm runner."""

from __future__ import annotations

import subprocess
from functools import cache

import pytest

from dsctl.errors import InputError
from dsctl.launch.engines.spec import JobOptions, job_spec
from dsctl.launch.engines.torchrun import node_commands, render_script
from dsctl.launch.plan import LaunchPlan, LaunchRequest, plan_launch
from dsctl.profiles.loader import ProfileStore
from dsctl.runners.slurm import SubmitRejected, parse_job, parse_job_id
from tests.unit.launch_messages import as_read


@cache
def plan(nodes: int) -> LaunchPlan:
    store = ProfileStore.from_environment({}, None)
    return plan_launch(store.model("deepseek-v2-lite"), store.node("h800-hgx"),
                       LaunchRequest(num_nodes=nodes, train_command=("train.py", "--lr", "1e-4")),
                       simulate_schedule=False)


def test_single_host_is_standalone() -> None:
    spec = job_spec(plan(1), JobOptions(), "torchrun")
    (cmd,) = node_commands(spec, JobOptions())
    assert cmd.argv == ("torchrun", "--standalone", "--nnodes", "1", "--nproc-per-node", "8",
                        "train.py", "--lr", "1e-4")
    assert dict(cmd.env)["DSCTL_GPUS_PER_NODE"] == "8" and cmd.node_rank == 0


def test_host_list_gives_static_rendezvous_in_node_order() -> None:
    options = JobOptions(hosts=("gpu001", "gpu002", "gpu003", "gpu004"), port=29511)
    cmds = node_commands(job_spec(plan(4), options, "torchrun"), options)
    assert [c.host for c in cmds] == list(options.hosts)
    for rank, cmd in enumerate(cmds):
        assert cmd.argv == ("torchrun", "--nnodes", "4", "--nproc-per-node", "8", "--node-rank", str(rank),
                            "--master-addr", "gpu001", "--master-port", "29511", "train.py", "--lr", "1e-4")
    assert cmds[2].to_data()["command"].startswith("torchrun --nnodes 4")


def test_multi_node_without_hosts_is_refused() -> None:
    with pytest.raises(InputError) as info:
        node_commands(job_spec(plan(4), JobOptions(), "torchrun"), JobOptions())
    assert as_read(info).startswith("--backend torchrun with --nodes 4 needs --hosts H1,...,H4 ")


@pytest.mark.parametrize(("hosts", "words"), [
    (("a", "b"), "lists 2 host"),
    (("a", "a", "b", "c"), "twice"),
    (("a", "b c", "d", "e"), "not a host name"),
])
def test_bad_host_lists(hosts: tuple[str, ...], words: str) -> None:
    with pytest.raises(InputError, match=words):
        job_spec(plan(4), JobOptions(hosts=hosts), "torchrun")


def test_script_takes_the_node_rank(tmp_path) -> None:
    options = JobOptions(hosts=("h0", "h1", "h2", "h3"))
    text = render_script(job_spec(plan(4), options, "torchrun"), options)
    assert "#   h2: bash torchrun.sh 2" in text
    assert text.splitlines()[-1] == ('exec torchrun --nnodes 4 --nproc-per-node 8 --node-rank "$NODE_RANK" '
                                     "--master-addr h0 --master-port 29500 train.py --lr 1e-4")
    assert "export DSCTL_EP=8" in text
    path = tmp_path / "torchrun.sh"
    path.write_text(text)
    done = subprocess.run(["bash", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode != 0 and "usage: bash torchrun.sh NODE_RANK (0..3)" in done.stderr


def test_single_host_script() -> None:
    text = render_script(job_spec(plan(1), JobOptions(), "torchrun"), JobOptions())
    assert text.splitlines()[-1] == "exec torchrun --standalone --nnodes 1 --nproc-per-node 8 train.py --lr 1e-4"


def test_sbatch_parsable_job_id() -> None:
    assert parse_job_id("42\n") == "42"
    assert parse_job_id("42;cluster\n") == "42"
    with pytest.raises(SubmitRejected):
        parse_job_id("sbatch: error: oops")


def test_scontrol_job_line() -> None:
    line = ("JobId=7 JobName=v3 UserId=root(0) JobState=FAILED Reason=NonZeroExitCode Dependency=(null) "
            "ExitCode=1:0 NumNodes=4 StdOut=/runs/v3/v3-7.out")
    status = parse_job("7", line)
    assert (status.state, status.exit_code, status.log_path, status.final) == ("FAILED", 1, "/runs/v3/v3-7.out",
                                                                                True)
    spaced = parse_job("7", "JobId=7 JobState=RUNNING StdErr=/my runs/e.out StdIn=/dev/null "
                            "StdOut=/my runs/v3 x/v3-7.out Power= TresPerNode=gres:gpu:8")
    assert spaced.log_path == "/my runs/v3 x/v3-7.out"
    running = parse_job("8", "JobId=8 JobState=RUNNING ExitCode=0:0 StdOut=/x")
    assert not running.final and running.exit_code == 0
    killed = parse_job("9", "JobId=9 JobState=CANCELLED ExitCode=0:15")
    assert killed.exit_code == 128 + 15


def test_wait_polls_through_a_busy_slurmctld(monkeypatch: pytest.MonkeyPatch) -> None:
    import dsctl.runners.slurm as runner

    answers = iter(["PENDING", "UNREACHABLE", "RUNNING", "COMPLETED", "never asked"])
    monkeypatch.setattr(runner, "status", lambda job_id: runner.JobStatus(job_id, next(answers), 0, None))
    assert runner.wait("5", timeout_s=10, poll_s=0.0).state == "COMPLETED"
    answers = iter(["RUNNING", "UNKNOWN", "never asked"])
    assert runner.wait("6", timeout_s=10, poll_s=0.0).state == "UNKNOWN"  # slurmctld forgot the job
    monkeypatch.setattr(runner, "status", lambda job_id: runner.JobStatus(job_id, "RUNNING", None, None))
    assert runner.wait("7", timeout_s=0.05, poll_s=0.01).state == "RUNNING"  # --wait-timeout passed
