"""Kubernetes manifests: structure, and offline validation.

- The Service and the JobSet's embedded batch/v1 Job (pod template included) are validated as built-in kinds by
  ``kubernetes-validate`` in strict mode (unknown fields are errors).
- The JobSet itself is a CRD: kubernetes-validate has no schema for it (it raises SchemaNotFoundError, checked
  below, so it cannot pass silently). Its top level is checked two ways: the pydantic models of
  ``kubeflow-trainer-api`` (types; an exact round trip catches unknown fields), and a hand-written JSON schema of
  the JobSet v1alpha2 fields dsctl uses (additionalProperties false).
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

import pytest

from dsctl.errors import InputError
from dsctl.launch.engines.kubernetes import manifests, rendezvous_host
from dsctl.launch.engines.spec import JobOptions, job_spec
from dsctl.launch.plan import LaunchPlan, LaunchRequest, plan_launch
from dsctl.profiles.loader import ProfileStore
from tests.unit.launch_messages import as_read

kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="pip install '.[test]' (kubernetes-validate)")
jsonschema = pytest.importorskip("jsonschema")

K8S_VERSION = "1.31.0"
OPTIONS = JobOptions(job_name="v3-pretrain", image="registry.example/trainer:1", port=29500)

#: JobSet v1alpha2 fields dsctl writes (jobset.x-k8s.io API reference); the Job template is checked separately
JOBSET_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "jobset.x-k8s.io/v1alpha2"},
        "kind": {"const": "JobSet"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {
            "type": "object", "additionalProperties": False, "required": ["replicatedJobs"],
            "properties": {
                "network": {"type": "object", "additionalProperties": False, "properties": {
                    "enableDNSHostnames": {"type": "boolean"}, "subdomain": {"type": "string"},
                    "publishNotReadyAddresses": {"type": "boolean"}}},
                "failurePolicy": {"type": "object", "properties": {"maxRestarts": {"type": "integer",
                                                                                   "minimum": 0}}},
                "replicatedJobs": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "additionalProperties": False, "required": ["name", "template"],
                    "properties": {"name": {"type": "string"}, "replicas": {"type": "integer", "minimum": 1},
                                   "template": {"type": "object", "required": ["spec"]}}}},
            },
        },
    },
}


@cache
def plan(nodes: int) -> LaunchPlan:
    store = ProfileStore.from_environment({}, None)
    return plan_launch(store.model("deepseek-v3"), store.node("h800-hgx"),
                       LaunchRequest(num_nodes=nodes, train_command=("train.py", "--config", "v3.yaml")),
                       simulate_schedule=False)


def docs(nodes: int = 256) -> list[dict[str, Any]]:
    return manifests(job_spec(plan(nodes), OPTIONS, "kubernetes"), OPTIONS)


def embedded_job(jobset: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "check"},
            "spec": jobset["spec"]["replicatedJobs"][0]["template"]["spec"]}


def test_structure_one_pod_per_node() -> None:
    service, jobset = docs()
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == {"jobset.sigs.k8s.io/jobset-name": "v3-pretrain"}
    assert jobset["spec"]["network"] == {"enableDNSHostnames": True, "subdomain": "v3-pretrain"}
    (rjob,) = jobset["spec"]["replicatedJobs"]
    job = rjob["template"]["spec"]
    assert (rjob["replicas"], job["parallelism"], job["completions"], job["completionMode"]) == (1, 256, 256,
                                                                                                 "Indexed")
    (container,) = job["template"]["spec"]["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"} == container["resources"]["requests"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert (env["DSCTL_PP"], env["DSCTL_EP"], env["DSCTL_DP"], env["DSCTL_EDP"]) == ("16", "64", "128", "2")
    assert container["command"] == [
        "bash", "-c", 'exec torchrun --nnodes 256 --nproc-per-node 8 --node-rank "$JOB_COMPLETION_INDEX" '
                      "--master-addr v3-pretrain-node-0-0.v3-pretrain --master-port 29500 train.py --config v3.yaml"]
    assert rendezvous_host(job_spec(plan(256), OPTIONS, "kubernetes")) == "v3-pretrain-node-0-0.v3-pretrain"


@pytest.mark.parametrize("nodes", [1, 4, 256])
def test_builtin_kinds_validate_strictly(nodes: int) -> None:
    service, jobset = docs(nodes)
    kubernetes_validate.validate(service, K8S_VERSION, strict=True)
    kubernetes_validate.validate(embedded_job(jobset), K8S_VERSION, strict=True)


def test_validator_catches_a_misspelt_field() -> None:
    job = embedded_job(docs(4)[1])
    bad = copy.deepcopy(job)
    bad["spec"]["template"]["spec"]["containers"][0]["imagee"] = "x"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)
    bad = copy.deepcopy(job)
    bad["spec"]["completions"] = "four"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)


def test_jobset_has_no_builtin_schema() -> None:
    # the trap: the CRD must not count as validated by kubernetes-validate
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        kubernetes_validate.validate(docs(4)[1], K8S_VERSION, strict=True)


def test_jobset_matches_documented_fields() -> None:
    jobset = docs(256)[1]
    jsonschema.validate(jobset, JOBSET_SCHEMA)
    bad = copy.deepcopy(jobset)
    bad["spec"]["netwrk"] = bad["spec"].pop("network")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, JOBSET_SCHEMA)


def test_jobset_round_trips_through_kubeflow_models() -> None:
    models = pytest.importorskip("kubeflow_trainer_api.models.jobset_v1alpha2_job_set",
                                 reason="pip install '.[test]' (kubeflow-trainer-api)")
    jobset = docs(256)[1]
    assert models.JobsetV1alpha2JobSet.from_dict(jobset).to_dict() == jobset
    bad = copy.deepcopy(jobset)
    bad["spec"]["replicatedJobs"][0]["replicas"] = "one"
    with pytest.raises(ValueError):
        models.JobsetV1alpha2JobSet.from_dict(bad)


@pytest.mark.parametrize(("options", "words"), [
    (JobOptions(job_name="V3_Run", image="i"), "not valid for Kubernetes"),
    (JobOptions(job_name="v3"), "needs --image"),
    (JobOptions(job_name="v3", image="a b"), "whitespace"),
])
def test_bad_kubernetes_options(options: JobOptions, words: str) -> None:
    with pytest.raises(InputError) as info:
        manifests(job_spec(plan(4), options, "kubernetes"), options)
    assert words in as_read(info)
