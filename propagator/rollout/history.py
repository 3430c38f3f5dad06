"""An application's revisions, kept on the hub as ControllerRevisions in its namespace
(owned by it, the last ``spec.rollout.revisionHistoryLimit`` kept, never one a cluster
still runs): what a cluster a rollout has not reached yet is rendered from, and what an
undo returns to.

A revision's *source* is what its objects are rendered from: the application's resolved
objects and its overrides. Secrets are kept by name only (a ControllerRevision is
readable by whoever may view the namespace): a revision is rendered with the Secrets the
application has now. A revision is numbered in the order it was first kept, and named by
a hash of its source.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kube.connection import KubeConnection
from kube.errors import ApiError
from propagator.canary.revisions import (
    APPLICATION_LABEL,
    application_label,
    controller_revision,
    readable,
)

DIGEST_LABEL = "propagator.io/rollout-revision"
"""On an application's ControllerRevisions: the hash of the revision's source."""
MAX_SOURCE_BYTES = 1_000_000
"""The largest source kept on the hub (an etcd object holds about 1.5 MB): a larger
revision rolls out, but cannot be returned to."""
SOURCES_KEPT = 256
"""Sources held in memory across applications (they are read again when needed)."""

Source = dict[str, Any]
"""{"objects": [objects, Secrets by name only], "overrides": [overrides]}."""


def source_of(objects: Sequence[Mapping[str, Any]], overrides: Sequence[Any]) -> Source:
    """What a revision of ``objects`` with ``overrides`` keeps."""
    kept = []
    for obj in objects:
        if obj.get("apiVersion") == "v1" and obj.get("kind") == "Secret":
            meta = obj.get("metadata") or {}
            kept.append(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {k: meta[k] for k in ("name", "namespace") if k in meta},
                }
            )
        else:
            kept.append(dict(obj))
    return {"objects": kept, "overrides": list(overrides)}


def digest_of(source: Source) -> str:
    """The revision's name: a hash of its source (key order ignored)."""
    canonical = json.dumps(source, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def restored(source: Source, current: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The objects of a kept revision, its Secrets as ``current`` (the application's
    objects now) has them; a Secret it no longer has is left out."""
    secrets = {
        ((o.get("metadata") or {}).get("namespace"), (o.get("metadata") or {}).get("name")): o
        for o in current
        if o.get("apiVersion") == "v1" and o.get("kind") == "Secret"
    }
    out = []
    for obj in source.get("objects") or []:
        if obj.get("apiVersion") == "v1" and obj.get("kind") == "Secret":
            meta = obj.get("metadata") or {}
            now = secrets.get((meta.get("namespace"), meta.get("name")))
            if now is not None:
                out.append(dict(now))
            continue
        out.append(dict(obj))
    return out


@dataclass(frozen=True)
class Kept:
    """One revision on the hub: its number, its hash and its ControllerRevision's name."""

    number: int
    digest: str
    name: str


class RevisionTooLarge(Exception):
    """A source over :data:`MAX_SOURCE_BYTES`: not kept on the hub."""


class Revisions:
    """Reads and writes the kept revisions of applications: their numbers listed once per
    application, their sources read when a render needs one (a few held in memory)."""

    def __init__(self, hub: KubeConnection) -> None:
        self.hub = hub
        self._listed: dict[tuple[str, str], dict[int, Kept]] = {}
        self._sources: OrderedDict[tuple[str, str, int], Source] = OrderedDict()

    def forget(self, namespace: str, name: str) -> None:
        self._listed.pop((namespace, name), None)
        for key in [k for k in self._sources if k[:2] == (namespace, name)]:
            del self._sources[key]

    def known(self, namespace: str, name: str) -> dict[int, Kept] | None:
        """The kept revisions by number, if they were listed (None: not yet)."""
        return self._listed.get((namespace, name))

    async def listed(self, namespace: str, name: str) -> dict[int, Kept]:
        """The kept revisions by number (listed from the hub once). Raises ApiError."""
        known = self._listed.get((namespace, name))
        if known is not None:
            return known
        listing = await self.hub.list(
            "apps/v1",
            "ControllerRevision",
            namespace,
            labelSelector=f"{APPLICATION_LABEL}={application_label(name)},{DIGEST_LABEL}",
        )
        known = {}
        for item in listing.get("items") or []:
            meta = item.get("metadata") or {}
            digest = (meta.get("labels") or {}).get(DIGEST_LABEL)
            number = item.get("revision")
            if isinstance(number, int) and isinstance(digest, str):
                known[number] = Kept(number, digest, str(meta.get("name")))
                data = readable(item.get("data"), "objects")
                if data is not None:
                    self._hold((namespace, name, number), data)
        self._listed[(namespace, name)] = known
        return known

    async def source(self, namespace: str, name: str, number: int) -> Source | None:
        """The source of revision ``number`` (None: not kept, or not readable as one).
        Raises ApiError."""
        held = self._sources.get((namespace, name, number))
        if held is not None:
            self._sources.move_to_end((namespace, name, number))
            return held
        kept = (await self.listed(namespace, name)).get(number)
        if kept is None:
            return None
        try:
            item = await self.hub.get("apps/v1", "ControllerRevision", kept.name, namespace)
        except ApiError as exc:
            if exc.not_found:
                self._listed[(namespace, name)].pop(number, None)
                return None
            raise
        data = readable(item.get("data"), "objects")
        if data is None:
            return None
        self._hold((namespace, name, number), data)
        return data

    def _hold(self, key: tuple[str, str, int], source: Source) -> None:
        self._sources[key] = source
        self._sources.move_to_end(key)
        while len(self._sources) > SOURCES_KEPT:
            self._sources.popitem(last=False)

    async def keep(
        self,
        application: Mapping[str, Any],
        number: int,
        source: Source,
        limit: int,
        protected: Collection[int],
    ) -> None:
        """Keep ``source`` as revision ``number`` of ``application`` (idempotent), and
        delete the oldest beyond ``limit``, but those in ``protected`` (a cluster runs
        them). Raises ApiError, or RevisionTooLarge (nothing written)."""
        meta = application["metadata"]
        namespace, name = meta.get("namespace", "default"), meta["name"]
        digest = digest_of(source)
        if (namespace, name) not in self._listed and number != 1:
            await self.listed(namespace, name)  # (a new application's first: nothing to list)
        known = self._listed.setdefault((namespace, name), {})
        if known.get(number) is None or known[number].digest != digest:
            size = len(json.dumps(source, separators=(",", ":"), default=str))
            if size > MAX_SOURCE_BYTES:
                raise RevisionTooLarge(
                    f"revision {number} is {size} bytes, over the {MAX_SOURCE_BYTES} a "
                    "ControllerRevision holds: it is not kept (undo cannot return to it)"
                )
            cr_name = f"{name[:190]}-rollout-{digest[:10]}"
            await self.hub.apply(
                controller_revision(application, cr_name, (DIGEST_LABEL, digest), source, number)
            )
            known[number] = Kept(number, digest, cr_name)
            self._hold((namespace, name, number), source)
        older = sorted(n for n in known if n != number and n not in protected)
        for old in older[: max(0, len(known) - limit)]:
            with contextlib.suppress(ApiError):  # tidiness: the next revision tries again
                await self.hub.delete("apps/v1", "ControllerRevision", known[old].name, namespace)
            del known[old]
            self._sources.pop((namespace, name, old), None)
