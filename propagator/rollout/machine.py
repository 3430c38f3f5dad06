"""The rollout's wave machine: from the last state, what the current wave's clusters show,
suspension and the user's action, the next state — and which revision each cluster is to
run in it. Pure (no I/O, time is an argument), so every transition is tested without a
cluster.

A rollout takes the application from ``previous`` to ``revision`` wave by wave. Phases:
``Waiting`` (the wave at ``wave`` has not started: a manual gate, a pause, or the canary
goes first), ``Progressing`` (its clusters run ``revision``; it passes once all but the
tolerated ones are applied and healthy for the minimum time), ``Halted`` (it failed:
later waves keep what they run until an undo, a resume or a new revision), ``Complete``
and ``Suspended`` (``spec.suspend``: nothing moves; resumed, the wave starts again).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from api.application import RolloutPhase
from api.common import duration_seconds
from api.rollout import Waves
from fleet.snapshot import epoch_of
from propagator.conditions import iso, some_of
from propagator.rollout.waves import Grouping, tolerated

HEALTHY = "Healthy"
CanaryGate = Literal["none", "running", "done", "failed"]
"""Where the application's canary stands for the revision rolled out: none (no canary),
running (its steps go first), done (promoted), failed (rolled back or aborted)."""
PHASES: tuple[RolloutPhase, ...] = ("Progressing", "Waiting", "Halted", "Complete", "Suspended")


@dataclass(frozen=True)
class Seen:
    """What one cluster shows of the work of the current state: in line with it or not,
    its health by the rules, and whether its sync counts as failed."""

    applied: bool
    health: str
    failed: bool = False


@dataclass(frozen=True)
class Halt:
    """Why a wave failed (``reason`` is a metric label)."""

    wave: int
    name: str
    reason: str
    clusters: tuple[str, ...]


@dataclass(frozen=True)
class RolloutState:
    """Where an application's rollout stands (kept in ``status.rollout``)."""

    phase: RolloutPhase
    revision: int
    previous: int | None = None
    spec_held: int | None = None
    """The spec's revision an undo set aside: not rolled out again until resume or a
    new spec revision."""
    wave: int = 0
    wave_started_at: float | None = None
    wave_healthy_at: float | None = None
    paused: bool = False
    halt: Halt | None = None
    message: str = ""
    last_action: str | None = None

    @property
    def started(self) -> bool:
        """Whether the current wave's clusters are to run ``revision``."""
        return self.phase == "Complete" or self.wave_started_at is not None

    def same_stage(self, other: RolloutState | None) -> bool:
        """Whether ``other`` has each cluster run what this state has it run: what was
        seen of it tells about this one."""
        return other is not None and (
            other.revision,
            other.wave,
            other.started,
            other.phase == "Complete",
            other.phase == "Suspended",
        ) == (
            self.revision,
            self.wave,
            self.started,
            self.phase == "Complete",
            self.phase == "Suspended",
        )

    def status(
        self,
        grouping: Grouping,
        updated: int,
        history: list[int],
        spec: tuple[int, str],
    ) -> dict[str, Any]:
        """``status.rollout`` (``spec``: the spec's revision and its hash)."""
        waves = grouping.waves
        out: dict[str, Any] = {
            "phase": self.phase,
            "revision": self.revision,
            "specRevision": spec[0],
            "specHash": spec[1],
            "specHeld": self.spec_held is not None,
            "wave": self.wave,
            "waves": len(waves),
            "waveName": waves[self.wave].name if self.wave < len(waves) else "",
            "updatedClusters": updated,
            "paused": self.paused,
            "message": self.message[:1024],
            "history": history[-50:],
        }
        # A field unset is written as None: the status is a merge patch, which keeps
        # what it leaves out (a halt long over would stay).
        out |= {
            "previousRevision": self.previous,
            "waveStartedAt": _iso(self.wave_started_at),
            "waveHealthyAt": _iso(self.wave_healthy_at),
            "lastAction": self.last_action,
            "halted": None,
        }
        if self.halt is not None:
            out["halted"] = {
                "wave": self.halt.wave,
                "name": self.halt.name,
                "reason": self.halt.reason,
                "clusters": list(self.halt.clusters[:100]),
            }
        return out

    @classmethod
    def from_status(cls, status: Mapping[str, Any] | None) -> RolloutState | None:
        """The state ``status.rollout`` holds (None when it holds none or is unreadable)."""
        if not isinstance(status, Mapping) or status.get("phase") not in PHASES:
            return None
        revision = _int(status.get("revision"))
        if revision is None or revision < 1:
            return None
        halted = status.get("halted")
        halt = None
        if isinstance(halted, Mapping):
            clusters = halted.get("clusters")
            halt = Halt(
                _int(halted.get("wave")) or 0,
                str(halted.get("name") or ""),
                str(halted.get("reason") or ""),
                tuple(str(c) for c in clusters) if isinstance(clusters, list) else (),
            )
        last = status.get("lastAction")
        return cls(
            status["phase"],
            revision,
            _int(status.get("previousRevision")),
            _int(status.get("specRevision")) if status.get("specHeld") is True else None,
            max(_int(status.get("wave")) or 0, 0),
            epoch_of(status.get("waveStartedAt")),
            epoch_of(status.get("waveHealthyAt")),
            status.get("paused") is True,
            halt,
            str(status.get("message") or ""),
            last if isinstance(last, str) and last else None,
        )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _iso(epoch: float | None) -> str | None:
    return None if epoch is None else iso(epoch)


@dataclass(frozen=True)
class Gates:
    """A wave's gates, from ``spec.rollout.waves`` (unset: one wave, never halted)."""

    min_healthy_s: float = 0.0
    deadline_s: float | None = None
    spec: Waves | None = None

    @classmethod
    def of(cls, spec: Waves | None) -> Gates:
        if spec is None:
            return cls()
        return cls(
            duration_seconds(spec.min_healthy_time), duration_seconds(spec.progress_deadline), spec
        )


@dataclass(frozen=True)
class Asked:
    """The user's action, resolved (``undo_to``: the revision an undo returns to)."""

    action: str | None = None
    undo_to: int | None = None


def advance(
    before: RolloutState | None,
    spec_revision: int,
    grouping: Grouping,
    gates: Gates,
    seen: Mapping[str, Seen] | None,
    asked: Asked,
    now: float,
    *,
    suspended: bool = False,
    skipped: Collection[str] = (),
    canary: CanaryGate = "none",
) -> RolloutState:
    """The next state. ``seen``: what each cluster shows of ``before`` (None: not known
    yet); ``skipped``: suspended clusters, which the waves pass over; ``suspended``: the
    whole application is."""
    if before is None:  # the first revision: nothing runs yet to keep
        return RolloutState("Complete", spec_revision, message="complete")
    s = _act(before, asked, grouping, now, spec_revision)
    wanted = s.revision if s.spec_held == spec_revision else spec_revision
    if wanted != s.revision:
        s = _begin(s, wanted, None)
    if suspended:
        if s.phase in ("Progressing", "Waiting"):
            return dataclasses.replace(
                s,
                phase="Suspended",
                message=f"suspended (spec.suspend); revision {s.revision} waits",
            )
        if s.phase == "Complete":
            return dataclasses.replace(s, message="complete; suspended (spec.suspend)")
        return s
    if s.phase == "Suspended":  # resumed: a started wave's clocks start again
        started = s.wave_started_at is not None
        s = dataclasses.replace(
            s,
            phase="Progressing" if started else "Waiting",
            wave_started_at=now if started else None,
            wave_healthy_at=None,
            message="resumed",
        )
    if not s.same_stage(before):  # what was seen is of what the clusters ran before
        seen = None
    if canary == "failed" and s.phase in ("Progressing", "Waiting"):
        return _halted(s, grouping, "CanaryRolledBack", (), "the canary was rolled back")
    for _ in range(len(grouping.waves) + 1):  # each turn passes a wave, or stops
        if s.phase == "Waiting":
            s, seen = _try_start(s, grouping, canary, now), None
        if s.phase != "Progressing":
            return s
        moved = _judge(s, grouping, gates, seen, now, skipped)
        if moved.phase != "Waiting" or moved.wave == s.wave:
            return moved  # held, halted or complete
        s, seen = moved, None  # the wave passed: nothing is seen yet of the next one
    return s


def _act(
    s: RolloutState, asked: Asked, grouping: Grouping, now: float, spec_revision: int
) -> RolloutState:
    """``s`` after the user's action."""
    action = asked.action
    if action is None:
        return s
    if action == "undo" and asked.undo_to is not None:
        why = f"undo to revision {asked.undo_to}"
        held = spec_revision if spec_revision != asked.undo_to else None
        undone = _begin(s, asked.undo_to, held, why)
        return dataclasses.replace(undone, previous=s.revision)
    if action == "pause":
        return dataclasses.replace(s, paused=True, message=f"{s.message} (paused)".strip())
    if action == "resume":
        s = dataclasses.replace(s, paused=False, spec_held=None)
        if s.phase == "Halted":  # the failed wave gets another deadline
            return dataclasses.replace(
                s,
                phase="Progressing",
                halt=None,
                wave_started_at=now,
                wave_healthy_at=None,
                message=f"wave {s.wave + 1} retried",
            )
        return s
    if action == "promote-all" and s.phase in ("Progressing", "Waiting", "Halted"):
        last = dataclasses.replace(s, wave=max(len(grouping.waves) - 1, 0), halt=None, paused=False)
        return _start(last, grouping, now, "promoted: every wave at once")
    if action == "promote":
        if s.phase == "Waiting":
            return _start(dataclasses.replace(s, paused=False), grouping, now, "promoted")
        if s.phase in ("Progressing", "Halted"):  # this wave counts as passed
            return _next(dataclasses.replace(s, halt=None), grouping, "promoted")
    return s


def _begin(s: RolloutState, revision: int, held: int | None, why: str = "") -> RolloutState:
    """A rollout of ``revision`` from what the clusters run, from the first wave."""
    return RolloutState(
        "Waiting",
        revision,
        previous=s.revision if s.phase == "Complete" else (s.previous or s.revision),
        spec_held=held,
        paused=s.paused,
        message=why or f"revision {revision}",
        last_action=s.last_action,
    )


def _try_start(s: RolloutState, grouping: Grouping, canary: CanaryGate, now: float) -> RolloutState:
    """Start the waiting wave unless a gate holds it."""
    if not grouping.waves:
        return _done(s)
    wave = grouping.waves[min(s.wave, len(grouping.waves) - 1)]
    if canary == "running":
        return dataclasses.replace(s, message="the canary goes first")
    if s.paused:
        return dataclasses.replace(s, message=f"paused before wave {s.wave + 1} ({wave.name})")
    if wave.manual and wave.clusters:
        return dataclasses.replace(
            s, message=f"wave {s.wave + 1} ({wave.name}) waits for promote (manual)"
        )
    return _start(s, grouping, now)


def _start(s: RolloutState, grouping: Grouping, now: float, why: str = "") -> RolloutState:
    if s.wave >= len(grouping.waves):
        return _done(s)
    wave = grouping.waves[s.wave]
    text = f"wave {s.wave + 1} of {len(grouping.waves)} ({wave.name})"
    return dataclasses.replace(
        s,
        phase="Progressing",
        wave_started_at=now,
        wave_healthy_at=None,
        message=f"{why}: {text}" if why else text,
    )


def _next(s: RolloutState, grouping: Grouping, why: str = "") -> RolloutState:
    """The wave after ``s``'s: waiting to start (its gates are tried at once)."""
    if s.wave + 1 >= len(grouping.waves):
        return _done(s)
    return dataclasses.replace(
        s,
        phase="Waiting",
        wave=s.wave + 1,
        wave_started_at=None,
        wave_healthy_at=None,
        message=why or s.message,
    )


def _done(s: RolloutState) -> RolloutState:
    return dataclasses.replace(
        s,
        phase="Complete",
        wave=max(s.wave, 0),
        wave_started_at=None,
        wave_healthy_at=None,
        halt=None,
        message=f"revision {s.revision} on every cluster",
    )


def _halted(
    s: RolloutState, grouping: Grouping, reason: str, clusters: tuple[str, ...], why: str
) -> RolloutState:
    name = grouping.waves[s.wave].name if s.wave < len(grouping.waves) else ""
    where = f"wave {s.wave + 1} ({name})" if name else f"wave {s.wave + 1}"
    on = f" on {some_of(clusters, ', ', 5)}" if clusters else ""
    return dataclasses.replace(
        s,
        phase="Halted",
        halt=Halt(s.wave, name, reason, clusters),
        wave_healthy_at=None,
        message=f"halted at {where}: {why}{on}; later waves keep the revision they run",
    )


def _judge(
    s: RolloutState,
    grouping: Grouping,
    gates: Gates,
    seen: Mapping[str, Seen] | None,
    now: float,
    skipped: Collection[str],
) -> RolloutState:
    """The started wave: passed (the next one waits), held, or halted."""
    if s.wave >= len(grouping.waves):
        return _done(s)
    wave = grouping.waves[s.wave]
    clusters = [c for c in wave.clusters if c not in skipped]
    if not clusters:  # nothing to wait for
        return _next(s, grouping)
    views = {c: (seen or {}).get(c) for c in clusters}
    allowed = tolerated(gates.spec, clusters)
    failed = tuple(c for c, x in views.items() if x is not None and x.failed)
    degraded = tuple(
        c for c, x in views.items() if x is not None and x.applied and x.health == "Degraded"
    )
    if len(failed) + len(degraded) > allowed:
        reason = "Failed" if len(failed) >= len(degraded) else "Degraded"
        why = "its sync failed" if reason == "Failed" else "Degraded by its health rules"
        return _halted(s, grouping, reason, tuple(sorted(failed + degraded)), why)
    waiting = tuple(
        c
        for c, x in views.items()
        if seen is None or x is None or not x.applied or x.health != HEALTHY
    )
    text = f"wave {s.wave + 1} of {len(grouping.waves)} ({wave.name})"
    if len(waiting) <= allowed:
        healthy_at = s.wave_healthy_at if s.wave_healthy_at is not None else now
        if now - healthy_at >= gates.min_healthy_s:
            return _next(s, grouping)
        left = gates.min_healthy_s - (now - healthy_at)
        return dataclasses.replace(
            s,
            wave_healthy_at=healthy_at,
            message=f"{text}: healthy; the next wave starts in {left:.0f}s",
        )
    started = s.wave_started_at if s.wave_started_at is not None else now
    if gates.deadline_s is not None and now - started >= gates.deadline_s:
        why = f"not healthy within its progress deadline ({gates.deadline_s:.0f}s)"
        return _halted(s, grouping, "ProgressDeadline", waiting, why)
    return dataclasses.replace(
        s,
        wave_healthy_at=None,
        message=f"{text}: waiting for {some_of(waiting, ', ', 5)}",
    )


def due_in(s: RolloutState, gates: Gates, now: float) -> float | None:
    """Seconds until ``s``'s clock moves it on (its minimum healthy time or its deadline
    ends), or None."""
    if s.phase != "Progressing" or s.wave_started_at is None:
        return None
    if s.wave_healthy_at is not None:
        return max(0.0, s.wave_healthy_at + gates.min_healthy_s - now)
    if gates.deadline_s is None:
        return None
    return max(0.0, s.wave_started_at + gates.deadline_s - now)


def assign(
    s: RolloutState,
    grouping: Grouping,
    running: Mapping[str, int],
    first: Collection[str] = (),
) -> dict[str, int]:
    """The revision each cluster of ``grouping`` (and ``first``, ahead of the waves) is
    to run: ``s.revision`` where the rollout reached it, else what it runs (``running``),
    or the revision the rollout moves from for a cluster that runs nothing yet."""
    out = {c: s.revision for c in first}
    for index, wave in enumerate(grouping.waves):
        reached = s.phase == "Complete" or index < s.wave or (index == s.wave and s.started)
        for cluster in wave.clusters:
            if reached:
                out[cluster] = s.revision
            else:
                out[cluster] = running.get(cluster, s.previous or s.revision)
    return out
