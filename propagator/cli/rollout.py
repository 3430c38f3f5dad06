"""``kubectl propagator rollout``: act on an application's rollout (pause, resume,
promote, undo) through its ``propagator.io/rollout-action`` annotation, and show or wait
for where it stands."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import anyio

from api.common import API_VERSION
from api.rollout import ROLLOUT_ACTION_ANNOTATION
from kube.connection import KubeConnection
from propagator.canary.revisions import APPLICATION_LABEL, application_label
from propagator.cli.annotate import KIND, POLL_S, fresh_value
from propagator.cli.text import table
from propagator.rollout.history import DIGEST_LABEL


class NotKept(Exception):
    """An undo to a revision the hub no longer keeps."""


async def kept_revisions(hub: KubeConnection, namespace: str, name: str) -> list[int]:
    """The revisions of application ``namespace/name`` kept on the hub."""
    listing = await hub.list(
        "apps/v1",
        "ControllerRevision",
        namespace,
        labelSelector=f"{APPLICATION_LABEL}={application_label(name)},{DIGEST_LABEL}",
    )
    numbers = (item.get("revision") for item in listing.get("items") or [])
    return sorted(n for n in numbers if isinstance(n, int))


async def request_rollout(
    hub: KubeConnection,
    namespace: str,
    name: str,
    action: str,
    wait_s: float | None,
    revision: int | None = None,
    suspend: bool = False,
) -> str:
    """Ask for ``action`` (pause, resume, promote, promote-all, undo): the annotation set
    to a new value, ``spec.suspend`` set by ``pause --suspend`` and cleared by resume;
    with ``wait_s``, wait until the controller has acted and return its status line.
    Raises NotKept (an undo to a revision not kept), TimeoutError, ApiError."""
    if action == "undo" and revision is not None:
        kept = await kept_revisions(hub, namespace, name)
        if revision not in kept:
            listed = ", ".join(str(n) for n in kept) or "none"
            raise NotKept(f"revision {revision} is no longer kept (kept: {listed})")
    head = f"undo:{revision}" if action == "undo" and revision is not None else action
    value = fresh_value(f"{head}/")
    patch: dict[str, Any] = {"metadata": {"annotations": {ROLLOUT_ACTION_ANNOTATION: value}}}
    if action == "pause" and suspend:
        patch["spec"] = {"suspend": True}
    elif action == "resume":
        patch["spec"] = {"suspend": False}
    await hub.merge_patch(API_VERSION, KIND, name, patch, namespace=namespace)
    requested = f"applicationpropagation.propagator.io/{name} rollout {action} requested"
    if wait_s is None:
        return requested
    app = await _wait(
        hub,
        namespace,
        name,
        lambda a: _rollout(a).get("lastAction") == value,
        wait_s,
        f"{requested}, but the controller had not acted on it",
    )
    return f"{requested}\n{headline(app)}"


async def rollout_status(
    hub: KubeConnection, namespace: str, name: str, wait_s: float | None
) -> tuple[str, bool]:
    """The rollout's state and a line per wave; with ``wait_s``, once it is Complete or
    Halted (raises TimeoutError before). Returns (text, halted)."""
    if wait_s is None:
        app = await hub.get(API_VERSION, KIND, name, namespace=namespace)
    else:
        app = await _wait(
            hub,
            namespace,
            name,
            _settled,
            wait_s,
            f"applicationpropagation.propagator.io/{name}: the rollout was neither complete "
            "nor halted",
        )
    return status_text(app), _rollout(app).get("phase") == "Halted"


def _settled(app: dict[str, Any]) -> bool:
    """The rollout of the application's current generation is Complete or Halted."""
    status = app.get("status") or {}
    current = status.get("observedGeneration") == (app.get("metadata") or {}).get("generation")
    return current and _rollout(app).get("phase") in ("Complete", "Halted")


async def _wait(
    hub: KubeConnection,
    namespace: str,
    name: str,
    done: Any,
    wait_s: float,
    what: str,
) -> dict[str, Any]:
    deadline = time.monotonic() + wait_s
    while True:
        app = await hub.get(API_VERSION, KIND, name, namespace=namespace)
        if done(app):
            return app
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"{what} after {wait_s:g}s: {headline(app)} (`kubectl describe ap` shows its "
                "events)"
            )
        await anyio.sleep(POLL_S)


def _rollout(app: dict[str, Any]) -> dict[str, Any]:
    return (app.get("status") or {}).get("rollout") or {}


def headline(app: dict[str, Any]) -> str:
    """``Progressing: wave 2 of 3 (eu): waiting for eu-1``."""
    rollout = _rollout(app)
    if not rollout:
        return "no rollout has run yet"
    phase, message = rollout.get("phase"), rollout.get("message")
    return f"{phase}: {message}" if message else str(phase)


def status_text(app: dict[str, Any]) -> str:
    """The rollout's state, its revisions and a line per wave with its clusters and the
    revision each is to run."""
    rollout = _rollout(app)
    lines = [f"applicationpropagation.propagator.io/{app['metadata']['name']}: {headline(app)}"]
    if not rollout:
        return "\n".join(lines)
    held = " (held by an undo)" if rollout.get("specHeld") else ""
    lines.append(
        f"revision: {rollout.get('revision')}   from: {rollout.get('previousRevision') or '-'}"
        f"   spec: {rollout.get('specRevision') or '-'}{held}   kept: "
        + (", ".join(str(n) for n in rollout.get("history") or []) or "-")
    )
    halted = rollout.get("halted")
    if halted:
        lines.append(
            f"halted at wave {int(halted.get('wave', 0)) + 1} ({halted.get('name')}): "
            f"{halted.get('reason')} on {', '.join(halted.get('clusters') or []) or '-'}"
        )
    waves: dict[int, list[str]] = defaultdict(list)
    for line in (app.get("status") or {}).get("clusters") or []:
        wave = line.get("wave")
        revision = line.get("rolloutRevision")
        mark = " (suspended)" if line.get("suspended") else ""
        waves[wave if isinstance(wave, int) else -1].append(
            f"{line.get('name')}={revision if revision is not None else '-'}{mark}"
        )
    current = int(rollout.get("wave", 0))
    rows = [("WAVE", "STATE", "CLUSTERS (REVISION)")]
    for index in sorted(waves):
        if index < 0:
            state, name = "ahead", "canary"
        elif rollout.get("phase") == "Complete" or index < current:
            state, name = "done", str(index + 1)
        elif index == current:
            state, name = str(rollout.get("phase")).lower(), str(index + 1)
        else:
            state, name = "next", str(index + 1)
        rows.append((name, state, ", ".join(sorted(waves[index]))))
    if len(rows) > 1:
        lines += table(rows)
    return "\n".join(lines)
