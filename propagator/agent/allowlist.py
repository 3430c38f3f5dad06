"""What a member lets its agent write, set on the member's side: a hub that sends more is
refused before anything is written (defense in depth: a compromised hub cannot take the
member over beyond this). Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from api.common import DNS_LABEL
from propagator.conditions import some_of
from propagator.tenancy.policy import describe


class AllowlistError(ValueError):
    """An allowlist entry that cannot be read (names the flag and value)."""


def group_kind(obj: Mapping[str, Any]) -> str:
    """``Kind`` for the core group, ``Kind.group`` otherwise (as ``kubectl`` names them)."""
    api_version, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")
    group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
    return f"{kind}.{group}" if group else kind


@dataclass(frozen=True)
class Allowlist:
    """The namespaces and kinds the agent may write (empty: any)."""

    namespaces: frozenset[str] = frozenset()
    kinds: frozenset[str] = frozenset()
    """As :func:`group_kind` names them: ``Deployment.apps``, ``ConfigMap``."""

    @classmethod
    def of(cls, namespaces: Iterable[str], kinds: Iterable[str]) -> Allowlist:
        """From the agent's flags; raises AllowlistError naming a malformed entry."""
        for namespace in namespaces:
            if not DNS_LABEL.fullmatch(namespace):
                raise AllowlistError(
                    "PROPAGATOR_AGENT_ALLOW_NAMESPACES / --agent-allow-namespaces: "
                    f"{namespace!r} is not a namespace name (a DNS label)"
                )
        for kind in kinds:
            name = kind.split(".", 1)[0]
            if not name or not name[0].isupper() or not name.isalnum():
                raise AllowlistError(
                    f"PROPAGATOR_AGENT_ALLOW_KINDS / --agent-allow-kinds: {kind!r}: expected "
                    "Kind or Kind.group (e.g. ConfigMap, Deployment.apps)"
                )
        return cls(frozenset(namespaces), frozenset(kinds))

    def refusals(self, objects: Sequence[Mapping[str, Any]], namespace: str) -> list[str]:
        """The objects outside what is allowed, each with why (``namespace``: of those that
        name none). A Namespace object is judged by its own name."""
        found = []
        for obj in objects:
            meta = obj.get("metadata") or {}
            kind = group_kind(obj)
            if self.kinds and kind not in self.kinds:
                found.append(f"{describe(obj)}: kind {kind} is not allowed")
                continue
            where = meta.get("name") if kind == "Namespace" else meta.get("namespace")
            where = str(where or namespace)
            if self.namespaces and where not in self.namespaces:
                found.append(f"{describe(obj)}: namespace {where} is not allowed")
        return found

    def explain(self, refusals: Sequence[str]) -> str:
        """The error a refused Work reports."""
        allowed = []
        if self.namespaces:
            allowed.append("namespaces " + ", ".join(sorted(self.namespaces)))
        if self.kinds:
            allowed.append("kinds " + ", ".join(sorted(self.kinds)))
        return (
            f"refused by the member's agent: {len(refusals)} object(s) outside what it allows "
            f"({'; '.join(allowed)}): {some_of(list(refusals), '; ', 5)}"
        )
