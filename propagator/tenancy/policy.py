"""Who may write what, where: the tenant boundary an application's rendered objects must
stay inside before anything is written anywhere.

A tenant is a TenantQuota: its hub namespaces, the member namespaces its applications may
write (``spec.destinations``, default: the application's own hub namespace name), the
cluster-scoped kinds it may create (``spec.clusterScopedKinds``, default none; a Namespace
only when it is one of the destinations), the Pod Security level its pod templates meet
(``spec.podSecurity``, default the platform's) and how it may expose them
(``spec.services``, default ClusterIP Services only). A hub namespace that belongs to no
tenant gets those defaults. Above every tenant, the platform's deny list (kinds that bind or
escalate, admission webhooks, CRDs, API services, ``kube-*`` namespaces) and the kinds it
owns inside tenant namespaces (quotas, limit ranges, network policies), which only
applications in a platform namespace may propagate, and the namespace labels it keeps.

Pure: the caller says which kinds are namespaced (:data:`Scope`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from api.charts import TEMPLATE_ANNOTATION
from propagator.conditions import some_of
from propagator.interpreter.registry import Interpreters
from propagator.tenancy.exposure import Exposure, exposure_problem
from propagator.tenancy.namespacelabels import platform_label
from propagator.tenancy.podsecurity import LEVELS, Level
from propagator.tenancy.podtemplates import pod_security_problem

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
DEFAULT_PLATFORM_OWNED_KINDS = (
    "core/ResourceQuota",
    "core/LimitRange",
    "networking.k8s.io/NetworkPolicy",
)
"""Kinds inside tenant namespaces that are the platform's (the TenantQuota's quota and
namespace defaults): a tenant's own would undo them."""


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
    owned_kinds: frozenset[GroupKind] = frozenset()
    """Kinds inside tenant namespaces only the platform writes."""
    pod_security_default: Level = "baseline"
    """The Pod Security level of tenants whose TenantQuota states none, and of
    applications that belong to no tenant."""
    privileged_allowed: bool = False
    """Whether a TenantQuota may state the ``privileged`` level."""

    def denies_kind(self, group: str, kind: str) -> bool:
        return (group, kind) in self.denied_kinds or (group, "*") in self.denied_kinds

    def owns_kind(self, group: str, kind: str) -> bool:
        return (group, kind) in self.owned_kinds or (group, "*") in self.owned_kinds

    def pod_security(self, asked: object) -> tuple[Level, str]:
        """The level a TenantQuota's ``spec.podSecurity.level`` gets, and why."""
        level = next((lv for lv in LEVELS if lv == asked), None)
        if level is None:
            return self.pod_security_default, "the platform default"
        if level == "privileged" and not self.privileged_allowed:
            return self.pod_security_default, (
                "the platform default: the TenantQuota asks privileged, which "
                "PROPAGATOR_POD_SECURITY_PRIVILEGED does not allow"
            )
        return level, "the TenantQuota's spec.podSecurity.level"

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
    pod_security: Level = "baseline"
    """The level every pod template must meet."""
    pod_security_source: str = "the platform default"
    """Where the level comes from (shown in refusals)."""
    exposure: Exposure = field(default_factory=Exposure)

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
    level, source = platform.pod_security((spec.get("podSecurity") or {}).get("level"))
    return TenantPolicy(
        tenant=(quota or {}).get("metadata", {}).get("name"),
        platform=namespace in platform.namespaces,
        destinations=frozenset(destinations),
        cluster_scoped_kinds=kinds,
        pod_security=level,
        pod_security_source=source,
        exposure=Exposure.of(spec.get("services")),
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


def _named(obj: Mapping[str, Any]) -> str:
    """``describe(obj)``, and the chart template it came from, if a chart rendered it."""
    template = ((obj.get("metadata") or {}).get("annotations") or {}).get(TEMPLATE_ANNOTATION)
    return describe(obj) + (f" (chart template {str(template)[:200]})" if template else "")


def refusals(
    objects: Iterable[Mapping[str, Any]],
    policy: TenantPolicy,
    platform: Platform,
    scope: Scope,
    default_namespace: str,
    interpreters: Interpreters | None = None,
) -> list[Refusal]:
    """Every object ``policy`` does not allow, with the rule (empty: all allowed);
    ``interpreters``: where custom workloads keep their pod templates."""
    if policy.platform:
        return []
    found = []
    for obj in objects:
        if rule := _broken_rule(obj, policy, platform, scope, default_namespace, interpreters):
            found.append(Refusal(_named(obj), rule))
    return found


def _broken_rule(
    obj: Mapping[str, Any],
    policy: TenantPolicy,
    platform: Platform,
    scope: Scope,
    default_namespace: str,
    interpreters: Interpreters | None,
) -> str | None:
    """The first rule ``obj`` breaks: where it goes, then what it runs or exposes."""
    if rule := misplaced(obj, policy, platform, scope, default_namespace):
        return rule
    if problem := pod_security_problem(obj, policy.pod_security, interpreters):
        return f"{problem} ({policy.pod_security_source})"
    return exposure_problem(obj, policy.exposure)


def misplaced(
    obj: Mapping[str, Any],
    policy: TenantPolicy,
    platform: Platform,
    scope: Scope,
    default_namespace: str,
) -> str | None:
    """The placement rule ``obj`` breaks (its kind, its namespace), or None; what it runs
    and exposes aside."""
    api_version, kind = str(obj.get("apiVersion")), str(obj.get("kind"))
    group = group_of(api_version)
    meta = obj.get("metadata") or {}
    shown = f"{group or 'core'}/{kind}"
    if platform.denies_kind(group, kind):
        return f"kind {shown} is reserved for the platform (PROPAGATOR_DENIED_KINDS)"
    if platform.owns_kind(group, kind):
        return (
            f"kind {shown} inside tenant namespaces is the platform's "
            "(PROPAGATOR_PLATFORM_OWNED_KINDS; a TenantQuota's spec.hard and "
            "spec.namespaceDefaults set them)"
        )
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
        labels = meta.get("labels")
        labels = labels if isinstance(labels, Mapping) else {}
        if taken := sorted(str(k) for k in labels if platform_label(str(k))):
            return (
                f"namespace label {some_of(taken, ', ', 3)} is the platform's (the tenant's "
                "Pod Security level comes from its TenantQuota's spec.podSecurity)"
            )
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
