"""What a member's watch caches keep of an object."""

from __future__ import annotations

from propagator.runtime.memberregistry import Applied, AppliedObjects, cached_form
from propagator.work.objects import Owner


def test_a_cached_object_keeps_all_but_its_managed_fields() -> None:
    ours = Owner("shop", "web", "").stamp(
        {"metadata": {"name": "shop", "managedFields": [{}]}}, "r1", "m1"
    )
    kept = cached_form(ours, "v1", "Namespace")
    assert kept["metadata"]["annotations"] == ours["metadata"]["annotations"]
    assert kept["metadata"]["labels"] == ours["metadata"]["labels"]
    assert "managedFields" not in kept["metadata"]
    assert (kept["apiVersion"], kept["kind"]) == ("v1", "Namespace")


def test_applied_objects_are_found_by_application_and_forgotten_when_deleted() -> None:
    applied = AppliedObjects()
    web = ("v1", "ConfigMap", "shop", "web")
    db = ("v1", "ConfigMap", "shop", "db")
    record = Applied({"kind": "ConfigMap"}, "f1")
    applied.record("shop/web", web, record)
    applied.record("shop/web", db, record)
    applied.record("shop/db", db, record)  # taken over by another application
    assert applied.of("shop/web") == [(web, record)]
    assert applied.of("shop/db") == [(db, record)]
    assert applied.get(db) is record
    applied.forget(web)
    assert applied.of("shop/web") == []
    assert applied.get(web) is None
    assert len(applied) == 1
