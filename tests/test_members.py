"""What a member's watch caches keep of an object."""

from __future__ import annotations

from propagator.propagation.resources import APP_LABEL, Owner
from propagator.runtime.members import cached_form


def test_a_namespace_that_is_not_ours_is_cached_as_its_name_only() -> None:
    theirs = {
        "metadata": {"name": "team-b", "resourceVersion": "9", "labels": {"x": "y"}},
        "spec": {"finalizers": ["kubernetes"]},
    }
    assert cached_form(theirs, "v1", "Namespace", APP_LABEL) == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team-b", "resourceVersion": "9"},
    }
    ours = Owner("shop", "web", "").stamp(
        {"metadata": {"name": "shop", "managedFields": [{}]}}, "r1", "m1"
    )
    kept = cached_form(ours, "v1", "Namespace", APP_LABEL)
    assert kept["metadata"]["annotations"] == ours["metadata"]["annotations"]
    assert "managedFields" not in kept["metadata"]
