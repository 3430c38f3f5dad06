"""The stable revision of an application's workloads, kept on the hub as a
ControllerRevision in the application's namespace (owned by it, the last few kept), so a
restarted controller renders the stable copy exactly as before, whatever a member holds.

A revision's *source* is what its split workloads (Deployments, and the kinds whose
interpreter rules say ``canaryCopies``) are rendered from: their resolved manifests and
the application's overrides. Its name is a hash of that source.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from api.application import Override
from api.charts import is_chart_release
from kube.connection import KubeConnection
from kube.errors import ApiError
from propagator.canary.copies import DEPLOYMENTS, SplitKinds, kind_key_of

APPLICATION_LABEL = "propagator.io/application"
RELEASE_LABEL = "propagator.io/release"
KEEP = 3
"""Revisions kept per application (the stable one and those before it)."""

Source = dict[str, Any]
"""{"workloads": [split workload manifests], "overrides": [overrides]}."""


def source_of(
    objects: Sequence[Mapping[str, Any]], overrides: Sequence[Any], kinds: SplitKinds = DEPLOYMENTS
) -> Source:
    """What the split workloads (``kinds``) of ``objects`` are rendered from (a chart's
    come from its release)."""
    return {
        "workloads": [dict(o) for o in objects if kind_key_of(o) in kinds or is_chart_release(o)],
        "overrides": list(overrides),
    }


def readable(data: Any, field: str) -> dict[str, Any] | None:
    """``data`` if it is a kept source — ``field`` a list of objects, each with a string
    apiVersion, kind and metadata.name, and ``overrides`` valid overrides — else None: a
    ControllerRevision in the application's namespace is writable by whoever may edit it
    there, so anything may be in it (what renders from it is checked again as any
    application's objects are)."""
    if not isinstance(data, Mapping):
        return None
    objects, overrides = data.get(field), data.get("overrides", [])
    if not isinstance(objects, list) or not isinstance(overrides, list):
        return None
    for obj in objects:
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        if not (
            isinstance(meta, Mapping)
            and isinstance(meta.get("name"), str)
            and isinstance(obj.get("apiVersion"), str)
            and isinstance(obj.get("kind"), str)
        ):
            return None
    try:
        for override in overrides:
            Override.model_validate(override)
    except ValidationError:
        return None
    return {field: objects, "overrides": overrides}


def application_label(name: str) -> str:
    """The label value naming application ``name`` (a label value holds 63 characters; a
    longer name is shortened with a hash of it)."""
    if len(name) <= 63:
        return name
    return f"{name[:46]}-{hashlib.sha256(name.encode()).hexdigest()[:16]}"


def release_of(source: Source) -> str:
    """The revision name of ``source`` (a content hash; key order ignored)."""
    canonical = json.dumps(source, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def controller_revision(
    application: Mapping[str, Any],
    name: str,
    label: tuple[str, str],
    data: Mapping[str, Any],
    number: int,
) -> dict[str, Any]:
    """A ControllerRevision ``name`` of ``application`` (owned by it: deleted with it),
    labelled with its name and ``label``, holding ``data`` as revision ``number``."""
    meta = application["metadata"]
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace", "default"),
            "labels": {APPLICATION_LABEL: application_label(meta["name"]), label[0]: label[1]},
            "ownerReferences": [
                {
                    "apiVersion": application["apiVersion"],
                    "kind": application["kind"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                }
            ],
        },
        "data": dict(data),
        "revision": number,
    }


class StableRevisions:
    """Reads and writes the ControllerRevisions of applications' stable revisions (a copy
    of each read or written kept in memory: they never change)."""

    def __init__(self, hub: KubeConnection) -> None:
        self.hub = hub
        self._known: dict[tuple[str, str], dict[str, Source]] = {}

    def forget(self, namespace: str, name: str) -> None:
        self._known.pop((namespace, name), None)

    async def get(self, namespace: str, name: str, release: str) -> Source | None:
        """The source of ``release`` of application ``namespace/name``; None when the hub
        holds no such revision."""
        known = self._known.setdefault((namespace, name), {})
        if release not in known:
            listed = await self.hub.list(
                "apps/v1",
                "ControllerRevision",
                namespace,
                labelSelector=f"{APPLICATION_LABEL}={application_label(name)},{RELEASE_LABEL}",
            )
            for item in listed.get("items") or []:
                labels = (item.get("metadata") or {}).get("labels") or {}
                data = readable(item.get("data"), "workloads")
                if data is not None and labels.get(RELEASE_LABEL):
                    known[str(labels[RELEASE_LABEL])] = data
        return known.get(release)

    async def put(self, application: Mapping[str, Any], release: str, source: Source) -> None:
        """Record ``source`` as revision ``release`` of ``application`` (idempotent), and
        delete all but the last :data:`KEEP` revisions."""
        meta = application["metadata"]
        namespace, name = meta.get("namespace", "default"), meta["name"]
        listed = await self.hub.list(
            "apps/v1",
            "ControllerRevision",
            namespace,
            labelSelector=f"{APPLICATION_LABEL}={application_label(name)},{RELEASE_LABEL}",
        )
        items = listed.get("items") or []
        numbers = [int(i.get("revision") or 0) for i in items]
        mine = [
            i
            for i in items
            if ((i.get("metadata") or {}).get("labels") or {}).get(RELEASE_LABEL) == release
        ]
        if not mine:
            await self.hub.apply(
                controller_revision(
                    application,
                    f"{name[:200]}-{release[:10]}",
                    (RELEASE_LABEL, release),
                    source,
                    max(numbers, default=0) + 1,
                )
            )
        self._known.setdefault((namespace, name), {})[release] = source
        older = sorted(
            (i for i in items if i not in mine), key=lambda i: int(i.get("revision") or 0)
        )
        for item in older[: max(0, len(older) + 1 - KEEP)]:
            with contextlib.suppress(ApiError):  # tidiness: the next release tries again
                await self.hub.delete(
                    "apps/v1", "ControllerRevision", item["metadata"]["name"], namespace
                )
