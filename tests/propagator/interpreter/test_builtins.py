"""The built-in rules: today's verdicts on today's cases, the same verdicts as the
hand-written health they replace on generated statuses, and the core kinds it never
judged."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.reference_health import health_of
from propagator.interpreter.builtins import builtin_interpreters
from propagator.interpreter.registry import builtin_rules


def deployment(replicas: int = 3, generation: int = 2, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "generation": generation},
        "spec": {"replicas": replicas},
        "status": {"observedGeneration": 2, **status},
    }


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (deployment(want=3, updatedReplicas=3, availableReplicas=3, replicas=3), "Healthy"),
        (deployment(updatedReplicas=3, availableReplicas=2, replicas=3), "Progressing"),
        (deployment(updatedReplicas=2, availableReplicas=3, replicas=4), "Progressing"),
        (
            deployment(generation=3, updatedReplicas=3, availableReplicas=3, replicas=3),
            "Progressing",
        ),  # the controller has not seen the new spec yet
        (
            deployment(
                conditions=[
                    {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
                ]
            ),
            "Degraded",
        ),
        (
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "spec": {"replicas": 2},
                "status": {"readyReplicas": 2, "updatedReplicas": 2},
            },
            "Healthy",
        ),
        (
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "status": {"desiredNumberScheduled": 4, "numberReady": 3},
            },
            "Progressing",
        ),
        (
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "status": {"conditions": [{"type": "Complete", "status": "True"}]},
            },
            "Healthy",
        ),
        (
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "status": {"conditions": [{"type": "Failed", "status": "True"}]},
            },
            "Degraded",
        ),
        ({"apiVersion": "v1", "kind": "ConfigMap"}, "Healthy"),
        (None, "Progressing"),
        (
            {
                **deployment(updatedReplicas=3, availableReplicas=3, replicas=3),
                "metadata": {"name": "web", "deletionTimestamp": "2026-12-01T05:22:02Z"},
            },
            "Progressing",
        ),  # being deleted (its garbage collection may lag): not what was applied
        (
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"deletionTimestamp": "x"}},
            "Progressing",
        ),
    ],
)
def test_the_rules_give_todays_verdicts(obj: dict[str, Any] | None, expected: str) -> None:
    assert builtin_rules().verdict(obj).health == expected == health_of(obj)


_COUNT = st.integers(min_value=0, max_value=4)
_CONDITION_TYPES = ["Progressing", "Available", "Failed", "Complete", "ReplicaFailure"]


@st.composite
def _workloads(draw: st.DrawFn) -> dict[str, Any]:
    api_version, kind = draw(
        st.sampled_from(
            [
                ("apps/v1", "Deployment"),
                ("apps/v1", "StatefulSet"),
                ("apps/v1", "DaemonSet"),
                ("batch/v1", "Job"),
            ]
        )
    )
    fields = [
        "observedGeneration",
        "replicas",
        "updatedReplicas",
        "availableReplicas",
        "readyReplicas",
        "desiredNumberScheduled",
        "numberReady",
        "updatedNumberScheduled",
    ]
    status: dict[str, Any] = draw(st.dictionaries(st.sampled_from(fields), _COUNT))
    types = draw(st.lists(st.sampled_from(_CONDITION_TYPES), unique=True, max_size=3))
    if types:
        status["conditions"] = [
            {
                "type": t,
                "status": draw(st.sampled_from(["True", "False"])),
                "reason": draw(
                    st.sampled_from(["ProgressDeadlineExceeded", "NewReplicaSetAvailable", "X"])
                ),
            }
            for t in types
        ]
    meta: dict[str, Any] = {"name": "w"}
    if draw(st.booleans()):
        meta["generation"] = draw(_COUNT)
    if draw(st.integers(0, 9)) == 0:
        meta["deletionTimestamp"] = "2026-12-01T05:22:02Z"
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": meta}
    if draw(st.booleans()):
        obj["spec"] = draw(st.dictionaries(st.just("replicas"), _COUNT))
    empty_status: bool = draw(st.booleans())
    if status or empty_status:
        obj["status"] = status
    return obj


@settings(max_examples=2000, deadline=None)
@given(_workloads())
def test_the_rules_agree_with_the_hand_written_health_on_any_status(obj: dict[str, Any]) -> None:
    assert builtin_rules().verdict(obj).health == health_of(obj)


def _obj(api_version: str, kind: str, **parts: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}, **parts}


@pytest.mark.parametrize(
    ("obj", "health", "message"),
    [
        (
            _obj("v1", "PersistentVolumeClaim", status={"phase": "Pending"}),
            "Progressing",
            "Pending, not bound yet",
        ),
        (_obj("v1", "PersistentVolumeClaim", status={"phase": "Bound"}), "Healthy", ""),
        (_obj("v1", "PersistentVolumeClaim", status={"phase": "Lost"}), "Degraded", None),
        (
            _obj("v1", "Service", spec={"type": "LoadBalancer"}, status={"loadBalancer": {}}),
            "Progressing",
            "waiting for a load balancer address",
        ),
        (
            _obj(
                "v1",
                "Service",
                spec={"type": "LoadBalancer"},
                status={"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}},
            ),
            "Healthy",
            "",
        ),
        (_obj("v1", "Service", spec={"type": "ClusterIP"}), "Healthy", ""),
        (
            _obj(
                "batch/v1",
                "CronJob",
                spec={},
                status={
                    "lastScheduleTime": "2026-12-01T05:00:00Z",
                    "lastSuccessfulTime": "2026-12-01T04:00:10Z",
                },
            ),
            "Degraded",
            "the run scheduled at 2026-12-01T05:00:00Z did not succeed",
        ),
        (
            _obj(
                "batch/v1",
                "CronJob",
                spec={},
                status={
                    "lastScheduleTime": "2026-12-01T05:00:00Z",
                    "lastSuccessfulTime": "2026-12-01T05:00:09Z",
                },
            ),
            "Healthy",
            "",
        ),
        (  # still running
            _obj(
                "batch/v1",
                "CronJob",
                spec={},
                status={"lastScheduleTime": "2026-12-01T05:00:00Z", "active": [{"name": "j"}]},
            ),
            "Healthy",
            "",
        ),
        (_obj("batch/v1", "CronJob", spec={}), "Healthy", ""),  # never ran yet
        (
            _obj(
                "v1",
                "Pod",
                status={
                    "phase": "Running",
                    "containerStatuses": [
                        {"name": "app", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
                    ],
                },
            ),
            "Degraded",
            "app: CrashLoopBackOff",
        ),
        (
            _obj(
                "v1",
                "Pod",
                status={"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
            ),
            "Healthy",
            "",
        ),
        (_obj("v1", "Pod", status={"phase": "Pending"}), "Progressing", "Pending"),
        (_obj("v1", "Pod", status={"phase": "Succeeded"}), "Healthy", ""),
        (
            _obj(
                "autoscaling/v2",
                "HorizontalPodAutoscaler",
                status={
                    "conditions": [
                        {"type": "AbleToScale", "status": "True", "reason": "SucceededGetScale"},
                        {
                            "type": "ScalingActive",
                            "status": "False",
                            "reason": "FailedGetResourceMetric",
                            "message": "no metrics returned",
                        },
                    ]
                },
            ),
            "Degraded",
            "FailedGetResourceMetric: no metrics returned",
        ),
        (
            _obj(
                "autoscaling/v2",
                "HorizontalPodAutoscaler",
                status={"conditions": [{"type": "ScalingActive", "status": "True"}]},
            ),
            "Healthy",
            "",
        ),
        (_obj("autoscaling/v2", "HorizontalPodAutoscaler"), "Progressing", "not evaluated yet"),
        (
            _obj(
                "policy/v1",
                "PodDisruptionBudget",
                status={"currentHealthy": 1, "desiredHealthy": 2},
            ),
            "Progressing",
            "1/2 healthy pods",
        ),
        (
            _obj("apps/v1", "ReplicaSet", spec={"replicas": 2}, status={"readyReplicas": 2}),
            "Healthy",
            "",
        ),
        (
            _obj("networking.k8s.io/v1", "Ingress", status={}),
            "Healthy",
            "no address published",
        ),
    ],
)
def test_core_kinds_the_hand_written_health_never_judged(
    obj: dict[str, Any], health: str, message: str | None
) -> None:
    verdict = builtin_rules().verdict(obj)
    assert verdict.health == health
    if message is not None:
        assert verdict.message == message


def test_every_core_kind_of_the_issue_has_shipped_rules() -> None:
    shipped = {(r.spec.target.group, r.spec.target.kind) for r in builtin_interpreters()}
    assert shipped == {
        ("apps", "Deployment"),
        ("apps", "StatefulSet"),
        ("apps", "DaemonSet"),
        ("apps", "ReplicaSet"),
        ("batch", "Job"),
        ("batch", "CronJob"),
        ("", "Pod"),
        ("", "PersistentVolumeClaim"),
        ("", "Service"),
        ("networking.k8s.io", "Ingress"),
        ("autoscaling", "HorizontalPodAutoscaler"),
        ("policy", "PodDisruptionBudget"),
    }


def test_the_replicas_rules_read_what_the_workloads_run() -> None:
    rules = builtin_rules()
    deployment = _obj("apps/v1", "Deployment", spec={"replicas": 4, "template": {"spec": {}}})
    replicas = rules.replicas(deployment)
    assert replicas is not None
    assert (replicas.count, replicas.field, replicas.pod_template) == (
        4,
        "/spec/replicas",
        {"spec": {}},
    )
    job = _obj("batch/v1", "Job", spec={"parallelism": 3, "template": {"spec": {}}})
    replicas = rules.replicas(job)
    assert replicas is not None
    assert (replicas.count, replicas.field) == (3, None)
    daemons = rules.replicas(_obj("apps/v1", "DaemonSet", spec={"template": {}}))
    assert daemons is not None
    assert daemons.per_node
    assert rules.replicas(_obj("v1", "ConfigMap")) is None


def test_the_dependency_rules_name_what_pods_use() -> None:
    pod_spec = {
        "serviceAccountName": "runner",
        "imagePullSecrets": [{"name": "registry"}],
        "volumes": [
            {"name": "a", "configMap": {"name": "settings"}},
            {"name": "b", "secret": {"secretName": "tls"}},
            {"name": "c", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "d", "emptyDir": {}},
        ],
        "containers": [
            {
                "name": "app",
                "envFrom": [{"configMapRef": {"name": "env"}}, {"secretRef": {"name": "keys"}}],
            }
        ],
    }
    deployment = _obj("apps/v1", "Deployment", spec={"template": {"spec": pod_spec}})
    deployment["metadata"]["namespace"] = "shop"
    found = {
        (d["kind"], d["name"], d["namespace"]) for d in builtin_rules().dependencies(deployment)
    }
    assert found == {
        ("ConfigMap", "settings", "shop"),
        ("Secret", "tls", "shop"),
        ("PersistentVolumeClaim", "data", "shop"),
        ("Secret", "registry", "shop"),
        ("ServiceAccount", "runner", "shop"),
        ("ConfigMap", "env", "shop"),
        ("Secret", "keys", "shop"),
    }
