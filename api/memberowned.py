"""Fields an application leaves to the member after creating an object: by JSON pointer
or by the field manager that owns them there (Argo CD's ``ignoreDifferences``, done with
server-side apply's ownership)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field, field_validator

from api.model import KubeModel, Rule

OWN_MANAGERS = frozenset({"propagator", "propagator-tenancy", "propagator-released"})
"""The field managers Propagator writes as: never a member's."""
PROTECTED_PREFIXES = ("propagator.io~1", "pod-security.kubernetes.io~1")
"""Label and annotation keys (as pointer tokens) the canary, tenancy and ownership rely on."""

Pointer = Annotated[str, Field(max_length=256, pattern=r"^(/([^/~]|~[01])*)+$")]
Manager = Annotated[str, Field(min_length=1, max_length=128)]

_PROTECTED_CEL = (
    "p == '/apiVersion' || p == '/kind' || "
    "(p.startsWith('/metadata') && !p.startsWith('/metadata/labels/') && "
    "!p.startsWith('/metadata/annotations/')) || "
    "p.endsWith('/labels') || p.endsWith('/annotations') || "
    "p.contains('/propagator.io~1') || p.contains('/pod-security.kubernetes.io~1')"
)
_ALLOWED = (
    "a field Propagator keeps is not released: apiVersion, kind, metadata other than "
    "single labels and annotations, whole labels or annotations maps, and keys under "
    "propagator.io/ or pod-security.kubernetes.io/"
)


def protected(pointer: str) -> bool:
    """Whether ``pointer`` names something an application may not release (the object's
    identity, its whole label or annotation maps, or the keys ownership, canaries and
    tenancy rely on). Mirrors the hub's CEL rule."""
    if pointer in ("/apiVersion", "/kind"):
        return True
    if pointer.startswith("/metadata") and not pointer.startswith(
        ("/metadata/labels/", "/metadata/annotations/")
    ):
        return True
    if pointer.endswith(("/labels", "/annotations")):
        return True
    return any(f"/{prefix}" in pointer for prefix in PROTECTED_PREFIXES)


class ObjectMatch(KubeModel):
    """Which objects: unset fields match any."""

    group: str | None = Field(default=None, max_length=253)
    """API group ("" for the core group), e.g. ``apps``."""
    kind: str | None = Field(default=None, max_length=63)
    """Kind, e.g. ``Deployment``."""
    name: str | None = Field(default=None, max_length=253)
    """metadata.name."""
    namespace: str | None = Field(default=None, max_length=63)
    """metadata.namespace on the member."""

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj`` (an object as applied, namespace set when it has one) matches."""
        api_version = str(obj.get("apiVersion") or "")
        group = api_version.rpartition("/")[0]
        meta = obj.get("metadata") or {}
        return (
            (self.group is None or self.group == group)
            and (self.kind is None or self.kind == obj.get("kind"))
            and (self.name is None or self.name == meta.get("name"))
            and (self.namespace is None or self.namespace == meta.get("namespace"))
        )


class MemberOwnedField(KubeModel):
    """Fields Propagator sets when it creates an object and then leaves to the member:
    after the first write they are left out of what Propagator applies (so the member's
    field manager owns them), and a change to them is not drift."""

    target: ObjectMatch = Field(default_factory=ObjectMatch)
    """The objects this applies to (default: every object)."""
    json_pointers: list[Pointer] = Field(default_factory=list, max_length=32)
    """Fields by JSON pointer, e.g. ``/spec/replicas`` or
    ``/spec/template/spec/containers/0/resources``."""
    managers: list[Manager] = Field(default_factory=list, max_length=16)
    """Field managers on the member (as ``metadata.managedFields`` names them, e.g.
    ``vpa-recommender``): every field they own there is theirs."""

    rules = (
        Rule(
            cel="(has(self.jsonPointers) && size(self.jsonPointers) > 0) || "
            "(has(self.managers) && size(self.managers) > 0)",
            message="name jsonPointers or managers",
            check=lambda m: bool(m.json_pointers or m.managers),
        ),
        Rule(
            cel=f"!has(self.jsonPointers) || self.jsonPointers.all(p, !({_PROTECTED_CEL}))",
            message=f"jsonPointers: {_ALLOWED}",
            message_expression="'jsonPointers: ' + "
            f"self.jsonPointers.filter(p, {_PROTECTED_CEL})[0] + ' may not be released; "
            f"{_ALLOWED}'",
            check=lambda m: not any(protected(p) for p in m.json_pointers),
        ),
        Rule(
            cel=f"!has(self.managers) || self.managers.all(m, !(m in {sorted(OWN_MANAGERS)!r}))",
            message=f"managers: Propagator's own managers ({', '.join(sorted(OWN_MANAGERS))}) "
            "are not a member's",
            check=lambda m: not OWN_MANAGERS.intersection(m.managers),
        ),
    )

    @field_validator("json_pointers")
    @classmethod
    def _allowed(cls, pointers: list[str]) -> list[str]:
        # Offline, the message names the pointer as the hub's messageExpression does.
        for pointer in pointers:
            if protected(pointer):
                raise ValueError(f"jsonPointers: {pointer} may not be released; {_ALLOWED}")
        return pointers
