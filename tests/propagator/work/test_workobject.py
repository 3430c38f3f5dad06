"""A Pull member's work as a Work object and back, and the agent's report as the hub
takes it: whatever the Work or the report holds, a clear refusal naming the field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from api.memberowned import MemberOwnedField
from propagator.work.release import Release
from propagator.work.table import ClusterWork, SyncPolicy, SyncState
from propagator.work.workobject import (
    REPORT_BYTES,
    WorkRefused,
    cluster_work,
    report_kinds,
    reported,
    reported_objects,
    work_object,
    work_status,
)

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}}


def _work(**changes: Any) -> ClusterWork:
    base: dict[str, Any] = {
        "app": "shop/web",
        "cluster": "edge-7",
        "objects": (CM,),
        "revision": "r1",
        "prune_kinds": frozenset({"v1/ConfigMap"}),
        "policy": SyncPolicy(attempts=2, backoff_s=0.5, max_backoff_s=4, timeout_s=9),
        "uid": "u-1",
        "adopt": True,
        "release": Release(
            rules=(MemberOwnedField.model_validate({"jsonPointers": ["/data/a"]}),),
            scale_fields=(("apps/v1", "Deployment", "/spec/replicas"),),
        ),
        "heal_drift": False,
        "heal": "h1",
        "suspended": True,
    }
    return ClusterWork(**(base | changes))


def test_a_work_goes_to_the_agent_as_it_was_decided() -> None:
    work = _work()
    obj = json.loads(json.dumps(work_object(work)))  # as the hub stores and serves it
    assert obj["metadata"] == {
        "name": "shop.web",
        "namespace": "propagator-cluster-edge-7",
        "labels": {"propagator.io/work-cluster": "edge-7"},
    }
    back = cluster_work(obj, "edge-7", max_concurrency=work.policy.max_concurrency)
    assert back == work


def test_the_work_names_the_kinds_whose_copies_the_hub_judges() -> None:
    obj = json.loads(json.dumps(work_object(_work(), ["apps/v1/Deployment", "v1/Service"])))
    assert report_kinds(obj) == frozenset({"apps/v1/Deployment", "v1/Service"})
    assert report_kinds(work_object(_work())) == frozenset()


def test_a_removal_goes_as_an_empty_work() -> None:
    obj = work_object(_work(objects=()))
    back = cluster_work(obj, "edge-7", 10)
    assert back.removal
    assert back.prune_kinds == frozenset({"v1/ConfigMap"})


def test_a_work_from_another_clusters_namespace_is_refused() -> None:
    obj = work_object(_work())
    with pytest.raises(WorkRefused, match=r"metadata\.namespace is not this cluster's"):
        cluster_work(obj, "edge-8", 10)


def test_a_work_naming_another_application_than_its_name_is_refused() -> None:
    obj = work_object(_work())
    obj["spec"]["application"] = "kube-system/web"
    with pytest.raises(WorkRefused, match="does not name this Work"):
        cluster_work(obj, "edge-7", 10)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"objects": [CM] * 2001}, "spec.objects"),
        ({"revision": "r" * 200}, "spec.revision"),
        ({"retry": {"attempts": 10**9}}, "spec.retry.attempts"),
        ({"retry": {"timeoutSeconds": 0}}, "spec.retry.timeoutSeconds"),
        ({"surprise": 1}, "spec.surprise"),
        ({"memberOwned": [{"jsonPointers": ["no-slash"]}]}, "spec.memberOwned.0.jsonPointers"),
    ],
)
def test_a_malformed_work_is_refused_naming_the_field(change: dict[str, Any], field: str) -> None:
    obj = work_object(_work())
    obj["spec"].update(change)
    with pytest.raises(WorkRefused, match=field.replace(".", r"\.")):
        cluster_work(obj, "edge-7", 10)


def test_the_agents_report_is_what_the_hub_reads_back() -> None:
    state = SyncState("r1", applied=True, attempts=2, drift=("v1 ConfigMap shop/c",))
    live = [{**CM, "metadata": {"name": "c", "namespace": "shop", "managedFields": [{}]}}]
    status = work_status(state, 3, live, "2026-12-07T00:00:00Z")
    taken = reported({"status": json.loads(json.dumps(status))})
    assert taken.problem is None
    assert taken.status is not None
    assert (taken.status.revision, taken.status.observed_generation) == ("r1", 3)
    assert taken.status.applied
    assert taken.status.drift == ["v1 ConfigMap shop/c"]
    assert taken.status.objects == [{**CM, "metadata": {"name": "c", "namespace": "shop"}}]


@pytest.mark.parametrize(
    ("status", "field"),
    [
        ({"attempts": -1}, "status.attempts"),
        ({"error": "x" * 5000}, "status.error"),
        ({"drift": ["x"] * 101}, "status.drift"),
        ({"objects": [CM] * 201}, "status.objects"),
        ({"applied": "maybe"}, "status.applied"),
        ({"takeover": True}, "status.takeover"),
    ],
)
def test_a_hostile_report_is_refused_whole_naming_the_field(
    status: dict[str, Any], field: str
) -> None:
    taken = reported({"status": {"revision": "r1", "applied": True, **status}})
    assert taken.status is None
    assert taken.problem is not None
    assert taken.problem.startswith(f"the agent's report is refused: {field}")


def test_no_report_yet_is_nothing_to_take() -> None:
    assert reported({"spec": {}}) == reported({"status": {}})
    assert reported({}).status is None
    assert reported({}).problem is None


def test_reported_copies_leave_out_the_bulky_parts_and_stay_bounded() -> None:
    big = "x" * 4096
    annotations = {"kubectl.kubernetes.io/last-applied-configuration": big, "keep": "1"}
    one = {**CM, "metadata": {"name": "c", "namespace": "s", "annotations": annotations}}
    assert reported_objects([one])[0]["metadata"]["annotations"] == {"keep": "1"}
    many = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": f"d{i}", "namespace": "s", "generation": 2, "labels": {"a": big}},
            "spec": {"template": big},
            "status": {"readyReplicas": 1},
        }
        for i in range(100)
    ]
    cut = reported_objects(many)
    assert len(json.dumps(cut)) <= REPORT_BYTES
    assert cut[0] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "status": {"readyReplicas": 1},
        "metadata": {"name": "d0", "namespace": "s", "generation": 2},
    }
    assert len(reported_objects(many * 3)) == 200
