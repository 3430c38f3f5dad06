"""The canary's step machine: from the last state, what the canary clusters show and the
user's action, the next state — and what each cluster runs in it. Pure (no I/O, time is
an argument), so every transition is tested without a cluster.

Phases: ``Progressing`` (a step's weight runs on the canary clusters; it passes when the
canary copy is healthy on every one of them and the step's pause is over), ``Paused`` (a
manual step waits for promote), ``Promoting`` (every cluster takes the new revision; on a
canary cluster the stable copy takes it at full size before the canary copy goes),
``Succeeded`` (the stable revision is the latest), ``RolledBack`` (a step failed: the
stable revision everywhere; the failed revision is not tried again until the spec changes
or a retry) and ``Aborted``.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from api.application import CanaryPhase
from api.common import duration_seconds
from api.rollout import CANARY_ACTIONS, Canary
from fleet.snapshot import epoch_of
from propagator.canary.copies import ClusterMode
from propagator.conditions import iso

RUNNING: frozenset[CanaryPhase] = frozenset({"Progressing", "Paused", "Promoting"})
HEALTHY = "Healthy"


@dataclass(frozen=True)
class CanaryState:
    """Where an application's canary stands (kept in ``status.canary``)."""

    phase: CanaryPhase
    stable: str | None
    """The stable revision (None: nothing released yet)."""
    canary: str | None = None
    """The revision on trial (after a rollback or an abort: the one that failed)."""
    step: int = 0
    weight: int = 0
    started_at: float | None = None
    step_started_at: float | None = None
    step_healthy_at: float | None = None
    message: str = ""
    last_action: str | None = None
    promoted: frozenset[str] = frozenset()
    """Canary clusters where, while Promoting, the stable copy runs the new revision at
    full size and the canary copy is gone."""

    @property
    def running(self) -> bool:
        return self.phase in RUNNING

    def at_same_stage(self, other: CanaryState | None) -> bool:
        """Whether ``other`` renders what this state renders (same phase, step, weight,
        revisions and promoted clusters): what was seen of it tells about this one."""
        return other is not None and (
            other.phase,
            other.stable,
            other.canary,
            other.step,
            other.weight,
            other.promoted,
        ) == (self.phase, self.stable, self.canary, self.step, self.weight, self.promoted)

    def mode(self, cluster: str, canary_cluster: bool) -> ClusterMode:
        """What ``cluster`` runs in this state."""
        if self.phase in ("RolledBack", "Aborted"):
            return "stable"
        if self.phase in ("Progressing", "Paused"):
            return "split" if canary_cluster else "stable"
        if self.phase == "Promoting" and canary_cluster and cluster not in self.promoted:
            return "folding"
        return "latest"

    def status(self, clusters: list[dict[str, Any]]) -> dict[str, Any]:
        """``status.canary`` (``clusters``: the per-cluster lines)."""
        out: dict[str, Any] = {"phase": self.phase, "step": self.step, "weight": self.weight}
        # A field unset is written as None: the status is a merge patch, which keeps
        # what it leaves out (a step's healthy time would outlive the step).
        out |= {
            "stableRevision": self.stable,
            "canaryRevision": self.canary,
            "startedAt": _iso(self.started_at),
            "stepStartedAt": _iso(self.step_started_at),
            "stepHealthyAt": _iso(self.step_healthy_at),
            "lastAction": self.last_action,
        }
        out["message"] = self.message[:1024]
        out["clusters"] = clusters
        return out

    @classmethod
    def from_status(cls, status: Mapping[str, Any] | None) -> CanaryState | None:
        """The state ``status.canary`` holds (None when it holds none or is unreadable)."""
        if not isinstance(status, Mapping):
            return None
        phase = status.get("phase")
        if phase not in (*RUNNING, "Succeeded", "RolledBack", "Aborted"):
            return None
        step, weight = status.get("step", 0), status.get("weight", 0)
        promoted = frozenset(
            str(c.get("name"))
            for c in status.get("clusters") or []
            if isinstance(c, Mapping) and c.get("promoted")
        )
        return cls(
            phase,
            _str(status.get("stableRevision")),
            _str(status.get("canaryRevision")),
            step if isinstance(step, int) and step >= 0 else 0,
            weight if isinstance(weight, int) and 0 <= weight <= 100 else 0,
            epoch_of(status.get("startedAt")),
            epoch_of(status.get("stepStartedAt")),
            epoch_of(status.get("stepHealthyAt")),
            str(status.get("message") or ""),
            _str(status.get("lastAction")),
            promoted,
        )


def _iso(epoch: float | None) -> str | None:
    return None if epoch is None else iso(epoch)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class Seen:
    """What one cluster shows of the last plan: whether it was applied there, and the
    health of its stable and canary copies (canary None: no canary copy there)."""

    applied: bool
    stable: str
    canary: str | None = None


@dataclass(frozen=True)
class Finding:
    """What the metric analysis says of the current step."""

    holds: bool
    """Every check has passed on every canary cluster since the step began."""
    failed: str | None = None
    """Why the step fails (a check beyond its failure limit on a cluster)."""
    waiting: str = ""
    """What it still waits for."""


@dataclass(frozen=True)
class Rollback:
    """Why a step failed (``reason`` is a metric label: ProgressDeadline, Degraded,
    Analysis)."""

    reason: str
    message: str


MAX_RECORDED_ACTION = 253
"""``status.canary.lastAction`` holds at most this; a longer value is recorded by its hash."""


def recorded_action(value: str) -> str:
    """How ``status.canary.lastAction`` records an annotation value (a value too long for
    the status by its hash, so the status write never fails on it)."""
    if len(value) <= MAX_RECORDED_ACTION:
        return value
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()


def action_of(value: str | None, last: str | None) -> tuple[str | None, str | None]:
    """(action to take now, or None; a problem with the value, or None) for the
    propagator.io/canary-action annotation's ``value`` when ``last`` (as recorded) was
    acted on last."""
    if not value or recorded_action(value) == last:
        return None, None
    action = value.split("/", 1)[0]
    if action not in CANARY_ACTIONS:
        shown = value if len(value) <= 100 else value[:100] + "…"
        return None, (
            f"propagator.io/canary-action {shown!r} is not one of "
            f"{', '.join(CANARY_ACTIONS)} (optionally followed by /anything)"
        )
    return action, None


def advance(
    state: CanaryState | None,
    canary: Canary,
    release: str,
    changed: Callable[[], bool],
    canary_clusters: Collection[str],
    seen: Mapping[str, Seen] | None,
    action: str | None,
    now: float,
    analysis: Finding | None = None,
) -> tuple[CanaryState, Rollback | None]:
    """The next state of the canary (and the rollback it makes, if any). ``release``: the
    latest revision of the workloads; ``changed()``: whether the latest revision's pod
    templates differ from the stable revision's anywhere (asked only when a new canary
    might start); ``canary_clusters``: the placed clusters the canary runs on; ``seen``:
    what each placed cluster shows of ``state`` (None when nothing has been seen of it
    yet: after a restart, or right after a change); ``action``: promote, abort or retry;
    ``analysis``: what the metric checks say of the current step (None: it has none)."""
    s = state or CanaryState("Succeeded", None)
    if s.stable is None:
        return _done(s, release, "first release: no stable revision ran, applied at once")
    if release == s.stable:
        if s.phase == "Succeeded":
            return s, None
        return _done(s, release, "the workloads are back at the stable revision")
    if s.canary != release or s.phase == "Succeeded":
        if not changed():
            return _done(s, release, "no pod template changed: applied at once")
        return _start(s, release, canary, now), None
    if s.phase in ("RolledBack", "Aborted"):
        if action == "retry":
            return _start(s, release, canary, now, "retried: "), None
        return s, None
    if action == "abort":
        return _ended(s, "Aborted", "aborted by propagator.io/canary-action"), None
    if s.phase == "Promoting":
        return _promoting(s, canary_clusters, seen, release), None
    if action == "promote" and s.phase == "Paused":
        return _next(s, canary, now, "promoted at the gate: "), None
    if action == "promote":
        return (
            _promote(s, "promoted by propagator.io/canary-action: the remaining steps are skipped"),
            None,
        )
    return _step(s, canary, canary_clusters, seen, now, analysis)


def _done(s: CanaryState, release: str, message: str) -> tuple[CanaryState, None]:
    return (
        CanaryState(
            "Succeeded", release, s.canary, 0, 0, message=message, last_action=s.last_action
        ),
        None,
    )


def _start(s: CanaryState, release: str, canary: Canary, now: float, note: str = "") -> CanaryState:
    weight = canary.steps[0].weight
    return CanaryState(
        "Progressing",
        s.stable,
        release,
        0,
        weight,
        now,
        now,
        message=f"{note}step 1 of {len(canary.steps)}, weight {weight}: starting",
        last_action=s.last_action,
    )


def _ended(s: CanaryState, phase: CanaryPhase, message: str) -> CanaryState:
    return dataclasses.replace(
        s, phase=phase, weight=0, step_healthy_at=None, promoted=frozenset(), message=message
    )


def _promote(s: CanaryState, message: str) -> CanaryState:
    return dataclasses.replace(s, phase="Promoting", step_healthy_at=None, message=message)


def _promoting(
    s: CanaryState, canary_clusters: Collection[str], seen: Mapping[str, Seen] | None, release: str
) -> CanaryState:
    """Canary clusters whose stable copy runs the new revision Available lose their canary
    copy; once that is done and every cluster is Available, the new revision is stable."""
    if seen is None:
        return s
    promoted = s.promoted | {
        c for c in canary_clusters if (x := seen.get(c)) and x.applied and x.stable == HEALTHY
    }
    everywhere = all(x.applied and x.stable == HEALTHY for x in seen.values())
    if everywhere and s.promoted >= set(canary_clusters):
        return _done(s, release, "promoted: the new revision is stable on every cluster")[0]
    waiting = sorted(c for c, x in seen.items() if not (x.applied and x.stable == HEALTHY))
    return dataclasses.replace(
        s,
        promoted=promoted,
        message="promoting: waiting for the new revision to be Available on "
        + (
            ", ".join(waiting[:5]) + (" …" if len(waiting) > 5 else "")
            if waiting
            else "the canary clusters, before their canary copies go"
        ),
    )


def _step(
    s: CanaryState,
    canary: Canary,
    canary_clusters: Collection[str],
    seen: Mapping[str, Seen] | None,
    now: float,
    analysis: Finding | None = None,
) -> tuple[CanaryState, Rollback | None]:
    """A step (Progressing or Paused): passed, held, or failed."""
    index = min(s.step, len(canary.steps) - 1)
    step, total = canary.steps[index], len(canary.steps)
    where = f"step {index + 1} of {total}, weight {s.weight}"
    views = {c: seen.get(c) for c in canary_clusters} if seen is not None else {}
    degraded = sorted(c for c, x in views.items() if x is not None and x.canary == "Degraded")
    if degraded:
        why = f"{where}: the canary copy is Degraded on {', '.join(degraded)}"
        return _ended(s, "RolledBack", f"rolled back: {why}"), Rollback("Degraded", why)
    if analysis is not None and analysis.failed is not None:
        why = f"{where}: {analysis.failed}"
        return _ended(s, "RolledBack", f"rolled back: {why}"), Rollback("Analysis", why)
    if s.phase == "Paused":
        return s, None  # a gate: promote or abort
    waiting = sorted(
        c for c, x in views.items() if x is None or not x.applied or x.canary != HEALTHY
    )
    if not canary_clusters:
        waiting = ["(no placed cluster matches canary.clusterSelector)"]
    elif seen is None:
        waiting = sorted(canary_clusters)
    if waiting:
        deadline = canary.analysis.progress_deadline_seconds
        started = s.step_started_at if s.step_started_at is not None else now
        shown = ", ".join(waiting[:5]) + (" …" if len(waiting) > 5 else "")
        if now - started >= deadline:
            why = (
                f"{where}: the canary copy was not healthy {deadline}s after the step "
                f"began on {shown}"
            )
            return _ended(s, "RolledBack", f"rolled back: {why}"), Rollback("ProgressDeadline", why)
        return (
            dataclasses.replace(
                s,
                step_healthy_at=None,
                message=f"{where}: waiting for the canary copy to be healthy on {shown}",
            ),
            None,
        )
    healthy_at = s.step_healthy_at if s.step_healthy_at is not None else now
    if analysis is not None and not analysis.holds:
        message = f"{where}: healthy; waiting for the analysis: {analysis.waiting}"
        return dataclasses.replace(s, step_healthy_at=healthy_at, message=message), None
    pause = duration_seconds(step.pause) if step.pause else 0.0
    if now < healthy_at + pause:
        message = f"{where}: healthy; paused until {iso(healthy_at + pause)}"
        return dataclasses.replace(s, step_healthy_at=healthy_at, message=message), None
    if step.manual:
        message = f"{where}: healthy; waiting for promote (a manual step)"
        return (
            dataclasses.replace(s, phase="Paused", step_healthy_at=healthy_at, message=message),
            None,
        )
    return _next(s, canary, now), None


def _next(s: CanaryState, canary: Canary, now: float, note: str = "") -> CanaryState:
    """The step after this one, starting at ``now`` (Promoting after the last)."""
    total, index = len(canary.steps), s.step + 1
    if index >= total:
        return _promote(s, f"{note}all {total} steps passed: promoting")
    weight = canary.steps[index].weight
    return dataclasses.replace(
        s,
        phase="Progressing",
        step=index,
        weight=weight,
        step_started_at=now,
        step_healthy_at=None,
        message=f"{note}step {index + 1} of {total}, weight {weight}: starting",
    )


def due_in(s: CanaryState, canary: Canary, now: float) -> float | None:
    """Seconds until time alone changes a running step (its pause ends, or its progress
    deadline passes); None when only the clusters or the user can move it."""
    if s.phase != "Progressing" or s.step >= len(canary.steps):
        return None
    if s.step_healthy_at is not None:
        pause = canary.steps[s.step].pause
        end = s.step_healthy_at + (duration_seconds(pause) if pause else 0.0)
    elif s.step_started_at is not None:
        end = s.step_started_at + canary.analysis.progress_deadline_seconds
    else:
        return None
    return max(0.0, end - now)
