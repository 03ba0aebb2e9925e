"""dsctl launch --backend: render the three job files of DeepSeek-V3 on 2,048 nodes (16,384 ranks)."""

from __future__ import annotations

from typing import Any

import yaml

from benchmarks.case import Case
from dsctl.launch.engines import kubernetes, slurm, torchrun
from dsctl.launch.engines.spec import JobOptions, job_spec
from dsctl.launch.plan import LaunchPlan, LaunchRequest, plan_launch
from dsctl.profiles.loader import ProfileStore

NODES = 2048
OPTIONS = JobOptions(job_name="v3", image="registry.example/trainer:1",
                     hosts=tuple(f"gpu{i:04d}" for i in range(NODES)))


def _plan() -> LaunchPlan:
    store = ProfileStore()
    return plan_launch(store.model("deepseek-v3"), store.node("h800-hgx"),
                       LaunchRequest(NODES, train_command=("train.py", "--config", "v3.yaml")),
                       simulate_schedule=False)


def _render_all(plan: LaunchPlan) -> int:
    sizes = 0
    for backend in ("slurm", "torchrun", "kubernetes"):
        spec = job_spec(plan, OPTIONS, backend)
        if backend == "slurm":
            sizes += len(slurm.render_sbatch(spec, OPTIONS))
        elif backend == "torchrun":
            sizes += len(torchrun.render_script(spec, OPTIONS)) + len(torchrun.node_commands(spec, OPTIONS))
        else:
            sizes += len(yaml.safe_dump_all(kubernetes.manifests(spec, OPTIONS), sort_keys=False))
    return sizes


def _run(_: Any) -> int:
    return _render_all(_plan())


CASES = [
    Case("launch run: sbatch + torchrun.sh (2,048 hosts) + JobSet YAML, 2,048 nodes", _plan, _render_all,
         target_s=0.2),
    Case("launch run: plan + the three job files, 2,048 nodes", lambda: None, _run, target_s=1.0),
]
