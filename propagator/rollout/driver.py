"""The rollout within an application reconcile, with its I/O: the revisions kept on the
hub, the revision each cluster is to run (from what the current wave's clusters show and
the user's action), suspension, the Events and the metrics. The decisions are
:mod:`propagator.rollout.machine` (pure)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from api.application import ApplicationPropagation, Override
from api.rollout import ROLLOUT_ACTION_ANNOTATION, ROLLOUT_ACTIONS
from api.selectors import selects
from fleet.snapshot import FleetSnapshot
from kube.connection import KubeConnection
from propagator.canary.machine import recorded_action
from propagator.conditions import some_of
from propagator.observability.events import record_event
from propagator.observability.metrics import Metrics
from propagator.rollout.history import (
    Revisions,
    RevisionTooLarge,
    Source,
    digest_of,
    restored,
    source_of,
)
from propagator.rollout.machine import (
    PHASES,
    Asked,
    CanaryGate,
    Gates,
    RolloutState,
    Seen,
    advance,
    assign,
    due_in,
)
from propagator.rollout.waves import Grouping, waves_of
from propagator.work.members import MemberView
from propagator.work.table import WorkTable
from propagator.work.targets import Planned, Target

Objects = list[dict[str, Any]]


@dataclass(frozen=True)
class Revision:
    """What one revision renders from: its objects and overrides."""

    number: int
    objects: Objects
    overrides: list[Override]


@dataclass(frozen=True)
class Aim:
    """The revision a plan rolls out, before the canary and the waves have their say."""

    before: RolloutState | None
    spec_revision: int
    spec_source: Source
    spec_digest: str
    spec_objects: Objects
    target: Revision
    asked: Asked
    last_action: str | None
    problem: str = ""
    """What was wrong with the user's action (an undo to a revision not kept)."""
    spec_kept: bool = False
    """The spec's revision is kept on the hub already (the last plan or the status says
    so): nothing to write."""
    history: tuple[int, ...] = ()
    """The revisions kept, as the status says (until they are listed)."""


@dataclass(frozen=True)
class RolloutPlan:
    """One plan's rollout: its state and the revision each cluster is to run."""

    state: RolloutState
    before: RolloutState | None
    target_revision: Revision
    """What the target revision renders from."""
    grouping: Grouping
    gates: Gates
    assignment: dict[str, int]
    """The revision each placed cluster is to run."""
    held: frozenset[str]
    """Clusters that get no writes (suspended, or their revision is no longer kept)."""
    others: tuple[Revision, ...]
    """The revisions other than the target some cluster runs, to render for them."""
    spec_revision: int
    spec_source: Source
    spec_digest: str
    waves_set: bool
    """Whether ``spec.rollout.waves`` is set (metrics are kept per application then)."""
    history: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()
    suspended: bool = False
    """``spec.suspend``: removals are held too."""
    spec_kept: bool = False
    """The spec's revision is kept on the hub already."""
    limit: int = 10
    canary_first: frozenset[str] = field(default_factory=frozenset)

    @property
    def target(self) -> int:
        return self.state.revision

    def updated(self) -> int:
        return sum(1 for r in self.assignment.values() if r == self.state.revision)


class RolloutPlanned(Planned, Protocol):
    """What the rollout reads of the last plan."""

    @property
    def rollout(self) -> RolloutPlan | None: ...


def undo_of(value: str) -> int | None:
    """The revision ``undo:N`` names (None: ``undo`` alone, or not a number)."""
    head = value.split("/", 1)[0]
    _, _, number = head.partition(":")
    return int(number) if number.isdigit() and len(number) < 10 else None


class RolloutDriver:
    """Runs the rollouts of the applications one reconciler plans."""

    def __init__(
        self, hub: KubeConnection, table: WorkTable, view: MemberView, metrics: Metrics
    ) -> None:
        self.hub, self.table, self.view, self.metrics = hub, table, view, metrics
        self.revisions = Revisions(hub)

    def forget(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        self.revisions.forget(namespace, name)
        for gauge in (self.metrics.rollout_wave, self.metrics.rollout_updated):
            with contextlib.suppress(KeyError):  # (never set: no waves)
                gauge.remove(namespace, name)
        for phase in PHASES:
            with contextlib.suppress(KeyError):
                self.metrics.rollout_phase.remove(namespace, name, phase)

    # -- the revision to roll out ---------------------------------------------------------

    async def aim(
        self,
        app: ApplicationPropagation,
        obj: Mapping[str, Any],
        objects: Sequence[Mapping[str, Any]],
        last: RolloutPlanned | None,
    ) -> Aim:
        """The revision this plan rolls out: the spec's, the one an undo asks for, or the
        one an undo set the spec's aside for. Raises ApiError (the hub)."""
        meta = obj["metadata"]
        namespace, name = meta.get("namespace", "default"), meta["name"]
        before = last.rollout.state if last is not None and last.rollout is not None else None
        if before is None:
            before = RolloutState.from_status((obj.get("status") or {}).get("rollout"))
        overrides = [o.model_dump(by_alias=True, exclude_none=True) for o in app.spec.overrides]
        spec_source = source_of(objects, overrides)
        digest = digest_of(spec_source)
        spec_revision, spec_kept = await self._number(namespace, name, digest, before, obj, last)
        value = (meta.get("annotations") or {}).get(ROLLOUT_ACTION_ANNOTATION)
        last_action = before.last_action if before is not None else None
        action, problem = _action_of(value, last_action)
        asked = Asked(action)
        if action == "undo" and before is not None:
            wanted = undo_of(str(value)) or await self._before(namespace, name, before)
            kept = await self.revisions.listed(namespace, name)
            if wanted is None or (wanted not in kept and wanted != spec_revision):
                asked = Asked(None)
                listed = ", ".join(str(n) for n in sorted(kept)) or "none"
                problem = (
                    f"undo: revision {wanted} is no longer kept (kept: {listed})"
                    if wanted is not None
                    else "undo: no earlier revision is kept"
                )
            else:
                asked = Asked("undo", wanted)
        if value and recorded_action(value) != last_action:
            last_action = recorded_action(value)
        number = _target_number(before, spec_revision, asked)
        spec = Revision(spec_revision, [dict(o) for o in objects], list(app.spec.overrides))
        target = spec
        if number != spec_revision:
            found = await self._revision(namespace, name, number, objects)
            if found is None:  # the held revision is gone: the spec's rolls out
                problem = problem or f"revision {number} is no longer kept"
                before = dataclasses.replace(before, spec_held=None) if before else None
            else:
                target = found
        history = ((obj.get("status") or {}).get("rollout") or {}).get("history")
        return Aim(
            before,
            spec_revision,
            spec_source,
            digest,
            spec.objects,
            target,
            asked,
            last_action,
            problem,
            spec_kept,
            tuple(n for n in history if isinstance(n, int)) if isinstance(history, list) else (),
        )

    async def _number(
        self,
        namespace: str,
        name: str,
        digest: str,
        before: RolloutState | None,
        obj: Mapping[str, Any],
        last: RolloutPlanned | None,
    ) -> tuple[int, bool]:
        """The number of the revision ``digest`` — the one the last plan or the status
        names with it (kept already: True), one kept on the hub, or the next — and
        whether it is known to be kept."""
        if last is not None and last.rollout is not None and last.rollout.spec_digest == digest:
            return last.rollout.spec_revision, True
        status = (obj.get("status") or {}).get("rollout") or {}
        number = status.get("specRevision")
        if status.get("specHash") == digest and isinstance(number, int) and number > 0:
            return number, True
        if before is None and not status:
            known = self.revisions.known(namespace, name)
            if known is None:  # a new application: its first revision
                return 1, False
        known = await self.revisions.listed(namespace, name)
        for number, kept in known.items():
            if kept.digest == digest:
                return number, True
        highest = max(known, default=0)
        if before is not None:
            highest = max(highest, before.revision, before.previous or 0, before.spec_held or 0)
        return highest + 1, False

    async def _before(self, namespace: str, name: str, s: RolloutState) -> int | None:
        """The revision ``undo`` returns to: the one before the current, if kept."""
        kept = await self.revisions.listed(namespace, name)
        if s.previous is not None and s.previous in kept and s.previous != s.revision:
            return s.previous
        return max((n for n in kept if n < s.revision), default=None)

    async def _revision(
        self, namespace: str, name: str, number: int, current: Sequence[Mapping[str, Any]]
    ) -> Revision | None:
        source = await self.revisions.source(namespace, name, number)
        if source is None:
            return None
        overrides = [Override.model_validate(o) for o in source.get("overrides") or []]
        return Revision(number, restored(source, current), overrides)

    # -- the waves ------------------------------------------------------------------------

    async def plan(
        self,
        aim: Aim,
        app: ApplicationPropagation,
        obj: Mapping[str, Any],
        targets: Sequence[Target],
        snapshot: FleetSnapshot,
        last: RolloutPlanned | None,
        key: str,
        now: float,
        canary: CanaryGate = "none",
        canary_clusters: frozenset[str] = frozenset(),
    ) -> RolloutPlan:
        """The rollout of this plan: its next state and the revision each cluster is to
        run (nothing is written: see :meth:`commit`). Raises ApiError (the hub)."""
        meta = obj["metadata"]
        namespace, name = meta.get("namespace", "default"), meta["name"]
        spec = app.spec.rollout.waves
        placed = [t.cluster for t in targets]
        labels = {c: dict(snapshot.clusters[c].labels) for c in placed if c in snapshot.clusters}
        first = canary_clusters if spec is not None else frozenset()
        grouping = waves_of(spec, placed, labels, first)
        gates = Gates.of(spec)
        held = suspended_clusters(app, placed, labels)
        seen = None
        if (
            last is not None
            and last.rollout is not None
            and last.rollout.state.phase == "Progressing"  # (else nothing judges a wave)
            and last.rollout.state.same_stage(aim.before)
        ):
            seen = self.seen(key, last)
        state = advance(
            aim.before,
            aim.spec_revision,
            grouping,
            gates,
            seen,
            aim.asked,
            now,
            suspended=app.spec.suspend,
            skipped=held,
            canary=canary if spec is not None else "none",
        )
        state = dataclasses.replace(
            state,
            last_action=aim.last_action,
            message=f"{state.message}; {aim.problem}" if aim.problem else state.message,
        )
        running = _running(last, obj)
        assignment = assign(state, grouping, running, first)
        for cluster in held:  # a suspended cluster keeps what it runs
            if cluster in running:
                assignment[cluster] = running[cluster]
        others: dict[int, Revision] = {}
        lost: set[int] = set()
        target = aim.target
        if target.number != state.revision:  # (the machine fell back to the spec's)
            target = Revision(state.revision, aim.spec_objects, list(app.spec.overrides))
        for number in sorted(set(assignment.values())):
            if number in (state.revision, *others) or number in lost:
                continue
            if number == aim.spec_revision:
                others[number] = Revision(number, aim.spec_objects, list(app.spec.overrides))
                continue
            found = await self._revision(namespace, name, number, aim.spec_objects)
            if found is not None:
                others[number] = found
            else:
                lost.add(number)
        notes = list(grouping.notes)
        gone = {c for c, n in assignment.items() if n in lost}
        if gone:  # nothing to render it from: left as it is
            notes.append(
                f"revision(s) {', '.join(str(n) for n in sorted(lost))} no longer kept: "
                f"{', '.join(sorted(gone)[:5])} left as they are until the rollout reaches them"
            )
            for cluster in gone:
                assignment[cluster] = state.revision
        listed = self.revisions.known(namespace, name)
        history = tuple(sorted({*(aim.history if listed is None else listed), state.revision}))
        return RolloutPlan(
            state,
            aim.before,
            target,
            grouping,
            gates,
            assignment,
            frozenset(held | gone) if not app.spec.suspend else frozenset(placed),
            tuple(others.values()),
            aim.spec_revision,
            aim.spec_source,
            aim.spec_digest,
            spec is not None,
            history,
            tuple(notes),
            app.spec.suspend,
            aim.spec_kept,
            app.spec.rollout.revision_history_limit,
            first,
        )

    def seen(self, key: str, plan: RolloutPlanned) -> dict[str, Seen]:
        """What each cluster of ``plan`` shows of its work: in line or not, its health
        from the member's caches, and whether its sync counts as failed."""
        namespace = key.partition("/")[0]
        out = {}
        for t in plan.targets:
            state = self.table.state(key, t.cluster)
            applied = (
                state is not None
                and state.applied
                and state.revision == plan.revisions.get(t.cluster)
            )
            rendered = plan.rendered.get(t.cluster) or []
            health = self.view.health(t.cluster, rendered, namespace)
            out[t.cluster] = Seen(applied, health, state is not None and state.failed)
        return out

    def due(self, key: str, plan: RolloutPlanned, now: float) -> float | None:
        """After a status refresh: plan again at once when what the clusters show moves
        the rollout on, else when its clock does (None: nothing is due)."""
        if plan.rollout is None or plan.rollout.state.phase != "Progressing":
            return None
        r = plan.rollout
        moved = advance(
            r.state,
            r.state.revision,
            r.grouping,
            r.gates,
            self.seen(key, plan),
            Asked(),
            now,
            skipped=r.held,
        )
        if not moved.same_stage(r.state) or moved.phase != r.state.phase:
            return 0.0
        if moved.wave_healthy_at is not None and r.state.wave_healthy_at is None:
            return 0.0  # the minimum healthy time starts: the status says since when
        return due_in(moved, r.gates, now)

    # -- once the plan goes ahead ---------------------------------------------------------

    async def commit(self, obj: Mapping[str, Any], plan: RolloutPlan, now: float) -> str:
        """Keep the spec's revision on the hub, and the Events and metrics of the move;
        returns a note for the status ("" when all was kept). Raises ApiError."""
        protected = {plan.state.revision, *plan.assignment.values()}
        if plan.state.previous is not None:
            protected.add(plan.state.previous)
        note = ""
        if not plan.spec_kept:
            try:
                await self.revisions.keep(
                    obj, plan.spec_revision, plan.spec_source, plan.limit, protected
                )
            except RevisionTooLarge as exc:
                note = str(exc)
        await self._announce(obj, plan, now)
        return note

    async def _announce(self, obj: Mapping[str, Any], plan: RolloutPlan, now: float) -> None:
        meta = obj["metadata"]
        labels = (meta.get("namespace", "default"), meta["name"])
        before, after = plan.before, plan.state
        if plan.waves_set:
            total = len(plan.grouping.waves)
            wave = total if after.phase == "Complete" else after.wave + 1
            self.metrics.rollout_wave.labels(*labels).set(wave)
            self.metrics.rollout_updated.labels(*labels).set(plan.updated())
            for phase in PHASES:
                self.metrics.rollout_phase.labels(*labels, phase).set(
                    1 if phase == after.phase else 0
                )
        if before is None:
            return
        moved_on = before.revision == after.revision and after.wave > before.wave
        if moved_on and before.wave_started_at is not None:
            self.metrics.rollout_wave_seconds.observe(max(0.0, now - before.wave_started_at))
        if (before.phase, before.wave, before.started, before.revision, before.paused) == (
            after.phase,
            after.wave,
            after.started,
            after.revision,
            after.paused,
        ):
            return
        waves = plan.grouping.waves
        name = waves[after.wave].name if after.wave < len(waves) else ""
        if after.phase == "Halted" and before.phase != "Halted":
            reason = after.halt.reason if after.halt else "Unknown"
            self.metrics.rollout_halts.labels(reason).inc()
            await record_event(self.hub, obj, "Warning", "RolloutHalted", after.message)
        elif after.phase == "Complete" and before.phase != "Complete":
            await record_event(self.hub, obj, "Normal", "RolloutComplete", after.message)
        elif (
            after.phase == "Progressing"
            and after.started
            and (
                not before.started or before.wave != after.wave or before.revision != after.revision
            )
        ):
            clusters = waves[after.wave].clusters if after.wave < len(waves) else ()
            await record_event(
                self.hub,
                obj,
                "Normal",
                "WaveStarted",
                f"wave {after.wave + 1} of {len(waves)} ({name}): revision {after.revision} "
                f"on {some_of(clusters, ', ', 10)}",
            )
        elif after.phase in ("Waiting", "Suspended") and after.phase != before.phase:
            await record_event(self.hub, obj, "Normal", f"Rollout{after.phase}", after.message)


def _action_of(value: str | None, last: str | None) -> tuple[str | None, str]:
    """(action to take now, or None; a problem with the value, or "")."""
    if not value or recorded_action(value) == last:
        return None, ""
    action = value.split("/", 1)[0].split(":", 1)[0]
    if action not in ROLLOUT_ACTIONS:
        shown = value if len(value) <= 100 else value[:100] + "…"
        return None, (
            f"{ROLLOUT_ACTION_ANNOTATION} {shown!r} is not one of "
            f"{', '.join(ROLLOUT_ACTIONS)} (undo:N for revision N; optionally followed "
            "by /anything)"
        )
    return action, ""


def _target_number(before: RolloutState | None, spec_revision: int, asked: Asked) -> int:
    """The revision the machine will roll out (:func:`machine.advance` agrees)."""
    if asked.action == "undo" and asked.undo_to is not None:
        return asked.undo_to
    if before is None:
        return spec_revision
    if asked.action == "resume" or before.spec_held != spec_revision:
        return spec_revision
    return before.revision


def suspended_clusters(
    app: ApplicationPropagation, placed: Sequence[str], labels: Mapping[str, Mapping[str, str]]
) -> frozenset[str]:
    """The placed clusters ``spec.suspendedClusters`` names or selects."""
    chosen = app.spec.suspended_clusters
    if chosen is None:
        return frozenset()
    named = set(chosen.clusters)
    return frozenset(
        c
        for c in placed
        if c in named
        or (
            chosen.cluster_selector is not None
            and selects(chosen.cluster_selector, labels.get(c) or {})
        )
    )


def _running(last: RolloutPlanned | None, obj: Mapping[str, Any]) -> dict[str, int]:
    """The revision each cluster runs: as the last plan assigned, else as the status
    says (after a restart)."""
    if last is not None and last.rollout is not None:
        return dict(last.rollout.assignment)
    out = {}
    for line in (obj.get("status") or {}).get("clusters") or []:
        if isinstance(line, Mapping):
            number = line.get("rolloutRevision")
            if isinstance(line.get("name"), str) and isinstance(number, int):
                out[str(line["name"])] = number
    return out
