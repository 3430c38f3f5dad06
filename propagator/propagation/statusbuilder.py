"""The ApplicationPropagation status the controller writes, as pure functions.

One status per reconcile, compared with what the hub holds so that nothing is written when
nothing changed (conditions keep their lastTransitionTime while their status holds).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from api.application import ApplicationPropagationStatus
from kube.redact import redact
from propagator.conditions import condition, some_of
from propagator.interpreter.health import WorkloadHealth
from propagator.work.workloadhealth import ObjectReport


@dataclass(frozen=True)
class ClusterLine:
    """One cluster's line in ``status.clusters``."""

    name: str
    applied: bool
    health: WorkloadHealth
    attempts: int
    last_error: str | None
    revision: str | None
    unhealthy_since: str | None = None
    evicting: Mapping[str, Any] | None = None
    health_message: str = ""
    objects: tuple[ObjectReport, ...] = ()
    drift: tuple[str, ...] = ()
    """Objects drifted there and left so."""
    drift_since: str | None = None
    rollout_revision: int | None = None
    """The application's revision the cluster is to run."""
    wave: int | None = None
    suspended: bool = False
    charts: tuple[str, ...] = ()
    """The charts its objects are rendered from (``release: chart version``)."""

    def as_status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "applied": self.applied,
            "health": self.health,
            "attempts": self.attempts,
        }
        if self.last_error:
            out["lastError"] = redact(self.last_error)[:2048]
        if self.revision:
            out["revision"] = self.revision
        if self.unhealthy_since:
            out["unhealthySince"] = self.unhealthy_since
        if self.evicting:
            out["evicting"] = {**self.evicting, "message": redact(self.evicting["message"])}
        if self.health_message:
            out["healthMessage"] = redact(self.health_message)[:1024]
        if self.objects:
            out["objects"] = [o.as_status() for o in self.objects]
        if self.drift:
            out["drift"] = {
                "objects": len(self.drift),
                "names": [name[:253] for name in self.drift[:DRIFT_NAMES]],
                **({"since": self.drift_since} if self.drift_since else {}),
            }
        if self.rollout_revision is not None:
            out["rolloutRevision"] = self.rollout_revision
        if self.wave is not None:
            out["wave"] = self.wave
        if self.suspended:
            out["suspended"] = True
        if self.charts:
            out["charts"] = list(self.charts)
        return out


DRIFT_NAMES = 10
"""Drifted objects a cluster's line names (it counts them all)."""
OBJECTS_BUDGET = 256 << 10
"""Bytes (as JSON) the clusters' ``objects`` lists may take in one status together."""


class StatusBuilder:
    """Conditions for one application, against its previous status, at one time."""

    def __init__(self, app: Mapping[str, Any], now: str) -> None:
        meta = app.get("metadata") or {}
        self.previous: dict[str, Any] = dict(app.get("status") or {})
        self.generation: int | None = meta.get("generation")
        self.now = now
        self.status: dict[str, Any] = dict(self.previous)
        self.status["observedGeneration"] = self.generation
        self._conditions = {c["type"]: c for c in self.previous.get("conditions") or []}

    def condition(self, type_: str, ok: bool | None, reason: str, message: str) -> None:
        self._conditions[type_] = condition(
            type_,
            ok,
            reason,
            message,
            self.generation,
            self.previous.get("conditions"),
            self.now,
        )

    def drop(self, type_: str) -> None:
        """No ``type_`` condition any more (what it spoke of is off)."""
        self._conditions.pop(type_, None)

    def clusters(self, states: Sequence[ClusterLine], total: int) -> None:
        """Per-cluster results and the ready counts (ready: applied and Healthy). The
        lines' ``objects`` take at most :data:`OBJECTS_BUDGET` bytes together: past it, a
        line keeps its health message only (a rule reflecting large fields on a thousand
        clusters must not make the status too large to write)."""
        lines, spent = [], 0
        for state in sorted(states, key=lambda s: s.name):
            line = state.as_status()
            if "objects" in line:
                spent += len(json.dumps(line["objects"], separators=(",", ":"), default=str))
                if spent > OBJECTS_BUDGET:
                    del line["objects"]
            lines.append(line)
        self.status["clusters"] = lines
        ready = sum(s.applied and s.health == "Healthy" for s in states)
        self.status["readyClusters"] = min(ready, total)
        self.status["totalClusters"] = total
        self.status["ready"] = f"{min(ready, total)}/{total}"

    def build(self) -> dict[str, Any]:
        """The status to write (:func:`checked` before it is written)."""
        order = [
            "Scheduled",
            "Applied",
            "Available",
            "QuotaExceeded",
            "CanaryProgressing",
            "Dependencies",
        ]
        self.status["conditions"] = sorted(
            self._conditions.values(),
            key=lambda c: (order.index(c["type"]) if c["type"] in order else 99, c["type"]),
        )
        return self.status


def checked(status: Mapping[str, Any]) -> None:
    """Raise ValueError when ``status`` does not fit the API model: the API server would
    silently drop a field the CRD does not know, so a mistake of the controller's is raised
    instead. Only a status to write is checked (at 100 clusters, checking every refresh
    was a third of a no-op resync's time)."""
    try:
        ApplicationPropagationStatus.model_validate(status)
    except ValidationError as exc:
        raise ValueError(f"the controller built an invalid status: {exc}") from exc


def availability(states: Iterable[ClusterLine], targets: Iterable[str]) -> tuple[bool, str, str]:
    """(available, reason, message) for the Available condition."""
    by_name = {s.name: s for s in states}
    names = sorted(targets)
    not_ready = [
        (n, "not applied" if not by_name[n].applied else by_name[n].health)
        for n in names
        if n in by_name and not (by_name[n].applied and by_name[n].health == "Healthy")
    ]
    ready = len(names) - len(not_ready)
    if not names:
        return False, "NoClusters", "placed on no cluster"
    if not not_ready:
        return True, "Healthy", f"{ready}/{len(names)} clusters healthy"
    degraded = any(by_name[n].health == "Degraded" for n in names if n in by_name)
    # Degraded clusters first (applied or not): a message names only the first few.
    not_ready.sort(key=lambda line: by_name[line[0]].health != "Degraded")
    return (
        False,
        "Degraded" if degraded else "Progressing",
        f"{ready}/{len(names)} clusters healthy; "
        + some_of([f"{n}: {why}" for n, why in not_ready], "; "),
    )
