"""/healthz and /readyz: liveness from the event loop's heartbeat and the hub's answers."""

from __future__ import annotations

import time
from typing import Any, cast

from kube.connection import KubeConnection
from propagator.observability.liveness import Liveness
from propagator.observability.server import health_routes


class Hub:
    server = "https://hub:6443"
    answered_at: float | None = None


def test_a_stalled_loop_or_a_lost_hub_is_not_live() -> None:
    hub = Hub()
    live = Liveness(cast(KubeConnection, hub), stall_s=30, hub_lost_after_s=120)
    assert live.problem() is None  # just started: nothing is late yet
    hub.answered_at = time.monotonic()
    live.beat = time.monotonic() - 31
    assert live.problem() == "event loop has not run for 31s"
    live.beat = time.monotonic()
    hub.answered_at = time.monotonic() - 200
    assert live.problem() == "hub https://hub:6443 has not answered for 200s"


def test_health_routes_say_why() -> None:
    reasons: dict[str, Any] = {"live": None, "ready": "the Lease has not been read yet"}
    routes = health_routes(lambda: reasons["live"], lambda: reasons["ready"])
    assert routes["/healthz"]() == (200, "text/plain", b"ok\n")
    assert routes["/readyz"]() == (
        503,
        "text/plain",
        b"not ready: the Lease has not been read yet\n",
    )
    reasons["live"] = "event loop has not run for 40s"
    assert routes["/healthz"]()[0] == 500
