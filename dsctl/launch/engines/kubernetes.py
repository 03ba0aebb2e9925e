"""Kubernetes manifests: a headless Service and a JobSet with one pod per node, as plain dicts.

- JobSet (``jobset.x-k8s.io/v1alpha2``): one replicated job ``node`` (replicas 1) whose batch/v1 Job is Indexed
  with ``parallelism = completions = nodes``, so pod ``i`` gets ``JOB_COMPLETION_INDEX=i`` = its node rank;
  ``network.enableDNSHostnames`` gives pods the names ``<job>-node-0-<i>.<subdomain>``.
- The Service (``clusterIP: None``, ``publishNotReadyAddresses``) is that subdomain: pod 0's name resolves before
  any pod is ready, and torchrun's static rendezvous uses it as ``--master-addr``.
- Each pod asks for ``nvidia.com/gpu: G`` (requests = limits), mounts a memory-backed ``/dev/shm``, and gets the
  ``DSCTL_*`` layout variables; ``restartPolicy: Never``, ``backoffLimit: 0`` and ``failurePolicy.maxRestarts: 0``
  so a failed rank fails the job instead of restarting one pod out of its rendezvous.

The command layer writes them as YAML (``jobset.yaml``); they are checked offline, not applied, in tests.
"""

from __future__ import annotations

import shlex
from typing import Any

from dsctl.errors import InputError
from dsctl.launch.engines.slurm import torchrun_args
from dsctl.launch.engines.spec import JobOptions, JobSpec

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "node"
GPU_RESOURCE = "nvidia.com/gpu"
CONTAINER = "trainer"


def rendezvous_host(spec: JobSpec) -> str:
    """DNS name of node 0's pod: ``<job>-node-0-0.<job>`` (JobSet pod hostname ``<jobset>-<rjob>-<job>-<pod>``)."""
    return f"{spec.job_name}-{REPLICATED_JOB}-0-0.{spec.job_name}"


def _labels(spec: JobSpec) -> dict[str, str]:
    return {"app.kubernetes.io/name": spec.job_name, "app.kubernetes.io/managed-by": "dsctl"}


def headless_service(spec: JobSpec) -> dict[str, Any]:
    """The rendezvous Service: headless, selecting every pod of the JobSet, port = rendezvous port."""
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": spec.job_name, "labels": _labels(spec)},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {JOBSET_NAME_LABEL: spec.job_name},
            "ports": [{"name": "rendezvous", "port": spec.port, "targetPort": spec.port, "protocol": "TCP"}],
        },
    }


def container_command(spec: JobSpec) -> list[str]:
    """``bash -c 'exec torchrun ... --node-rank "$JOB_COMPLETION_INDEX" ...'`` (expanded in the pod)."""
    args = shlex.join(torchrun_args(spec, "@NODE_RANK@", rendezvous_host(spec)))
    return ["bash", "-c", "exec " + args.replace("@NODE_RANK@", '"$JOB_COMPLETION_INDEX"')]


def pod_spec(spec: JobSpec, image: str) -> dict[str, Any]:
    """The pod template's spec: one trainer container with all the node's GPUs."""
    gpus = str(spec.gpus_per_node)
    return {
        "restartPolicy": "Never",
        "containers": [{
            "name": CONTAINER,
            "image": image,
            "command": container_command(spec),
            "env": [{"name": name, "value": value} for name, value in spec.env],
            "ports": [{"name": "rendezvous", "containerPort": spec.port, "protocol": "TCP"}],
            "resources": {"requests": {GPU_RESOURCE: gpus}, "limits": {GPU_RESOURCE: gpus}},
            "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
        }],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
    }


def job_spec_of_node(spec: JobSpec, image: str) -> dict[str, Any]:
    """The batch/v1 Job spec inside the JobSet: Indexed, one pod per node, no retries."""
    return {
        "parallelism": spec.num_nodes,
        "completions": spec.num_nodes,
        "completionMode": "Indexed",
        "backoffLimit": 0,
        "template": {"metadata": {"labels": _labels(spec)}, "spec": pod_spec(spec, image)},
    }


def jobset(spec: JobSpec, image: str) -> dict[str, Any]:
    """The JobSet manifest."""
    return {
        "apiVersion": JOBSET_API, "kind": "JobSet",
        "metadata": {"name": spec.job_name, "labels": _labels(spec)},
        "spec": {
            "network": {"enableDNSHostnames": True, "subdomain": spec.job_name},
            "failurePolicy": {"maxRestarts": 0},
            "replicatedJobs": [{
                "name": REPLICATED_JOB,
                "replicas": 1,
                "template": {"spec": job_spec_of_node(spec, image)},
            }],
        },
    }


def manifests(spec: JobSpec, options: JobOptions) -> list[dict[str, Any]]:
    """``[Service, JobSet]`` for ``jobset.yaml``; ``--image`` is required."""
    if not options.image:
        raise InputError("kubernetes needs {image}: the container image that holds torchrun and the "
                         "training script", field="backend", mentions=("image",),
                         hint="e.g. --image registry.example.com/team/trainer:2026-11")
    if any(c.isspace() for c in options.image):
        raise InputError(f"{options.image!r} is not a valid image reference (it contains whitespace)", field="image")
    return [headless_service(spec), jobset(spec, options.image)]
