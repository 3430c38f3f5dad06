"""The platform's part of every member namespace a tenant's applications write: the Pod
Security labels (so the member's own admission refuses what the hub would: the backstop),
the tenant label, and the tenant's default LimitRange and NetworkPolicy (TenantQuota
``spec.namespaceDefaults``). A namespace written by an application of no tenant is left
as it is (it may be shared with what the member runs otherwise, such as ``default``): the
hub's check holds such applications to the platform's default level.

Written before a sync writes into the namespace (the labels with a field manager of their
own, so an application that brings its Namespace never owns them), and kept: a change to
them on the member (a label edited, a default deleted) or to the TenantQuota writes them
again.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from kube.discovery import UnknownKind
from kube.errors import ApiError
from kube.informer import Informer
from kube.keys import KindKey
from propagator.runtime.bounded import each
from propagator.runtime.memberregistry import NAMESPACES, Caches, Member
from propagator.runtime.ownership import Hold, always
from propagator.runtime.workqueue import WorkQueue
from propagator.tenancy.memberquota import namespaces_written
from propagator.tenancy.namespacelabels import namespace_labels, platform_object_name
from propagator.tenancy.nsdefaults import LIMIT_RANGE, NETWORK_POLICY, limit_range, network_policy
from propagator.tenancy.policy import TenantPolicy
from propagator.work.objects import (
    APP_LABEL,
    MEMBER_LABEL,
    TENANT_ANNOTATION,
    app_label_value,
    member_label_value,
)
from propagator.work.table import ClusterWork

log = logging.getLogger(__name__)

FIELD_MANAGER = "propagator-tenancy"
"""Owns the platform's namespace labels (not the applications' field manager)."""
DEFAULT_KINDS = (LIMIT_RANGE, NETWORK_POLICY)
KEPT_KINDS = frozenset({NAMESPACES, *DEFAULT_KINDS})
"""Kinds whose member events may tell the keeper its part was undone."""

PolicyOf = Callable[[str], tuple[TenantPolicy, Mapping[str, Any] | None]]
"""policy_of(application key): its tenant policy and TenantQuota (None: no tenant)."""


@dataclass(frozen=True)
class Wanted:
    """The platform's part of one member namespace."""

    app: str = field(compare=False)
    """The application whose sync asked for it (the same for all of a tenant's)."""
    tenant: str
    labels: Mapping[str, str]
    objects: tuple[dict[str, Any], ...]
    """The default LimitRange and NetworkPolicy, unstamped."""


def wanted_for(app: str, policy: TenantPolicy, quota: Mapping[str, Any] | None) -> Wanted | None:
    """What the platform keeps in the namespaces ``app`` writes (None: nothing, the
    application is the platform's or of no tenant)."""
    tenant = policy.tenant
    if policy.platform or tenant is None:
        return None
    defaults = ((quota or {}).get("spec") or {}).get("namespaceDefaults") or {}
    name = platform_object_name(tenant)
    made = (limit_range(name, defaults), network_policy(name, tenant, defaults))
    objects = tuple(o for o in made if o is not None)
    return Wanted(app, tenant, namespace_labels(tenant, policy.pod_security), objects)


class NamespaceKeeper:
    """Writes and keeps the platform's part of members' namespaces."""

    def __init__(self, policy_of: PolicyOf, caches: Caches, timeout_s: float) -> None:
        self.policy_of = policy_of
        self.caches = caches
        self.timeout_s = timeout_s
        self.kept: dict[tuple[str, str], Wanted] = {}
        """(cluster, namespace) -> what was written there and is in force as far as the
        member's events tell."""
        self._asked: dict[tuple[str, str], str] = {}
        """(cluster, namespace) -> the application that asked for it last."""
        self.queue = WorkQueue(max_delay_s=30.0)
        self.hold: Hold = always
        """``hold(application key)``: whether it is this replica's (shards)."""
        """``cluster/namespace`` keys to write again."""
        self._locks: dict[tuple[str, str], anyio.Lock] = {}
        """One keep at a time per (cluster, namespace): a sync's and a rewrite's."""
        self._versions: dict[tuple[str, str, str, str, str], str] = {}
        """(cluster, apiVersion, kind, namespace, name) -> the resourceVersion of the
        keeper's last write of a default object."""

    async def guard(self, member: Member, work: ClusterWork) -> None:
        """Before ``work`` is written to ``member``: the platform's part of each namespace
        it writes is in force (raises ApiError when it cannot be written)."""
        if work.removal:
            return
        wanted = wanted_for(work.app, *self.policy_of(work.app))
        if wanted is None:
            return
        for namespace in sorted(_namespaces(work)):
            self._asked[member.name, namespace] = work.app
            if self.kept.get((member.name, namespace)) != wanted:
                await self.keep(member, namespace, wanted)

    def tenant_changed(self, tenant: str) -> None:
        """TenantQuota ``tenant`` changed: what it asks of its namespaces is written again
        (and, should it be gone, what its applications' policy now says)."""
        for cluster, namespace in list(self._asked):
            kept = self.kept.get((cluster, namespace))
            if kept is None or kept.tenant == tenant:
                self.queue.add(f"{cluster}/{namespace}")

    def observed(
        self, cluster: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> None:
        """A Namespace, LimitRange or NetworkPolicy on ``cluster`` changed (a member
        cache's event): if it undoes what is kept, write it again soon."""
        obj = new or old or {}
        meta = obj.get("metadata") or {}
        kind = (obj.get("apiVersion"), obj.get("kind"))
        namespace = str(meta.get("name") if kind == NAMESPACES else meta.get("namespace"))
        kept = self.kept.get((cluster, namespace))
        if kept is None:
            return
        if kind == NAMESPACES:
            labels = ((new or {}).get("metadata") or {}).get("labels") or {}
            undone = new is None or any(labels.get(k) != v for k, v in kept.labels.items())
        else:
            mine = next((o for o in kept.objects if _same(o, obj)), None)
            if mine is None:
                # One kept for the tenant once and no longer wanted: deleted by a keep.
                tenant = (meta.get("annotations") or {}).get(TENANT_ANNOTATION)
                undone = tenant == kept.tenant and new is not None
            else:
                # Another write than the keeper's last (the member completes a LimitRange
                # as it stores it: what it answered is the keeper's, not a change).
                version = (new or {}).get("metadata", {}).get("resourceVersion")
                undone = version is None or version != self._versions.get(
                    (cluster, *_key(mine, namespace))
                )
        if undone:
            self.kept.pop((cluster, namespace), None)
            self.queue.add(f"{cluster}/{namespace}")

    async def run(self, members: Callable[[str], Member | None]) -> None:
        """Write again what :meth:`observed` and :meth:`tenant_changed` queued, until the
        queue shuts down."""

        def failed(key: str, exc: Exception) -> bool:
            log.warning("%s: the platform's part not written: %s", key, exc)
            return True

        await self.queue.serve(
            lambda key: self.rewrite(key, members), (ApiError, UnknownKind, TimeoutError), failed
        )

    async def rewrite(self, key: str, members: Callable[[str], Member | None]) -> None:
        """Write again what the platform keeps in ``cluster/namespace``, as the policy of
        the application that asked for it last says now."""
        cluster, namespace = key.split("/", 1)
        member = members(cluster)
        app = self._asked.get((cluster, namespace))
        if member is None or app is None:
            return
        with self.hold(app) as mine:
            wanted = wanted_for(app, *self.policy_of(app)) if mine else None
            if wanted is not None:
                await self.keep(member, namespace, wanted)

    async def keep(self, member: Member, namespace: str, wanted: Wanted) -> None:
        """Write ``wanted`` into ``namespace`` on ``member``: its labels (unless the member
        is limited to some namespaces: its credentials may not write Namespaces, which
        are then the platform's to label), its default objects, and delete the tenant's
        defaults there it no longer wants."""
        where = (member.name, namespace)
        async with self._locks.setdefault(where, anyio.Lock()):
            # Kept from the first write on: a change made on the member meanwhile (its
            # event compared with this) is written over again afterwards.
            self.kept[where] = wanted
            try:
                await self._write(member, namespace, wanted)
            except BaseException:
                self.kept.pop(where, None)
                raise
        log.info(
            "%s: namespace %s kept at Pod Security level %s%s",
            member.name,
            namespace,
            wanted.labels.get("pod-security.kubernetes.io/enforce"),
            "".join(f", {o['kind']} {o['metadata']['name']}" for o in wanted.objects),
        )

    async def _write(self, member: Member, namespace: str, wanted: Wanted) -> None:
        """The labels and each default object at once (one round trip to a far member),
        while the caches the stale defaults are found in list."""
        conn = member.connection
        stamp = {MEMBER_LABEL: member_label_value(member.name)}
        owner = app_label_value("tenant", wanted.tenant)
        kinds = list(DEFAULT_KINDS)
        if not member.allowed_namespaces:
            kinds.append(NAMESPACES)  # its events tell when the labels are undone
        caches: dict[KindKey, Informer] = {}

        async def listed() -> None:
            caches.update(await self.caches(member, kinds, self.timeout_s))

        async def apply(obj: dict[str, Any]) -> None:
            meta = {
                **obj["metadata"],
                "namespace": namespace,
                "labels": {APP_LABEL: owner, **stamp},
                "annotations": {TENANT_ANNOTATION: wanted.tenant},
            }
            answer = await conn.apply({**obj, "metadata": meta})
            version = (answer.get("metadata") or {}).get("resourceVersion")
            if isinstance(version, str):
                self._versions[(member.name, *_key(obj, namespace))] = version

        async def label() -> None:
            await self._label(member, namespace, {**wanted.labels, **stamp}, owner)

        calls: list[Callable[[], Awaitable[None]]] = [listed]
        calls += [functools.partial(apply, obj) for obj in wanted.objects]
        if not member.allowed_namespaces:
            calls.append(label)
        await each(calls, lambda call: call(), len(calls), (ApiError, UnknownKind, TimeoutError))
        for kind in DEFAULT_KINDS:
            for live in caches[kind].snapshot():
                meta = live.get("metadata") or {}
                if (
                    meta.get("namespace") == namespace
                    and (meta.get("annotations") or {}).get(TENANT_ANNOTATION) == wanted.tenant
                    and not any(_same(o, live) for o in wanted.objects)
                ):
                    await conn.delete(*kind, str(meta.get("name")), namespace)

    async def _label(
        self, member: Member, namespace: str, labels: dict[str, str], owner: str
    ) -> None:
        """Set the platform's labels on the namespace (its own field manager: an
        application that brings the Namespace never takes them over)."""

        def labelled() -> dict[str, Any]:
            meta = {"name": namespace, "labels": labels}
            return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}

        answer = await member.connection.apply(labelled(), field_manager=FIELD_MANAGER)
        if APP_LABEL not in ((answer.get("metadata") or {}).get("labels") or {}):
            # Only what carries the label is in the member's caches, whose events keep this.
            labels[APP_LABEL] = owner
            await member.connection.apply(labelled(), field_manager=FIELD_MANAGER)


def _key(obj: Mapping[str, Any], namespace: str) -> tuple[str, str, str, str]:
    return (str(obj.get("apiVersion")), str(obj.get("kind")), namespace, obj["metadata"]["name"])


def _same(mine: Mapping[str, Any], live: Mapping[str, Any]) -> bool:
    """Whether ``live`` is the member's copy of ``mine`` (same kind and name)."""
    return (mine.get("apiVersion"), mine.get("kind")) == (
        live.get("apiVersion"),
        live.get("kind"),
    ) and mine["metadata"]["name"] == (live.get("metadata") or {}).get("name")


def _namespaces(work: ClusterWork) -> set[str]:
    """The namespaces a work writes into, and those it brings."""
    brought = {
        str((o.get("metadata") or {}).get("name"))
        for o in work.objects
        if o.get("kind") == "Namespace"
    }
    return namespaces_written(work) | brought
