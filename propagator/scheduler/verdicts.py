"""What the plugins' answers mean for a decision: a filter's verdict (Unschedulable,
Failed, or a plugin that raised), a clamped score, the verdicts of the ranked clusters and
of the fleet members that never became candidates, and the one-line summary the Scheduled
condition shows."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from fleet.snapshot import ClusterInfo
from propagator.scheduler.plugins import (
    ClusterAffinity,
    Failed,
    FilterPlugin,
    ScorePlugin,
    Unschedulable,
)
from propagator.scheduler.select import Selection
from propagator.scheduler.types import LayerAttempt, Placed, SchedulingContext, Verdict

ANY_LAYER = "*"
PREFILTER = "PreFilter"
PLUGIN_ERROR = "plugin error"
_AFFINITY = ClusterAffinity()


def judge(plugin: FilterPlugin, cluster: ClusterInfo, ctx: SchedulingContext) -> Verdict | None:
    """The filter's verdict on one cluster (None: kept); a plugin that raises has failed."""
    try:
        result = plugin.filter(cluster, ctx)
    except Exception as exc:  # a third-party plugin's bug must not stop scheduling
        result = Failed(PLUGIN_ERROR, f"{type(exc).__name__}: {exc}"[:500])
    if result is None:
        return None
    if isinstance(result, tuple):
        result = Unschedulable(*result)
    return Verdict(cluster.name, plugin.name, result.reason, result.detail)


def score_of(plugin: ScorePlugin, cluster: ClusterInfo, ctx: SchedulingContext) -> float | Failed:
    try:
        return plugin.score(cluster, ctx)
    except Exception as exc:  # a third-party plugin's bug must not stop scheduling
        return Failed(PLUGIN_ERROR, f"{type(exc).__name__}: {exc}"[:500])


def clamped(value: float) -> float:
    """A score within 0-100 (NaN: 0)."""
    if not value >= 0.0:
        return 0.0
    return 100.0 if value > 100.0 else float(value)


def prefiltered(name: str, cluster: ClusterInfo | None, ctx: SchedulingContext) -> Verdict:
    """The verdict of a fleet member that never became a candidate."""
    ctx = replace(ctx, affinity_indexed=False)
    layers = ctx.placement.layers
    if cluster is None:
        return Verdict(name, PREFILTER, "no data", "not in the cluster data scanned")
    if layers and cluster.layer not in layers:
        return Verdict(
            name,
            PREFILTER,
            "excluded by placement",
            f"layer {cluster.layer} is not in placement.layers",
        )
    rejected = _AFFINITY.filter(cluster, ctx)
    if rejected is not None:
        return Verdict(name, PREFILTER, "excluded by placement", rejected[1])
    return Verdict(
        name,
        PREFILTER,
        "not tried",
        f"layer {cluster.layer} was not needed: an earlier layer served",
    )


_COUNT = operator.itemgetter(1)


def _counts(reasons: dict[str, int]) -> str:
    """``7 tainted not-ready, 5 insufficient cpu``: the most frequent first, then by name."""
    if len(reasons) == 1:  # the common case: nothing to order
        ((reason, n),) = reasons.items()
        return f"{n} {reason}"
    ordered = sorted(reasons.items())
    ordered.sort(key=_COUNT, reverse=True)  # stable: equal counts stay by name
    return ", ".join([f"{n} {r}" for r, n in ordered])


def summary(
    layers: Sequence[tuple[LayerAttempt, dict[str, int]]], members: int, placed: int | None
) -> str:
    """``3/12 clusters fit; placed on 3 in layer edge`` or ``0/12 clusters fit: 7 tainted
    not-ready, 5 insufficient cpu`` (per layer when several were tried; ``placed``: on how
    many clusters, None when unschedulable)."""
    parts = []
    for a, reasons in layers:
        where = "" if a.layer == ANY_LAYER else f"layer {a.layer}: "
        excluded = members - a.candidates if a.layer == ANY_LAYER else 0
        if excluded:
            why = "excluded by placement"
            reasons = {**reasons, why: reasons.get(why, 0) + excluded}
        text = (
            f"{where}{a.feasible}/{members if a.layer == ANY_LAYER else a.candidates} clusters fit"
        )
        if reasons:
            text += f": {_counts(reasons)}"
        if a.outcome != "selected":
            text += f" ({a.outcome})" if a.feasible else ""
        parts.append(text)
    if placed is not None:
        parts.append(f"placed on {placed}")
    return "; ".join(parts)


def ranked_verdicts(
    scored: list[tuple[float, str, ClusterInfo, int]],
    parts: Callable[[int], dict[str, float]],
    placed: tuple[Placed, ...],
    selection: Selection,
    verdicts: dict[str, Verdict],
    outcome: str | None,
    label: str,
) -> dict[str, Verdict]:
    """The verdicts of a pass's ranked clusters not dropped by a filter (``verdicts``):
    chosen, left out by spread, not selected, or in a layer that failed (``outcome``)."""
    index = {name: (neg, j) for neg, name, _, j in scored}
    by_name = {p.cluster: p for p in placed}
    spread_out = selection.dropped()
    dropped = frozenset(verdicts) | {name for name, _ in spread_out}
    out = {}
    for name, why in spread_out:
        neg, j = index[name]
        out[name] = Verdict(name, "Spread", "spread", why, parts(j), round(-neg))
    for neg, name, _, j in scored:
        if name in dropped:
            continue
        chosen = by_name.get(name)
        out[name] = Verdict(
            name,
            scores=parts(j),
            score=round(-neg),
            selected=chosen is not None,
            replicas=chosen.replicas if chosen else None,
            reason=None if chosen else "not selected" if outcome is None else "layer failed",
            detail=None
            if chosen
            else "lower score than the chosen"
            if outcome is None
            else f"layer {label} could not serve the placement: {outcome}",
        )
    return out


def unevaluated(
    members: frozenset[str],
    clusters: Mapping[str, ClusterInfo],
    ctx: SchedulingContext,
    evaluated: Mapping[str, Verdict],
) -> dict[str, Verdict]:
    """The verdicts of the fleet members no pass looked at (the indexes ruled them out)."""
    return {
        name: prefiltered(name, clusters.get(name), ctx)
        for name in sorted(members - evaluated.keys())
    }
