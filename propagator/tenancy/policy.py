"""Who may write what, where: the tenant boundary an application's rendered objects must
stay inside before anything is written anywhere.

A tenant is a TenantQuota: its hub namespaces, the member namespaces its applications may
write (``spec.destinations``, default: the application's own hub namespace name) and the
cluster-scoped kinds it may create (``spec.clusterScopedKinds``, default none; a Namespace
only when it is one of the destinations). A hub namespace that belongs to no tenant gets
that default. Above every tenant, the platform's deny list (kinds that bind or escalate,
admission webhooks, CRDs, API services, ``kube-*`` namespaces) that only applications in a
platform namespace may propagate.

Pure: the caller says which kinds are namespaced (:data:`Scope`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from propagator.conditions import some_of

Scope = Callable[[str, str], bool | None]
"""scope(apiVersion, kind): True when namespaced, False when cluster-scoped, None unknown."""

GroupKind = tuple[str, str]

DEFAULT_DENIED_KINDS = (
    "rbac.authorization.k8s.io/ClusterRole",
    "rbac.authorization.k8s.io/ClusterRoleBinding",
    "admissionregistration.k8s.io/MutatingWebhookConfiguration",
    "admissionregistration.k8s.io/ValidatingWebhookConfiguration",
    "admissionregistration.k8s.io/ValidatingAdmissionPolicy",
    "admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding",
    "admissionregistration.k8s.io/MutatingAdmissionPolicy",
    "admissionregistration.k8s.io/MutatingAdmissionPolicyBinding",
    "apiextensions.k8s.io/CustomResourceDefinition",
    "apiregistration.k8s.io/APIService",
    "certificates.k8s.io/CertificateSigningRequest",
    "propagator.io/*",
)
"""``group/Kind`` (``*`` for every kind of a group; ``core`` for the core group)."""
DEFAULT_DENIED_NAMESPACES = ("kube-*",)


def group_of(api_version: str) -> str:
    """The API group of an apiVersion (``""`` for the core group)."""
    return api_version.rpartition("/")[0]


def parse_group_kind(text: str) -> GroupKind:
    """``group/Kind`` (``core/ConfigMap`` or ``/ConfigMap`` for the core group)."""
    group, slash, kind = text.strip().rpartition("/")
    if not slash or not kind:
        raise ValueError(f"{text!r} is not group/Kind (e.g. rbac.authorization.k8s.io/ClusterRole)")
    return ("" if group == "core" else group), kind


@dataclass(frozen=True)
class Platform:
    """The rules no tenant can lift (controller settings)."""

    namespaces: frozenset[str]
    """Hub namespaces whose applications may propagate anything."""
    denied_kinds: frozenset[GroupKind]
    denied_namespaces: tuple[str, ...]
    """Member namespace patterns (fnmatch) only the platform writes."""

    def denies_kind(self, group: str, kind: str) -> bool:
        return (group, kind) in self.denied_kinds or (group, "*") in self.denied_kinds

    def reserves(self, namespace: str) -> str | None:
        """The pattern that reserves ``namespace`` for the platform, if any."""
        return next((p for p in self.denied_namespaces if fnmatch.fnmatchcase(namespace, p)), None)


@dataclass(frozen=True)
class TenantPolicy:
    """What the applications of one hub namespace may write on the members."""

    tenant: str | None
    """The TenantQuota's name; None: the namespace belongs to no tenant (default policy)."""
    platform: bool
    """The application lives in a platform namespace: nothing is refused."""
    destinations: frozenset[str]
    cluster_scoped_kinds: frozenset[GroupKind]

    @property
    def who(self) -> str:
        if self.platform:
            return "platform namespace"
        return f"tenant {self.tenant}" if self.tenant else "no tenant (default policy)"


def policy_for(namespace: str, quota: Mapping[str, Any] | None, platform: Platform) -> TenantPolicy:
    """The policy of the applications in hub ``namespace`` owned by ``quota`` (or none)."""
    spec = (quota or {}).get("spec") or {}
    destinations = spec.get("destinations") or [namespace]
    kinds = frozenset(
        (str(k.get("group", "")), str(k.get("kind"))) for k in spec.get("clusterScopedKinds") or []
    )
    return TenantPolicy(
        tenant=(quota or {}).get("metadata", {}).get("name"),
        platform=namespace in platform.namespaces,
        destinations=frozenset(destinations),
        cluster_scoped_kinds=kinds,
    )


class Forbidden(Exception):
    """Objects outside the tenant's boundary: nothing of the application is written."""

    def __init__(self, policy: TenantPolicy, found: list[Refusal]) -> None:
        shown = some_of([str(r) for r in found], "; ", limit=5)
        super().__init__(f"{len(found)} object(s) outside {policy.who}: {shown}")
        self.policy = policy
        self.refusals = found


@dataclass(frozen=True)
class Refusal:
    """One object outside the boundary: which, and the rule it breaks."""

    object: str
    rule: str

    def __str__(self) -> str:
        return f"{self.object}: {self.rule}"


def describe(obj: Mapping[str, Any]) -> str:
    """``apps/v1 Deployment kube-system/coredns`` (bounded: names come from users)."""
    meta = obj.get("metadata") or {}
    where = f"{meta.get('namespace')}/" if meta.get("namespace") else ""
    text = f"{obj.get('apiVersion')} {obj.get('kind')} {where}{meta.get('name')}"
    return text if len(text) <= 200 else text[:200] + "…"


def refusals(
    objects: Iterable[Mapping[str, Any]],
    policy: TenantPolicy,
    platform: Platform,
    scope: Scope,
    default_namespace: str,
) -> list[Refusal]:
    """Every object ``policy`` does not allow, with the rule (empty: all allowed)."""
    if policy.platform:
        return []
    found = []
    for obj in objects:
        if rule := _broken_rule(obj, policy, platform, scope, default_namespace):
            found.append(Refusal(describe(obj), rule))
    return found


def _broken_rule(
    obj: Mapping[str, Any],
    policy: TenantPolicy,
    platform: Platform,
    scope: Scope,
    default_namespace: str,
) -> str | None:
    api_version, kind = str(obj.get("apiVersion")), str(obj.get("kind"))
    group = group_of(api_version)
    meta = obj.get("metadata") or {}
    shown = f"{group or 'core'}/{kind}"
    if platform.denies_kind(group, kind):
        return f"kind {shown} is reserved for the platform (PROPAGATOR_DENIED_KINDS)"
    if kind == "RoleBinding" and group == "rbac.authorization.k8s.io":
        role = obj.get("roleRef") or {}
        if role.get("kind") != "Role":
            return (
                f"a RoleBinding may bind a Role of its own namespace, not the "
                f"{role.get('kind')} {role.get('name')!r} (reserved for the platform)"
            )
    namespaced = scope(api_version, kind)
    namespace = meta.get("namespace")
    if kind == "Namespace" and group == "":
        namespaced, namespace = False, None
        target = str(meta.get("name"))
        if reserved := platform.reserves(target):
            return f"namespace {target} is reserved for the platform ({reserved})"
        if target not in policy.destinations:
            return f"namespace {target} is not among the destinations {_listed(policy)}"
        return None
    if namespaced is None and not namespace:
        return (
            f"the hub does not serve {api_version} {kind}, so its scope is unknown: "
            "set metadata.namespace"
        )
    if namespaced is False:
        if (group, kind) not in policy.cluster_scoped_kinds:
            return f"cluster-scoped kind {shown} is not among the tenant's clusterScopedKinds"
        return None
    target = str(namespace or default_namespace)
    if reserved := platform.reserves(target):
        return f"namespace {target} is reserved for the platform ({reserved})"
    if target not in policy.destinations:
        return f"namespace {target} is not among the destinations {_listed(policy)}"
    return None


def _listed(policy: TenantPolicy) -> str:
    return "[" + ", ".join(sorted(policy.destinations)) + "]"
