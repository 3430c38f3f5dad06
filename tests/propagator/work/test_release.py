"""What an application leaves to its members: which fields, the object applied without
them, and the hand-over that keeps their values (work.release)."""

from __future__ import annotations

import copy
import json
from typing import Any

from api.memberowned import MemberOwnedField, ObjectMatch
from propagator.interpreter.registry import Interpreters
from propagator.work.release import (
    Release,
    autoscaled,
    handover,
    owned_by,
    read,
    scale_fields,
    without,
    without_owned,
)


def _deployment(name: str = "web", replicas: int = 3) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "labels": {"app": name, "propagator.io/application": "x"},
        },
        "spec": {
            "replicas": replicas,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "nginx:1",
                            "resources": {"requests": {"cpu": "1"}},
                        },
                        {"name": "side", "image": "envoy:1"},
                    ]
                },
            },
        },
    }


def _hpa(target: str) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": target, "namespace": "shop"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "minReplicas": 2,
            "maxReplicas": 10,
        },
    }


def _managed(manager: str, fields: dict[str, Any], operation: str = "Apply") -> dict[str, Any]:
    return {"manager": manager, "operation": operation, "fieldsV1": fields}


def test_the_replicas_of_a_workload_its_own_autoscaler_scales_are_left_to_it() -> None:
    fields = scale_fields([_deployment()], Interpreters())
    release = Release((), fields).on([_deployment("web"), _deployment("api"), _hpa("web")])
    assert release.pointers(_deployment("web")) == ["/spec/replicas"]
    assert release.pointers(_deployment("api")) == []


def test_rules_release_by_pointer_and_manager_for_the_objects_they_match() -> None:
    rule = MemberOwnedField(
        target=ObjectMatch(group="apps", kind="Deployment", name="web"),
        json_pointers=["/spec/template/spec/containers/0/resources"],
        managers=["vpa-recommender"],
    )
    release = Release((rule,))
    assert release.pointers(_deployment("web")) == ["/spec/template/spec/containers/0/resources"]
    assert release.managers(_deployment("web")) == {"vpa-recommender"}
    assert release.pointers(_deployment("api")) == []
    assert not release.managers(_deployment("api"))


def test_without_removes_what_is_released_and_never_the_stamp() -> None:
    obj = _deployment()
    out = without(
        obj,
        [
            "/spec/replicas",
            "/spec/template/spec/containers/1",
            "/spec/missing/field",
            "/metadata/labels/propagator.io~1application",
        ],
    )
    assert "replicas" not in out["spec"]
    assert [c["name"] for c in out["spec"]["template"]["spec"]["containers"]] == ["app"]
    assert out["metadata"]["labels"]["propagator.io/application"] == "x"
    assert obj == _deployment()  # a copy


def test_fields_a_named_manager_owns_are_left_out_but_merge_keys_and_stamps_stay() -> None:
    live_fields = {
        "f:metadata": {"f:labels": {"f:propagator.io/application": {}, "f:app": {}}},
        "f:spec": {
            "f:replicas": {},
            "f:template": {
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"app"}': {
                            ".": {},
                            "f:name": {},
                            "f:resources": {"f:requests": {}},
                        }
                    }
                }
            },
        },
    }
    obj = _deployment()
    without_owned(obj, live_fields)
    assert obj["metadata"]["labels"] == {"propagator.io/application": "x"}
    assert "replicas" not in obj["spec"]
    app, side = obj["spec"]["template"]["spec"]["containers"]
    assert app == {"name": "app", "image": "nginx:1", "resources": {}}
    assert side == {"name": "side", "image": "envoy:1"}


def test_owned_by_reads_the_named_managers_entries() -> None:
    live = {
        "metadata": {
            "managedFields": [
                _managed("propagator", {"f:spec": {}}),
                _managed("vpa", {"f:spec": {"f:x": {}}}, "Update"),
            ]
        }
    }
    assert owned_by(live, ["vpa"]) == [{"f:spec": {"f:x": {}}}]


def test_handover_keeps_the_live_value_of_what_propagator_alone_would_drop() -> None:
    live = _deployment(replicas=7)
    live["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2"}}
    ours: dict[str, Any] = {
        "f:spec": {
            "f:replicas": {},
            "f:template": {
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"app"}': {"f:resources": {"f:requests": {"f:cpu": {}}}}
                    }
                }
            },
        }
    }
    body = handover(live, [ours], ["/spec/replicas", "/spec/template/spec/containers/0/resources"])
    assert body == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "replicas": 7,
            "template": {
                "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "2"}}}]}
            },
        },
    }


def test_no_handover_when_propagator_no_longer_owns_the_field() -> None:
    # The autoscaler changed the replicas: it owns them (an update takes the field).
    assert handover(_deployment(), [{"f:metadata": {"f:name": {}}}], ["/spec/replicas"]) is None
    assert handover(_deployment(), [], ["/spec/replicas"]) is None


def test_a_field_inside_an_atomic_value_is_handed_over_whole() -> None:
    live = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c"},
        "spec": {"args": ["a", "b"]},
    }
    body = handover(live, [{"f:spec": {"f:args": {}}}], ["/spec/args/1"])
    assert body is not None
    assert body["spec"] == {"args": ["a", "b"]}


def test_autoscaled_names_the_targets_of_the_autoscalers() -> None:
    assert autoscaled([_hpa("web"), _deployment()], "") == {("apps", "Deployment", "shop", "web")}


def test_read_tells_absent_from_null() -> None:
    obj = {"a": {"b": None}, "l": [1]}
    assert read(obj, "/a/b") is None
    assert read(obj, "/a/c") is not None
    assert read(obj, "/l/0") == 1
    assert json.dumps(copy.deepcopy(obj))  # unchanged, plain JSON


def test_a_members_hostile_managed_fields_change_nothing_and_raise_nothing() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    hostile: dict[str, Any] = {
        "f:spec": {
            "f:template": {
                "f:spec": {
                    "f:containers": {
                        f"k:{deep}": {"f:image": {}},
                        "k:" + '{"name":"' + "x" * 10_000 + '"}': {"f:image": {}},
                        'k:["name"]': {"f:image": {}},
                        "k:not json": {"f:image": {}},
                        "i:99999999999999999999": {"f:image": {}},
                        'v:{"a":1}': "not a tree",
                    }
                }
            },
            "f:replicas": "not a tree",
        }
    }
    obj = _deployment()
    without_owned(obj, hostile)
    assert obj == _deployment()
    live = {**_deployment(), "metadata": {**_deployment()["metadata"], "managedFields": []}}
    pointers = ["/spec/template/spec/containers/0/image", "/spec/replicas"]
    assert handover(live, [hostile], pointers) is None
