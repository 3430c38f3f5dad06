"""What a reconcile says of an application's charts: a condition naming each chart's
resolved version and digest, and the stop when a chart cannot be used."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from api.charts import is_chart_release
from propagator.charts.releases import ChartError, ChartResolution
from propagator.conditions import iso
from propagator.propagation.plan import Condition, Stop
from propagator.rollout.driver import RolloutPlan

CHARTS_CONDITION = "ChartsResolved"


def chart_stop(exc: ChartError) -> Stop:
    """Nothing is applied or pruned anywhere (what runs stays); retried when the registry
    did not answer."""
    why = f"{exc}; nothing was applied"
    return Stop([("Applied", False, exc.reason, why)], exc, retry=exc.retry)


def charts_condition(resolutions: Sequence[ChartResolution]) -> Condition:
    """ChartsResolved: each chart's version and digest (LastResolved: a registry did not
    answer, the last resolution is used)."""
    stale = [r.stale for r in resolutions if r.stale]
    shown = ", ".join(_shown(r) for r in resolutions)
    if stale:
        return (CHARTS_CONDITION, True, "LastResolved", "; ".join(stale)[:1000])
    return (CHARTS_CONDITION, True, "Resolved", shown[:1000])


def _shown(r: ChartResolution) -> str:
    text = f"{r.release}: {r.source.name} {r.resolved.version} ({r.resolved.digest[:19]}…)"
    if r.resolved.hooks:
        text += f"; its hooks are not run, left out: {', '.join(r.resolved.hooks)}"
    return text


def chart_status(resolution: ChartResolution) -> dict[str, Any]:
    """One line of ``status.charts``."""
    resolved = resolution.resolved
    line: dict[str, Any] = {
        "release": resolution.release,
        "chart": resolution.source.name,
        "repository": resolution.source.repository,
        "version": resolved.version[:256],
        "digest": resolved.digest,
        "resolvedAt": iso(resolved.at),
    }
    if resolved.app_version:
        line["appVersion"] = resolved.app_version
    return line


def charts_by_cluster(
    rollout: RolloutPlan | None, clusters: Iterable[str]
) -> dict[str, tuple[str, ...]]:
    """``release: chart version`` of the charts each cluster's revision renders (as the
    rollout has each cluster run a revision)."""
    if rollout is None:
        return {}
    revisions = (rollout.target_revision, *rollout.others)
    shown = {r.number: _charts_of(r.objects) for r in revisions}
    if not any(shown.values()):
        return {}
    target = rollout.target_revision.number
    return {c: shown.get(rollout.assignment.get(c, target), ()) for c in clusters}


def _charts_of(objects: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    return tuple(
        f"{(o.get('metadata') or {}).get('name')}: "
        f"{(o.get('chart') or {}).get('name')} {(o.get('chart') or {}).get('version')}"[:253]
        for o in objects
        if is_chart_release(o)
    )[:8]
