"""The Slurm batch script renderer: exact directives, env lines, srun/torchrun line; bash accepts it."""

from __future__ import annotations

import shlex
import subprocess
from functools import cache

import pytest

from dsctl.errors import InputError
from dsctl.launch.engines.slurm import render_sbatch, sbatch_directives
from dsctl.launch.engines.spec import JobOptions, job_spec, layout_env
from dsctl.launch.plan import LaunchPlan, LaunchRequest, plan_launch
from dsctl.profiles.loader import ProfileStore
from tests.unit.launch_messages import as_read


@cache
def v3_plan(nodes: int = 256, train: tuple[str, ...] = ("train.py", "--config", "v3.yaml")) -> LaunchPlan:
    store = ProfileStore.from_environment({}, None)
    return plan_launch(store.model("deepseek-v3"), store.node("h800-hgx"),
                       LaunchRequest(num_nodes=nodes, train_command=train), simulate_schedule=False)


def script(options: JobOptions | None = None, train: tuple[str, ...] = ("train.py", "--config", "v3.yaml")) -> str:
    options = options or JobOptions(job_name="v3")
    return render_sbatch(job_spec(v3_plan(256, train), options, "slurm"), options)


def test_directives_for_deepseek_v3_on_256_nodes() -> None:
    spec = job_spec(v3_plan(), JobOptions(job_name="v3"), "slurm")
    assert sbatch_directives(spec, JobOptions(job_name="v3")) == [
        "#SBATCH --job-name=v3", "#SBATCH --nodes=256", "#SBATCH --ntasks-per-node=1",
        "#SBATCH --gpus-per-node=8", "#SBATCH --cpus-per-task=8", "#SBATCH --output=v3-%j.out"]
    text = script()
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    # every #SBATCH line comes before the first command (sbatch stops reading them there)
    first_command = next(i for i, line in enumerate(lines) if line and not line.startswith("#"))
    assert lines[first_command] == "set -euo pipefail"
    assert all(i < first_command for i, line in enumerate(lines) if line.startswith("#SBATCH"))


def test_optional_directives() -> None:
    options = JobOptions(job_name="v3", cpus_per_task=96, partition="train", time_limit="2-00:00:00",
                         log_path="/logs/v3-%j.out")
    text = script(options)
    for line in ("#SBATCH --cpus-per-task=96", "#SBATCH --partition=train", "#SBATCH --time=2-00:00:00",
                 "#SBATCH --output=/logs/v3-%j.out"):
        assert line in text.splitlines()


def test_layout_is_exported() -> None:
    text = script().splitlines()
    for line in ("export DSCTL_PP=16", "export DSCTL_EP=64", "export DSCTL_TP=1", "export DSCTL_DP=128",
                 "export DSCTL_EDP=2", "export DSCTL_RANK_ORDER=tp-cp-ep-dp-pp", "export DSCTL_NUM_NODES=256",
                 "export DSCTL_GPUS_PER_NODE=8", "export DSCTL_SCHEDULE=dualpipe", "export DSCTL_NUM_STAGES=16",
                 "export DSCTL_MICRO_BATCHES=120", "export DSCTL_GLOBAL_BATCH=15360", "export DSCTL_SEQ_LEN=4096"):
        assert line in text
    env = dict(layout_env(v3_plan(), "v3"))
    assert env["DSCTL_RECIPE"] == "deepseek" and env["DSCTL_ZERO_STAGE"] == "1"  # what the memory fit assumed
    assert int(env["DSCTL_PP"]) * int(env["DSCTL_TP"]) * int(env["DSCTL_DP"]) == 2048
    assert int(env["DSCTL_EDP"]) == int(env["DSCTL_TP"]) * int(env["DSCTL_DP"]) // int(env["DSCTL_EP"])


def test_one_torchrun_agent_per_node_with_static_rendezvous() -> None:
    last = script().splitlines()[-1]
    assert last == ("srun --kill-on-bad-exit=1 --cpus-per-task=8 "
                    "bash -c 'exec torchrun --nnodes 256 --nproc-per-node 8 "
                    "--node-rank \"$SLURM_NODEID\" --master-addr \"$MASTER_ADDR\" --master-port 29500 "
                    "train.py --config v3.yaml'")
    text = script()
    assert 'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | awk \'NR==1\')' in text
    assert 'export MASTER_ADDR="$head_addr" MASTER_PORT=29500' in text


def test_srun_asks_for_the_cpus_of_the_job() -> None:
    # srun of Slurm 22.05-23.02 does not inherit --cpus-per-task from sbatch: without it the agent and its
    # workers are bound to one CPU
    assert script().splitlines()[-1].startswith("srun --kill-on-bad-exit=1 --cpus-per-task=8 bash -c ")
    last = script(JobOptions(job_name="v3", cpus_per_task=96)).splitlines()[-1]
    assert shlex.split(last)[:3] == ["srun", "--kill-on-bad-exit=1", "--cpus-per-task=96"]


def test_head_node_of_a_long_node_list(tmp_path) -> None:
    # 'scontrol show hostnames | head -n1' under pipefail: head exits after one line, scontrol dies of SIGPIPE
    # (141) on a long list and set -e ends the job before srun
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "scontrol"
    fake.write_text("#!/bin/bash\nfor i in $(seq 1 20000); do echo \"gpu-node-with-a-long-name-$i\"; done\n")
    fake.chmod(0o755)
    line = next(x for x in script().splitlines() if x.startswith("head="))
    done = subprocess.run(["bash", "-c", f"set -euo pipefail; {line}; echo \"$head\""], capture_output=True,
                          text=True, check=False, env={"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_NODELIST": "x"})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "gpu-node-with-a-long-name-1\n"


def test_log_path_with_spaces_is_one_sbatch_argument() -> None:
    # sbatch splits #SBATCH lines at whitespace and honours double quotes (as a POSIX shell would)
    line = next(x for x in script(JobOptions(job_name="v3", log_path='/home/me/my runs/a"b/v3-%j.out')).splitlines()
                if x.startswith("#SBATCH --output="))
    assert shlex.split(line)[1:] == ['--output=/home/me/my runs/a"b/v3-%j.out']
    plain = next(x for x in script().splitlines() if x.startswith("#SBATCH --output="))
    assert plain == "#SBATCH --output=v3-%j.out"


def test_training_arguments_survive_quoting() -> None:
    train = ("train.py", "--name", "it's a run", "--glob", "*.yaml", "--var", "$HOME")
    last = script(train=train).splitlines()[-1]
    inner = shlex.split(last)[-1]  # what bash -c receives
    assert shlex.split(inner)[-len(train):] == list(train)


def test_bash_parses_the_script(tmp_path) -> None:
    path = tmp_path / "job.sbatch"
    path.write_text(script(train=("train.py", "--name", "it's")))
    done = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("options", "words"), [
    (JobOptions(job_name="bad name"), "--job-name 'bad name'"),
    (JobOptions(port=70000), "--port 70000"),
    (JobOptions(time_limit="two days"), "--time 'two days'"),
    (JobOptions(cpus_per_task=0), "--cpus-per-task 0"),
    (JobOptions(partition="a b"), "--partition 'a b'"),
])
def test_bad_options_name_the_option(options: JobOptions, words: str) -> None:
    with pytest.raises(InputError) as info:
        job_spec(v3_plan(), options, "slurm")
    assert as_read(info).startswith(words)


def test_training_command_is_required() -> None:
    with pytest.raises(InputError, match="training command after '--'"):
        job_spec(v3_plan(256, ()), JobOptions(), "slurm")
