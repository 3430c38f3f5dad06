"""The tenant boundary checked against the hub: which kinds are namespaced (hub discovery)
and the check over every cluster's rendered objects, before anything is written."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kube.connection import KubeConnection
from kube.discovery import UnknownKind
from propagator.interpreter.registry import Interpreters
from propagator.tenancy.policy import Forbidden, Platform, Refusal, TenantPolicy, refusals


async def hub_scopes(
    hub: KubeConnection, objects: Iterable[Mapping[str, Any]]
) -> dict[tuple[str, str], bool | None]:
    """Per (apiVersion, kind): namespaced on the hub, or None when the hub does not serve it."""
    scopes: dict[tuple[str, str], bool | None] = {}
    for obj in objects:
        key = (str(obj.get("apiVersion")), str(obj.get("kind")))
        if key in scopes:
            continue
        try:
            scopes[key] = (await hub.resource(*key)).namespaced
        except UnknownKind:
            scopes[key] = None
    return scopes


async def check_rendered(
    hub: KubeConnection,
    policy: TenantPolicy,
    platform: Platform,
    rendered: Mapping[str, Iterable[Mapping[str, Any]]],
    default_namespace: str,
    revisions: Mapping[str, str] | None = None,
    interpreters: Interpreters | None = None,
) -> None:
    """Raise :class:`Forbidden` naming every object, on any cluster, that ``policy`` does
    not allow (an override may move an object on one cluster only). ``revisions``: per
    cluster, the content hash of what was rendered for it: clusters of one revision are
    judged once (at a thousand clusters, checking every pod template of each costs a
    fifth of a second)."""
    if policy.platform:
        return
    every = [o for objects in rendered.values() for o in objects]
    scopes = await hub_scopes(hub, every)
    found: dict[str, Refusal] = {}
    judged: set[str] = set()
    for cluster, objects in sorted(rendered.items()):
        revision = (revisions or {}).get(cluster)
        if revision is not None:
            if revision in judged:
                continue
            judged.add(revision)
        for refusal in refusals(
            objects,
            policy,
            platform,
            lambda av, k: scopes[av, k],
            default_namespace,
            interpreters,
        ):
            found.setdefault(str(refusal), Refusal(f"{refusal.object} on {cluster}", refusal.rule))
    if found:
        raise Forbidden(policy, list(found.values()))
