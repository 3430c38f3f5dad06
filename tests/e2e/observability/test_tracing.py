"""Traces end to end: ``propagator run`` sends its spans over OTLP/HTTP to a real Jaeger;
one reconcile's trace holds its schedule and render spans and every cluster's apply, and
the trace id in the controller's log line is that trace's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Fleet
from tests.e2e.controller import Controller, running
from tests.e2e.jaeger import Jaeger
from tests.e2e.manifests import config_map
from tests.e2e.propagation.test_propagation import (
    ENV,
    MEMBERS,
    ap_gone,
    application,
    create,
    delete_ap,
    ready_everywhere,
    wait_ap,
)
from tests.e2e.waiting import eventually

NS = "tracing"


@pytest.fixture(scope="module")
def jaeger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jaeger]:
    started = Jaeger(tmp_path_factory.mktemp("jaeger"))
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def controller(
    fleet: Fleet, joined: list[str], jaeger: Jaeger, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Controller]:
    env = {
        **ENV,
        "PROPAGATOR_TRACE_EXPORTER": "otlp",
        "PROPAGATOR_OTLP_ENDPOINT": jaeger.otlp_address,
        "PROPAGATOR_OTLP_INSECURE": "true",  # loopback
        "PROPAGATOR_OTLP_HEADERS": "authorization=Bearer%20not-for-logs",
        "PROPAGATOR_LOG_FORMAT": "json",
        # the standard variables apply: the service name, a short batch delay
        "OTEL_SERVICE_NAME": "propagator-e2e",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }
    with running(fleet, tmp_path_factory.mktemp("tracing"), env) as controller:
        yield controller
        if not ap_gone(fleet, NS, "web"):
            delete_ap(fleet, NS, "web")
            eventually(lambda: ap_gone(fleet, NS, "web") or None, "tracing/web gone")


def _syncing_line(controller: Controller) -> dict[str, Any] | None:
    """The controller's JSON log line saying the reconcile of tracing/web queued syncs."""
    for line in controller.log.read_text().splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            if entry.get("message", "").startswith(f"{NS}/web: syncing 3 clusters"):
                return dict(entry)
    return None


def test_a_reconcile_trace_holds_schedule_render_and_every_cluster_apply(
    fleet: Fleet, jaeger: Jaeger, controller: Controller
) -> None:
    create(fleet, application("web", NS, [config_map("settings", NS, mode="traced")]))
    wait_ap(fleet, NS, "web", "ready everywhere", ready_everywhere)
    line = eventually(lambda: _syncing_line(controller), "a log line of the reconcile")
    trace_id = line["trace_id"]

    def whole() -> list[dict[str, Any]] | None:
        spans = jaeger.spans(trace_id)
        names = sorted(s["operationName"] for s in spans)
        return spans if names == ["apply"] * 3 + ["reconcile", "render", "schedule"] else None

    spans = eventually(whole, f"trace {trace_id}: reconcile, schedule, render, 3 applies")
    assert {s["service"] for s in spans} == {"propagator-e2e"}
    (reconcile,) = [s for s in spans if s["operationName"] == "reconcile"]
    assert reconcile["tags"]["application"] == f"{NS}/web"
    assert not reconcile["references"]  # the root
    applies = [s for s in spans if s["operationName"] == "apply"]
    assert sorted(s["tags"]["cluster"] for s in applies) == MEMBERS
    for span in [*applies, *(s for s in spans if s["operationName"] in ("schedule", "render"))]:
        (parent,) = span["references"]
        assert (parent["refType"], parent["spanID"]) == ("CHILD_OF", reconcile["spanID"])
    # the exporter's header is a credential: never in the log
    assert "not-for-logs" not in controller.log.read_text()
