"""A decision as people read it: one line per cluster, and the layers that were tried."""

from __future__ import annotations

from collections.abc import Mapping

from propagator.scheduler.types import Decision


def changes(current: Mapping[str, int], decision: Decision) -> list[str]:
    """What the decision changes from where the application runs: ``current: a=8 b=8``,
    then a line per cluster that gains, loses, joins or leaves (or ``no change``)."""
    if not current:
        return ["current: runs nowhere yet"]
    lines = ["current: " + " ".join(f"{c}={n}" for c, n in sorted(current.items()))]
    after = {p.cluster: p.replicas for p in decision.placed} if decision.schedulable else {}
    if not decision.schedulable:
        return [*lines, "change: none (unschedulable: what runs stays where it is)"]
    for cluster in sorted(set(current) | set(after)):
        before, now = current.get(cluster), after.get(cluster)
        if before == now:
            continue
        if before is None:
            lines.append(f"change: {cluster} joins with {now}")
        elif now is None:
            lines.append(f"change: {cluster} leaves (had {before})")
        else:
            lines.append(f"change: {cluster} {before} -> {now}")
    if len(lines) == 1:
        lines.append("change: none")
    return lines


def explain(decision: Decision, current: Mapping[str, int] | None = None) -> str:
    """A table of every cluster's verdict (filtered by which plugin and why, or its scores),
    then the layers tried, the short summary, and, given ``current`` (replicas per cluster
    where the application runs), what changes."""
    plugins = sorted({p for v in decision.verdicts.values() for p in v.scores})
    header = ["CLUSTER", "RESULT", "REPLICAS", "SCORE", *plugins, "WHY"]
    rows = [header]
    order = sorted(
        decision.verdicts.values(),
        key=lambda v: (not v.selected, v.filtered_by is not None, -(v.score or 0), v.cluster),
    )
    for v in order:
        if v.selected:
            result = "selected"
        elif v.filtered_by:
            result = f"filtered:{v.filtered_by}"
        else:
            result = "not selected"
        why = "" if v.selected else f"{v.reason}: {v.detail}" if v.detail else v.reason or ""
        rows.append(
            [
                v.cluster,
                result,
                "" if v.replicas is None else str(v.replicas),
                "" if v.score is None else str(v.score),
                *[f"{v.scores[p]:.0f}" if p in v.scores else "" for p in plugins],
                why,
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    lines = [
        "  ".join([*(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)), r[-1]]).rstrip()
        for r in rows
    ]
    lines.append("")
    for a in decision.attempts:
        lines.append(f"layer {a.layer}: {a.candidates} candidates, {a.feasible} fit -> {a.outcome}")
    if decision.full_scan:
        lines.append(f"full scan: {decision.full_scan_reason}")
    lines.append(f"{'Scheduled' if decision.schedulable else 'Unschedulable'}: {decision.summary}")
    if current is not None:
        lines += changes(current, decision)
    return "\n".join(lines)
