from __future__ import annotations

from typing import Any

from propagator.propagation.resources import (
    APP_LABEL,
    app_label_value,
    owned_by,
    revision_of,
    stamp,
    strip_server_fields,
    to_prune,
)


def cm(name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "shop"},
        "data": data,
    }


def test_server_fields_are_stripped() -> None:
    live = {**cm("c", a="1"), "status": {"x": 1}}
    live["metadata"].update(
        uid="u",
        resourceVersion="7",
        generation=2,
        managedFields=[{}],
        creationTimestamp="t",
        annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}", "keep": "me"},
    )
    assert strip_server_fields(live) == {
        **cm("c", a="1"),
        "metadata": {"name": "c", "namespace": "shop", "annotations": {"keep": "me"}},
    }
    assert live["metadata"]["uid"] == "u"  # the original is untouched


def test_revision_follows_content_not_key_order() -> None:
    a, b = cm("a", x="1"), cm("b")
    assert revision_of([a, b]) == revision_of([b, dict(reversed(list(a.items())))])
    assert revision_of([a, b]) != revision_of([cm("a", x="2"), b])


def test_stamped_objects_are_owned_and_pruned_when_no_longer_wanted() -> None:
    mine = [stamp(cm(n), "shop", "web", "r1") for n in ("keep", "gone")]
    theirs = stamp(cm("other"), "shop", "api", "r1")
    unmanaged = cm("manual")
    assert all(owned_by(o, "shop", "web") for o in mine)
    assert not owned_by(theirs, "shop", "web")
    assert mine[0]["metadata"]["labels"][APP_LABEL] == app_label_value("shop", "web")
    assert to_prune([*mine, theirs, unmanaged], [cm("keep")], "shop", "web") == [
        ("v1", "ConfigMap", "shop", "gone")
    ]


def test_kinds_name_api_version_and_kind() -> None:
    from propagator.propagation.resources import kind_of, kinds_of

    assert kind_of({"apiVersion": "apps/v1", "kind": "Deployment"}) == "apps/v1/Deployment"
    assert kinds_of([{"apiVersion": "v1", "kind": "ConfigMap"}] * 2) == {"v1/ConfigMap"}
