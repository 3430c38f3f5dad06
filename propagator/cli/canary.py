"""``kubectl propagator canary``: act on an application's canary (promote, abort, retry)
through its ``propagator.io/canary-action`` annotation, and show where it stands."""

from __future__ import annotations

from typing import Any

from api.common import API_VERSION
from api.rollout import CANARY_ACTION_ANNOTATION
from kube.connection import KubeConnection
from propagator.cli.annotate import KIND, fresh_value, request
from propagator.cli.text import table


async def request_action(
    hub: KubeConnection, namespace: str, name: str, action: str, wait_s: float | None
) -> str:
    """Set the annotation to ``<action>/<now>`` (a new value: acted on once); with
    ``wait_s``, wait until the controller has acted on it and return its status line."""
    value = fresh_value(f"{action}/")
    return await request(
        hub,
        namespace,
        name,
        CANARY_ACTION_ANNOTATION,
        value,
        f"applicationpropagation.propagator.io/{name} canary {action} requested",
        lambda app: ((app.get("status") or {}).get("canary") or {}).get("lastAction") == value,
        headline,
        wait_s,
    )


def headline(app: dict[str, Any]) -> str:
    """``Paused: step 2 of 3, weight 50: healthy; waiting for promote (a manual step)``."""
    canary = (app.get("status") or {}).get("canary")
    if not canary:
        has = ((app.get("spec") or {}).get("canary")) is not None
        return "no canary has run yet" if has else "the application has no spec.canary"
    phase, message = canary.get("phase"), canary.get("message")
    if message:
        return f"{phase}: {message}"
    if phase in ("Progressing", "Paused"):
        steps = len(((app.get("spec") or {}).get("canary") or {}).get("steps") or [])
        step, weight = int(canary.get("step", 0)) + 1, canary.get("weight", 0)
        return f"{phase}: step {step} of {steps}, weight {weight}"
    return str(phase)


def status_text(app: dict[str, Any]) -> str:
    """The canary's state, revisions and a line per canary cluster."""
    canary = (app.get("status") or {}).get("canary") or {}
    lines = [f"applicationpropagation.propagator.io/{app['metadata']['name']}: {headline(app)}"]
    if canary:
        lines.append(
            f"stable revision: {canary.get('stableRevision') or '-'}   "
            f"canary revision: {canary.get('canaryRevision') or '-'}"
        )
        rows = [("CLUSTER", "WEIGHT", "STABLE READY", "CANARY READY")]
        for c in canary.get("clusters") or []:
            rows.append(
                (
                    str(c.get("name")),
                    str(c.get("weight", 0)) + (" (promoted)" if c.get("promoted") else ""),
                    str(c.get("stableReady") or "-"),
                    str(c.get("canaryReady") or "-"),
                )
            )
        if len(rows) > 1:
            lines += table(rows)
    return "\n".join(lines)


async def read_status(hub: KubeConnection, namespace: str, name: str) -> str:
    return status_text(await hub.get(API_VERSION, KIND, name, namespace=namespace))
