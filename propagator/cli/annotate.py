"""Asking the controller for a one-time action on an application: an annotation set to a
new value (each value is acted on once), and, if asked, waiting until its status shows
the controller acted on that value."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import anyio

from api.common import API_VERSION
from kube.connection import KubeConnection

KIND = "ApplicationPropagation"
POLL_S = 0.5


def fresh_value(prefix: str = "") -> str:
    """A value never used before: ``prefix`` and the current time to the microsecond."""
    return prefix + dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def request(
    hub: KubeConnection,
    namespace: str,
    name: str,
    annotation: str,
    value: str,
    requested: str,
    acted: Callable[[dict[str, Any]], bool],
    report: Callable[[dict[str, Any]], str],
    wait_s: float | None,
) -> str:
    """Set ``annotation`` to ``value`` on application ``namespace/name`` and return
    ``requested``; with ``wait_s``, wait until ``acted(app)`` and add ``report(app)``.
    Raises TimeoutError when the controller has not acted in time, ApiError when the hub
    refuses."""
    patch = {"metadata": {"annotations": {annotation: value}}}
    await hub.merge_patch(API_VERSION, KIND, name, patch, namespace=namespace)
    if wait_s is None:
        return requested
    deadline = time.monotonic() + wait_s
    while True:
        app = await hub.get(API_VERSION, KIND, name, namespace=namespace)
        if acted(app):
            return f"{requested}\n{report(app)}"
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"{requested}, but the controller had not acted on it after {wait_s:g}s "
                "(is it running? `kubectl describe ap` shows its events)"
            )
        await anyio.sleep(POLL_S)
