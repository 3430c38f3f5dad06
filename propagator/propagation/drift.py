"""Drift: whether what a member holds still says what Propagator applied.

Only the fields Propagator sets count (the member adds defaults, status and fields of other
managers, which are not drift). The live object is projected onto the shape of the desired
one; that projection is fingerprinted right after an apply (from the API server's answer,
so the server's own normalisation, e.g. ``1000m`` → ``1``, is part of it) and compared
with the projection of every later version the watch delivers. A status update leaves
the projection alone; ``kubectl set image``, a removed label or edited ConfigMap data
change it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

_ABSENT = {"$absent": True}
"""Stands for a field the desired object sets and the live one lacks."""

_SERVER_OWNED_METADATA = ("resourceVersion", "uid", "generation", "creationTimestamp")


def project(live: Any, shape: Any) -> Any:
    """The part of ``live`` at the paths ``shape`` (the desired object) sets. Lists are
    taken element by element when their lengths agree, whole otherwise."""
    # dict, not Mapping: objects are JSON here, and an ABC's check was a quarter of a
    # Deployment's fingerprint.
    if isinstance(shape, dict):
        if not isinstance(live, dict):
            return live
        return {
            key: project(live[key], sub) if key in live else _ABSENT for key, sub in shape.items()
        }
    if isinstance(shape, list):
        if not isinstance(live, list) or len(live) != len(shape):
            return live
        return [project(item, sub) for item, sub in zip(live, shape, strict=True)]
    return live


def _desired_shape(desired: Mapping[str, Any]) -> dict[str, Any]:
    """The fields to compare: identity (apiVersion, kind; listed objects lack them) and
    what the server sets are left out."""
    meta = dict(desired.get("metadata") or {})
    for key in _SERVER_OWNED_METADATA:
        meta.pop(key, None)
    shape = {k: v for k, v in desired.items() if k not in ("apiVersion", "kind")}
    return {**shape, "metadata": meta}


def fingerprint(live: Mapping[str, Any], desired: Mapping[str, Any]) -> str:
    """A short hash of ``live`` projected onto the fields ``desired`` sets."""
    projected = project(live, _desired_shape(desired))
    text = json.dumps(projected, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def matches(live: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Whether ``live`` holds every field ``desired`` sets with the same value (used when
    no fingerprint was recorded, e.g. after a restart: a value the server normalised
    counts as different, which costs one no-op apply)."""
    shape = _desired_shape(desired)
    return bool(project(live, shape) == shape)


def in_line(
    live: Mapping[str, Any] | None,
    desired: Mapping[str, Any],
    recorded: str | None,
    version: str | None = None,
) -> bool:
    """Whether ``live`` needs no apply: it exists and either is the version the last apply
    left (its resourceVersion is ``version``, as Karmada's object watcher compares: no
    projection to hash, as for the watch event of every write of ours), or its projection
    has the ``recorded`` fingerprint of that apply, or (nothing recorded) it matches."""
    if live is None:
        return False
    if version is not None and (live.get("metadata") or {}).get("resourceVersion") == version:
        return True
    if recorded is not None:
        return fingerprint(live, desired) == recorded
    return matches(live, desired)
