"""spec.memberOwned refuses what Propagator must keep, naming it (api.memberowned)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from api.memberowned import MemberOwnedField, protected


@pytest.mark.parametrize(
    "pointer",
    [
        "/apiVersion",
        "/kind",
        "/metadata",
        "/metadata/name",
        "/metadata/namespace",
        "/metadata/ownerReferences",
        "/metadata/labels",
        "/metadata/annotations",
        "/metadata/labels/propagator.io~1application",
        "/metadata/annotations/propagator.io~1owner-uid",
        "/spec/template/metadata/labels",
        "/spec/template/metadata/labels/propagator.io~1track",
        "/metadata/labels/pod-security.kubernetes.io~1enforce",
    ],
)
def test_a_field_propagator_relies_on_is_refused_by_name(pointer: str) -> None:
    assert protected(pointer)
    with pytest.raises(ValidationError, match=f"jsonPointers: {pointer} may not be released"):
        MemberOwnedField(json_pointers=[pointer])


@pytest.mark.parametrize(
    "pointer",
    ["/spec/replicas", "/metadata/labels/team", "/metadata/annotations/note", "/data/key"],
)
def test_ordinary_fields_may_be_released(pointer: str) -> None:
    assert not protected(pointer)
    assert MemberOwnedField(json_pointers=[pointer]).json_pointers == [pointer]


def test_propagators_own_field_managers_are_refused() -> None:
    with pytest.raises(ValidationError, match="Propagator's own managers"):
        MemberOwnedField(managers=["propagator"])


def test_a_rule_names_pointers_or_managers() -> None:
    with pytest.raises(ValidationError, match="name jsonPointers or managers"):
        MemberOwnedField()
