"""An application's health on a member: each of its objects as the member's watch caches
hold it, judged by the interpreter rules of its kind (a kind without rules is Healthy
once it exists: there is nothing to wait for)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from api.interpreter import Aggregate
from kube.redact import redact
from propagator.interpreter.health import WorkloadHealth, rank
from propagator.interpreter.registry import Interpreters
from propagator.interpreter.rules import Verdict


class ObjectCache(Protocol):
    """What health is judged from: a member's watch cache of one kind (an Informer), or
    what a Pull member's agent reported of it."""

    @property
    def synced(self) -> bool:
        """Whether it holds what the member holds (listed, or reported)."""
        ...

    def get(self, key: str) -> dict[str, Any] | None:
        """The object of that :func:`kube.keys.cache_key`, or None."""
        ...


@dataclass(frozen=True)
class ObjectReport:
    """What the rules say of one object on a cluster, for the application's status."""

    api_version: str
    kind: str
    namespace: str
    name: str
    health: WorkloadHealth
    message: str
    fields: Mapping[str, Any]
    aggregates: Mapping[str, Aggregate] = field(default_factory=dict)
    """How each field combines across clusters (those that do)."""

    def as_status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "health": self.health,
        }
        if self.namespace:
            out["namespace"] = self.namespace
        if self.message:
            out["message"] = redact(self.message)[:1024]
        if self.fields:
            out["fields"] = {
                k: redact(v) if isinstance(v, str) else v for k, v in self.fields.items()
            }
        return out


@dataclass(frozen=True)
class ClusterHealth:
    """A cluster's health: its least healthy object, why, and what the rules report."""

    health: WorkloadHealth
    message: str = ""
    """The least healthy object's reason (or which kinds have no health rule)."""
    objects: tuple[ObjectReport, ...] = ()
    """The objects not Healthy, or with reflected status fields (at most
    :data:`OBJECTS_SHOWN`)."""


OBJECTS_SHOWN = 20
"""Objects a cluster's line of the application's status lists."""


def judge_cluster(
    interpreters: Interpreters,
    cache: Callable[[str, str], ObjectCache | None] | None,
    objects: Sequence[Mapping[str, Any]],
    namespace: str,
    applied: Callable[[tuple[str, str, str, str]], int | None] = lambda _: None,
) -> ClusterHealth:
    """The health of ``objects`` as the member's watch caches (``cache(apiVersion, kind)``)
    hold them, by ``interpreters``' rules (objects without a namespace are in
    ``namespace``); Unknown while a cache has not listed, or without a member (``cache``
    None). Kinds without health or status rules are Healthy once applied (the message
    says so when nothing else is wrong). ``applied(key)``: the generation the member
    answered the controller's last write of an object with — a cached copy older than that
    has not seen the write (its status says nothing of it): Progressing."""
    worst_seen: tuple[WorkloadHealth, str] = ("Healthy", "")
    reports: list[ObjectReport] = []
    unjudged: set[str] = set()
    for obj in objects:
        api_version, kind = str(obj.get("apiVersion")), str(obj.get("kind"))
        if not interpreters.interprets(api_version, kind):
            unjudged.add(kind)
            continue
        informer = cache(api_version, kind) if cache else None
        if informer is None or not informer.synced:
            why = "no member connection" if cache is None else f"{kind}s not listed yet"
            return ClusterHealth("Unknown", why)
        meta = obj.get("metadata") or {}
        where, name = str(meta.get("namespace") or namespace), str(meta.get("name"))
        live = informer.get(f"{where}/{name}")
        written = applied((api_version, kind, where, name))
        seen = ((live or {}).get("metadata") or {}).get("generation")
        if live is not None and written is not None and isinstance(seen, int) and seen < written:
            verdict = Verdict("Progressing", "the member has not seen the last write yet")
        else:
            verdict = interpreters.verdict(live)
        fields, aggregates = interpreters.reflect(live) if live is not None else ({}, {})
        label = f"{kind} {where}/{name}" if where else f"{kind} {name}"
        if rank(verdict.health) > rank(worst_seen[0]):
            worst_seen = (verdict.health, f"{label}: {verdict.message}".rstrip(": "))
        if (verdict.health != "Healthy" or fields) and len(reports) < OBJECTS_SHOWN:
            reports.append(
                ObjectReport(
                    api_version,
                    kind,
                    where,
                    name,
                    verdict.health,
                    verdict.message,
                    fields,
                    aggregates,
                )
            )
    health, message = worst_seen
    if health == "Healthy" and unjudged:
        message = "no health rule for " + ", ".join(sorted(unjudged)) + ": healthy once applied"
    return ClusterHealth(health, message[:1024], tuple(reports))


def cluster_health(
    interpreters: Interpreters,
    cache: Callable[[str, str], ObjectCache | None] | None,
    objects: Sequence[Mapping[str, Any]],
    namespace: str,
    applied: Callable[[tuple[str, str, str, str]], int | None] = lambda _: None,
) -> WorkloadHealth:
    """:func:`judge_cluster`'s health alone."""
    return judge_cluster(interpreters, cache, objects, namespace, applied).health


def _condition(status: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == type_), None)


def quota_refusals(
    cache: Callable[[str, str], ObjectCache | None] | None,
    objects: Sequence[Mapping[str, Any]],
    namespace: str,
) -> list[str]:
    """Deployments among ``objects`` whose pods the member's quota refuses (their
    ``ReplicaFailure`` condition: "exceeded quota", or "failed quota" for a container
    without the requests a quota needs), each as ``Deployment ns/name: <message>``."""
    found = []
    for obj in objects:
        if (obj.get("apiVersion"), obj.get("kind")) != ("apps/v1", "Deployment") or not cache:
            continue
        informer = cache("apps/v1", "Deployment")
        meta = obj.get("metadata") or {}
        where = f"{meta.get('namespace') or namespace}/{meta.get('name')}"
        live = informer.get(where) if informer is not None else None
        failure = _condition((live or {}).get("status") or {}, "ReplicaFailure")
        message = str((failure or {}).get("message") or "")
        if (failure or {}).get("status") == "True" and " quota" in message:
            found.append(f"Deployment {where}: {message[:300]}")
    return found
