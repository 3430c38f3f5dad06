"""What the fleet manager writes: MemberCluster and Fleet status, and the health taints.

Pure functions of what the monitors observed and what the hub holds, so that "nothing
changed" is a plain comparison and no write is sent for it.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping
from typing import Any

from api.selectors import selects, stored_selector
from api.taints import NOT_READY_TAINT, UNREACHABLE_TAINT
from fleet.member import MemberMonitor
from fleet.readiness import Health
from propagator.conditions import condition

CONTROLLER_TAINTS = (NOT_READY_TAINT, UNREACHABLE_TAINT)
TAINT_EFFECT = "NoSchedule"
PROBE_FAILED_PREFIX = "probes fail: "
DISCOVERY_FIELDS = ("kubernetesVersion", "apiEnablements")
CAPACITY_FIELDS = ("nodes", "resources")
"""The status fields of ``fleet.capacity.summarize``."""


def without_capacity(status: Mapping[str, Any] | None) -> dict[str, Any]:
    """``status`` without its :data:`CAPACITY_FIELDS`."""
    return {k: v for k, v in (status or {}).items() if k not in CAPACITY_FIELDS}


def member_status(
    member: Mapping[str, Any], monitor: MemberMonitor | None, now: str
) -> dict[str, Any]:
    """The MemberCluster status for what ``monitor`` has observed."""
    previous = (member.get("status") or {}).get("conditions")
    generation = (member.get("metadata") or {}).get("generation")
    status: dict[str, Any] = {"observedGeneration": generation}
    if monitor is None or not monitor.usable:
        why = monitor.config_error if monitor else "no kubeconfig Secret referenced"
        status["conditions"] = [
            condition("Ready", False, "InvalidKubeconfig", str(why), generation, previous, now)
        ]
        return status
    health = monitor.health
    if health.ready:
        ready = condition(
            "Ready",
            True,
            "ProbeSucceeded",
            "its agent renews its heartbeat"
            if monitor.mode == "Pull"
            else "the API server answers /readyz",
            generation,
            previous,
            now,
        )
    elif health.ready is None:
        ready = condition(
            "Ready",
            None,
            "Probing",
            health.last_error or "not probed yet",
            generation,
            previous,
            now,
        )
    else:
        ready = condition(
            "Ready",
            False,
            "ProbeFailed",
            # No counters or times: the message must not change on every probe.
            f"{PROBE_FAILED_PREFIX}{health.last_error}",
            generation,
            previous,
            now,
        )
    status["conditions"] = [ready]
    # Until a new monitor (a restart, another replica taking the lead) has discovered the
    # member and listed its nodes and pods, what the status records stays: the hub keeps
    # it anyway (a merge patch), and the fleet snapshot must not read a Ready member as
    # serving no kind and holding nothing, which would make every decision unschedulable.
    recorded = member.get("status") or {}
    if monitor.version:
        status["kubernetesVersion"] = monitor.version
        status["apiEnablements"] = monitor.enablements
    else:
        status.update({k: recorded[k] for k in DISCOVERY_FIELDS if k in recorded})
    if (capacity := monitor.capacity()) is not None:
        status.update(capacity)
    else:
        status.update({k: recorded[k] for k in CAPACITY_FIELDS if k in recorded})
    status["lastProbeTime"] = now
    return status


def recorded_health(member: Mapping[str, Any], now: float) -> Health:
    """The health the MemberCluster's status records, as the start of a new monitor's
    (``now``: time.monotonic()). A controller that takes over (a restart, another replica
    leading) would otherwise read every member as never probed until its own probes
    decide: Ready would turn Unknown on the hub, and the not-ready and unreachable taints
    would come off meanwhile."""
    conditions = (member.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    if ready is None or ready.get("reason") not in ("ProbeSucceeded", "ProbeFailed"):
        return Health()
    if ready.get("status") == "True":
        return Health(ready=True)
    try:
        since = dt.datetime.fromisoformat(str(ready.get("lastTransitionTime"))).timestamp()
    except ValueError:
        since = time.time()
    return Health(
        ready=False,
        not_ready_since=now - max(0.0, time.time() - since),
        last_error=str(ready.get("message") or "").removeprefix(PROBE_FAILED_PREFIX) or None,
    )


def desired_taints(monitor: MemberMonitor | None, now: float) -> list[dict[str, str]]:
    """The controller's taints for this member (NoSchedule: nothing new lands there)."""
    if monitor is None:
        return []
    keys = monitor.health.taints(now, monitor.policy)
    if not monitor.usable:
        keys = list(CONTROLLER_TAINTS[:1])  # unusable kubeconfig: not ready, never probed
    return [{"key": k, "effect": TAINT_EFFECT} for k in keys]


def shown(monitor: MemberMonitor, now: float) -> tuple[object, ...]:
    """What of ``monitor`` a probe can change in :func:`member_status` (capacity aside:
    its watches report that) and in :func:`desired_taints` at ``now``: two probes giving
    the same need no status pass between them."""
    health = monitor.health
    return (
        health.ready,
        health.last_error,
        tuple(health.taints(now, monitor.policy)),
        monitor.version,
        monitor.enablements,
    )


def controller_taints(member: Mapping[str, Any]) -> list[dict[str, str]]:
    """The controller's taints currently on the MemberCluster."""
    return [
        {"key": t["key"], "effect": t["effect"]}
        for t in (member.get("spec") or {}).get("taints") or []
        if t.get("key") in CONTROLLER_TAINTS
    ]


def fleet_members(fleet: Mapping[str, Any], members: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Names of the MemberClusters in a fleet: named ones that exist, plus selected ones."""
    spec = fleet.get("spec") or {}
    names = {n for n in spec.get("clusters") or [] if n in members}
    if spec.get("clusterSelector") is not None:
        selector = stored_selector(spec["clusterSelector"])
        names |= {
            n
            for n, m in members.items()
            if selects(selector, (m.get("metadata") or {}).get("labels") or {})
        }
    return sorted(names)


def is_ready(member: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (member.get("status") or {}).get("conditions") or []
    )


def has_verdict(status: Mapping[str, Any] | None) -> bool:
    """Whether ``status`` says Ready True or False (not Unknown, not absent)."""
    return any(
        c.get("type") == "Ready" and c.get("status") in ("True", "False")
        for c in (status or {}).get("conditions") or []
    )


def fleet_status(
    fleet: Mapping[str, Any], members: Mapping[str, Mapping[str, Any]], now: str
) -> dict[str, Any]:
    """Fleet status: totals, ready members, members per layer, and a Ready condition."""
    names = fleet_members(fleet, members)
    ready = [n for n in names if is_ready(members[n])]
    layers: dict[str, int] = {}
    for n in names:
        layer = (members[n].get("spec") or {}).get("layer", "default")
        layers[layer] = layers.get(layer, 0) + 1
    not_ready = [n for n in names if n not in ready]
    if not names:
        ok, reason, message = False, "Empty", "no member cluster matches this fleet"
    else:
        ok = bool(ready)
        reason = "AllReady" if not not_ready else ("SomeReady" if ready else "NoneReady")
        message = f"{len(ready)}/{len(names)} clusters ready"
        if not_ready:
            message += f"; not ready: {', '.join(not_ready)}"
    generation = (fleet.get("metadata") or {}).get("generation")
    previous = (fleet.get("status") or {}).get("conditions")
    return {
        "observedGeneration": generation,
        "clusters": len(names),
        "readyClusters": len(ready),
        "layers": dict(sorted(layers.items())),
        "conditions": [condition("Ready", ok, reason, message, generation, previous, now)],
    }
