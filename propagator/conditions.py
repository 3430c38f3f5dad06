"""Conditions and status writes, the same way for every resource the controller writes.

A condition keeps its ``lastTransitionTime`` while its status holds; a status is written
only when it differs in more than the volatile fields (the probe time) from what the hub
holds — the informer's copy, or the status last written while that copy trails it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kube.redact import redact

_VOLATILE = ("lastProbeTime", "agent")
"""Not compared: the probe's time, and a Pull member's ``status.agent`` (its agent's field,
never written by the controller)."""


NAMED_CLUSTERS = 10
"""How many clusters of a list a condition's message names: ``status.clusters`` has every
cluster's line, and a rollout to 1,000 would otherwise make each message a list of 1,000
(unreadable in ``kubectl describe``, and written to the hub again with every change)."""


def some_of(items: Sequence[str], sep: str, limit: int = NAMED_CLUSTERS) -> str:
    """The first ``limit`` items joined by ``sep``, then how many more there are:
    ``a, b, c and 997 more``."""
    shown = sep.join(items[:limit])
    more = len(items) - limit
    return f"{shown} and {more} more" if more > 0 else shown


def by_message(pairs: Iterable[tuple[str, str]], what: str, limit: int = NAMED_CLUSTERS) -> str:
    """(cluster, message) pairs as one entry per distinct message, the clusters sharing it
    named before it as :func:`some_of` names them: ``a, b and 998 more: timeout after 3
    attempts; c: 403 Forbidden``. The messages most clusters share come first (then by
    their first cluster, in the order given); past ``limit`` of them the rest are counted,
    ``what`` saying what they are: ``; 40 more clusters with 12 other errors``. A bad
    manifest refused by 1,000 clusters is one entry, not 1,000 copies of its error."""
    clusters: dict[str, list[str]] = {}
    for cluster, message in pairs:
        clusters.setdefault(message, []).append(cluster)
    ordered = sorted(clusters.items(), key=lambda m: -len(m[1]))  # stable: first seen first
    text = "; ".join(f"{some_of(names, ', ', limit)}: {m}" for m, names in ordered[:limit])
    rest = ordered[limit:]
    if rest:
        count = sum(len(names) for _, names in rest)
        noun = "cluster" if count == 1 else "clusters"
        text += f"; {count} more {noun} with {len(rest)} other {what}"
    return text


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso(epoch: float) -> str:
    """Epoch seconds as an RFC 3339 time, ``2026-12-01T03:30:00Z``."""
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(
    type_: str,
    ok: bool | None,
    reason: str,
    message: str,
    generation: int | None,
    previous: Iterable[Mapping[str, Any]] | None,
    now: str,
) -> dict[str, Any]:
    """A metav1.Condition, keeping lastTransitionTime while the status stays the same."""
    status = "Unknown" if ok is None else ("True" if ok else "False")
    before = next((c for c in previous or [] if c.get("type") == type_), None)
    since = before["lastTransitionTime"] if before and before.get("status") == status else now
    cond: dict[str, Any] = {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": redact(message)[:32768],
        "lastTransitionTime": since,
    }
    if generation is not None:
        cond["observedGeneration"] = generation
    return cond


def status_changed(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """True when ``desired`` differs from ``current`` in more than the probe time. A
    section's field set to None (how a merge patch deletes it) and one left out are the
    same."""

    def stable(s: Mapping[str, Any] | None) -> dict[str, Any]:
        return {k: _unset(v) for k, v in (s or {}).items() if k not in _VOLATILE}

    return stable(current) != stable(desired)


def _unset(value: Any) -> Any:
    """A section (a mapping) without its fields set to None."""
    if isinstance(value, Mapping):
        return {k: v for k, v in value.items() if v is not None}
    return value


class WrittenStatuses:
    """The last status written per object, with the resourceVersion of the copy it was
    written over. A write comes back through the watch ~100 ms later: while the informer's
    copy is still the one it went over, the hub holds the written status, not the copy's,
    and a status that went back to the copy's must be written again."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[str | None, Mapping[str, Any]]] = {}

    def held(self, key: str, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The status the hub holds for ``obj`` (as cached): the last one written while
        the cache still shows the copy it went over, else the copy's."""
        last = self._last.get(key)
        if last is not None and last[0] == _version(obj):
            return last[1]
        status = obj.get("status")
        return status if isinstance(status, Mapping) else None

    def as_held(self, key: str, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj`` with the status the hub holds: what a new status is built over (a
        condition keeps its lastTransitionTime from the last write, not from a copy that
        predates it)."""
        held = self.held(key, obj)
        return obj if held is obj.get("status") else {**obj, "status": held}

    def changed(self, key: str, obj: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
        """Whether ``status`` differs from what the hub holds for ``obj`` (as cached)."""
        return status_changed(self.held(key, obj), status)

    def written(self, key: str, obj: Mapping[str, Any], status: Mapping[str, Any]) -> None:
        """``status`` was written over ``obj`` (as cached)."""
        self._last[key] = (_version(obj), status)

    def forget(self, key: str) -> None:
        self._last.pop(key, None)


def _version(obj: Mapping[str, Any]) -> str | None:
    version = (obj.get("metadata") or {}).get("resourceVersion")
    return None if version is None else str(version)
