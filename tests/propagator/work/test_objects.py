from __future__ import annotations

from typing import Any

from propagator.work.objects import (
    APP_LABEL,
    MEMBER_LABEL,
    Owner,
    app_label_value,
    member_label_value,
    member_selector,
    owner_named,
    revision_of,
    strip_server_fields,
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


def test_only_the_stamp_with_the_application_uid_owns_an_object() -> None:
    web = Owner("shop", "web", "uid-1")
    mine = web.stamp(cm("keep"), "r1", "m1")
    assert web.owns(mine)
    assert mine["metadata"]["labels"][APP_LABEL] == app_label_value("shop", "web")
    assert mine["metadata"]["labels"][MEMBER_LABEL] == "m1"
    # another application, or one of the same name created anew (another UID)
    assert not Owner("shop", "api", "uid-2").owns(mine)
    assert not Owner("shop", "web", "uid-3").owns(mine)
    # a label alone (anyone can set one) is not ownership
    forged = cm("forged")
    forged["metadata"]["labels"] = {APP_LABEL: app_label_value("shop", "web")}
    assert not web.owns(forged)
    assert owner_named(mine) == "application shop/web"
    assert owner_named(forged) == "an application (label only)"
    assert owner_named(cm("manual")) is None
    # what the platform keeps for a tenant is named as the platform's
    quota = cm("propagator-tenant-shop")
    quota["metadata"]["labels"] = {APP_LABEL: app_label_value("tenant", "shop")}
    quota["metadata"]["annotations"] = {"propagator.io/tenant": "shop"}
    assert owner_named(quota) == "the platform (it keeps it for TenantQuota shop)"


def test_kinds_name_api_version_and_kind() -> None:
    from propagator.work.objects import kind_of, kinds_of

    assert kind_of({"apiVersion": "apps/v1", "kind": "Deployment"}) == "apps/v1/Deployment"
    assert kinds_of([{"apiVersion": "v1", "kind": "ConfigMap"}] * 2) == {"v1/ConfigMap"}


def test_the_member_label_names_the_member_cluster_within_a_label_values_length() -> None:
    assert member_label_value("member-1") == "member-1"
    assert member_selector("member-1") == f"{APP_LABEL},{MEMBER_LABEL}=member-1"
    long_a, long_b = "a" * 63 + ".eu", "a" * 63 + ".us"
    assert len(member_label_value(long_a)) <= 63
    assert member_label_value(long_a) != member_label_value(long_b)
    assert member_label_value(long_a) == member_label_value(long_a)
