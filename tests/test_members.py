"""What a member's watch caches keep of an object."""

from __future__ import annotations

from propagator.propagation.resources import Owner
from propagator.runtime.members import cached_form


def test_a_cached_object_keeps_all_but_its_managed_fields() -> None:
    ours = Owner("shop", "web", "").stamp(
        {"metadata": {"name": "shop", "managedFields": [{}]}}, "r1", "m1"
    )
    kept = cached_form(ours, "v1", "Namespace")
    assert kept["metadata"]["annotations"] == ours["metadata"]["annotations"]
    assert kept["metadata"]["labels"] == ours["metadata"]["labels"]
    assert "managedFields" not in kept["metadata"]
    assert (kept["apiVersion"], kept["kind"]) == ("v1", "Namespace")
