"""What each cluster runs of an application with a canary, and what its status says of
it (pure): the stable revision to render for the clusters that run it, each cluster's
objects composed as the canary's state has it run them, ``status.canary`` and the
``CanaryProgressing`` condition."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from api.application import Override
from propagator.canary.copies import (
    DEPLOYMENT,
    CanaryError,
    SplitKinds,
    compose,
    is_canary_copy,
    kind_key_of,
    name_of,
    replicas_of,
)
from propagator.canary.machine import RUNNING
from propagator.canary.plan import CanaryPlan
from propagator.render.manifests import RenderError
from propagator.work.members import MemberView
from propagator.work.targets import Target

Objects = list[dict[str, Any]]


@dataclass(frozen=True)
class StableRequest:
    """The stable revision's workloads to render, and for which clusters."""

    workloads: Sequence[Mapping[str, Any]]
    overrides: Sequence[Override]
    clusters: list[str]


def stable_request(plan: CanaryPlan, rendered: Mapping[str, Objects]) -> StableRequest | None:
    """What must be rendered of the stable revision for the clusters that run it (whole,
    or split with the canary), or None: none do, or it is not kept."""
    needs = [c for c in rendered if plan.mode(c) in ("stable", "split")]
    if not needs or plan.stable is None:
        return None
    overrides = [Override.model_validate(o) for o in plan.stable.get("overrides") or []]
    return StableRequest(plan.stable.get("workloads") or [], overrides, needs)


def compose_clusters(
    plan: CanaryPlan, rendered: Mapping[str, Objects], stable: Mapping[str, Objects]
) -> dict[str, Objects]:
    """Each cluster's objects as the canary's state has it run them (``stable``: the
    stable revision's Deployments per cluster, as :func:`stable_request` asked). Raises
    RenderError."""
    out = {}
    for cluster, objects in rendered.items():
        # The stable render of a chart holds all its objects: its split workloads only.
        before = {name_of(d): d for d in stable.get(cluster) or [] if kind_key_of(d) in plan.kinds}
        try:
            out[cluster] = compose(
                objects, before, plan.mode(cluster), plan.state.weight, plan.kinds
            )
        except CanaryError as exc:
            raise RenderError(f"{cluster}: canary: {exc}") from exc
    return out


def canary_status(
    plan: CanaryPlan,
    targets: Sequence[Target],
    rendered: Mapping[str, Objects],
    view: MemberView,
    namespace: str,
) -> dict[str, Any]:
    """``status.canary`` of ``plan`` with ready counts from the members' caches."""
    lines = []
    for t in targets:
        if t.cluster not in plan.canary_clusters:
            continue
        line: dict[str, Any] = {"name": t.cluster, "weight": 0}
        mode = plan.mode(t.cluster)
        if mode in ("split", "folding"):
            line["weight"] = plan.state.weight
        for obj in rendered.get(t.cluster) or []:
            # Ready counts where they are known (a split Deployment's status); any split
            # kind's copies gate the steps by their health.
            fields = plan.kinds.get(kind_key_of(obj))
            if kind_key_of(obj) != DEPLOYMENT or fields is None:
                continue
            field = "canaryReady" if is_canary_copy(obj, plan.kinds) else "stableReady"
            live = view.live(t.cluster, obj, namespace) or {}
            ready = (live.get("status") or {}).get("readyReplicas") or 0
            line[field] = f"{ready}/{replicas_of(obj, fields)}"
        if t.cluster in plan.state.promoted:
            line["promoted"] = True
        lines.append(line)
    return plan.state.status(lines)


def unsupported(
    objects: Sequence[Mapping[str, Any]],
    kinds: SplitKinds,
    spread: Callable[[str, str], bool],
) -> tuple[str, ...]:
    """``Kind name`` of the workloads a canary does not run as two copies: those whose
    replicas are spread (``spread(apiVersion, kind)``: divided or per node) but not split
    (``kinds``)."""
    return tuple(
        f"{kind_key_of(o)[1]} {name_of(o)}"
        for o in objects
        if kind_key_of(o) not in kinds and spread(*kind_key_of(o))
    )


def condition_of(
    plan: CanaryPlan, objects: Sequence[Mapping[str, Any]]
) -> tuple[str, bool, str, str]:
    """The CanaryProgressing condition of ``plan``: CanaryUnsupported when the objects
    hold no workload a canary splits, only ones that roll out at once (StatefulSets,
    DaemonSets)."""
    state = plan.state
    message = state.message or state.phase
    if plan.unsupported:
        note = (
            f"{', '.join(plan.unsupported[:5])} roll(s) out at once: canary steps run "
            "Deployments and the kinds whose interpreter rules say canaryCopies"
        )
        if not any(kind_key_of(o) in plan.kinds for o in objects):
            return ("CanaryProgressing", False, "CanaryUnsupported", note)
        message = f"{message}; {note}"
    return ("CanaryProgressing", state.phase in RUNNING, state.phase, message)
