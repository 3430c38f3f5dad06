"""The dashboards and alerts on a real Prometheus scraping a live ``propagator run``: while
the test propagates, heals drift, stops a member, rolls a canary back and exceeds a
tenant's quota, every query of every panel — its template variables substituted as
Grafana does with "All" picked — returns at least one series, and the member-not-ready
alert fires for the stopped member."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from fleet.local import HUB
from fleet.local.kwok import UNREADY_ANNOTATION
from propagator.observability.dashboards import DASHBOARDS
from tests.e2e.conftest import Fleet
from tests.e2e.controller import Controller
from tests.e2e.manifests import config_map, deployment
from tests.e2e.outage import all_back, stopped
from tests.e2e.prometheus import Prometheus, prometheus_dir, substituted, with_values
from tests.e2e.propagation.test_propagation import (
    ENV,
    MEMBERS,
    ap_gone,
    application,
    condition,
    create,
    delete_ap,
    ready_everywhere,
    update_spec,
    wait_ap,
)
from tests.e2e.tools import ROOT
from tests.e2e.waiting import HANG_GUARD_S, eventually

RULES = ROOT / "charts" / "propagator" / "alerts" / "rules.yaml"
NS, CANARY_NS, QUOTA_NS = "dash", "dash-canary", "dash-quota"
APPS = ((NS, "web"), (NS, "settings"), (CANARY_NS, "web"), (QUOTA_NS, "fits"), (QUOTA_NS, "late"))
TENANT = "dash-team"
CANARY_CLUSTER, VICTIM = MEMBERS[0], MEMBERS[2]


def _quick_rules(data: Path) -> Path:
    """The chart's alerting rules with every ``for`` at 1s: promtool's unit tests
    (tests/e2e/install/test_chart.py) cover the real durations; here they would only make the
    test wait."""
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = "1s"
    out = data / "rules.yaml"
    out.write_text(yaml.safe_dump(rules))
    return out


def _label_canary_cluster(fleet: Fleet, value: str | None) -> None:
    k8s.CustomObjectsApi(fleet.api(HUB)).patch_cluster_custom_object(
        "propagator.io",
        "v1alpha1",
        "memberclusters",
        CANARY_CLUSTER,
        {"metadata": {"labels": {"canary": value}}},
    )


@pytest.fixture(scope="module")
def observed(
    fleet: Fleet, joined: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Prometheus, Controller]]:
    data = tmp_path_factory.mktemp("dashboards")
    controller = Controller(fleet, data, ENV)
    prometheus = Prometheus(
        prometheus_dir(), data, [f"127.0.0.1:{controller.metrics_port}"], [_quick_rules(data)]
    )
    _label_canary_cluster(fleet, "yes")
    controller.start()
    try:
        yield prometheus, controller
        all_back(fleet)
        made = [(ns, name) for ns, name in APPS if not ap_gone(fleet, ns, name)]
        for namespace, name in made:
            delete_ap(fleet, namespace, name)
        for namespace, name in made:
            eventually(
                lambda ns=namespace, n=name: ap_gone(fleet, ns, n) or None,  # type: ignore[misc]
                f"{namespace}/{name} gone",
            )
    finally:
        if controller.proc is not None:
            controller.stop()
        prometheus.stop()
        _label_canary_cluster(fleet, None)
        k8s.CustomObjectsApi(fleet.api(HUB)).delete_cluster_custom_object(
            "propagator.io", "v1alpha1", "tenantquotas", TENANT
        )


def _requesting(obj: dict[str, Any], cpu: str) -> dict[str, Any]:
    for c in obj["spec"]["template"]["spec"]["containers"]:
        c["resources"] = {"requests": {"cpu": cpu}}
    return obj


def _exceed_a_quota(fleet: Fleet) -> None:
    quota = {
        "apiVersion": "propagator.io/v1alpha1",
        "kind": "TenantQuota",
        "metadata": {"name": TENANT},
        "spec": {"namespaces": [QUOTA_NS], "hard": {"cpu": "1"}},
    }
    k8s.CustomObjectsApi(fleet.api(HUB)).create_cluster_custom_object(
        "propagator.io", "v1alpha1", "tenantquotas", quota
    )
    fits = _requesting(deployment("fits", QUOTA_NS, "nginx:1.27", 1), "600m")
    create(fleet, application("fits", QUOTA_NS, [fits]))
    wait_ap(fleet, QUOTA_NS, "fits", "ready everywhere", ready_everywhere)

    def used() -> bool:
        stored: Any = k8s.CustomObjectsApi(fleet.api(HUB)).get_cluster_custom_object(
            "propagator.io", "v1alpha1", "tenantquotas", TENANT
        )
        clusters = (stored.get("status") or {}).get("clusters") or []
        return {c["name"]: c["used"].get("cpu") for c in clusters} == dict.fromkeys(MEMBERS, "600m")

    eventually(lambda: used() or None, "the tenant's use reported")
    late = _requesting(deployment("late", QUOTA_NS, "nginx:1.27", 1), "600m")
    create(fleet, application("late", QUOTA_NS, [late]))
    wait_ap(
        fleet,
        QUOTA_NS,
        "late",
        "quota exceeded",
        lambda a: condition(a, "QuotaExceeded").get("status") == "True",
    )


def _roll_a_canary_back(fleet: Fleet) -> None:
    web = deployment("web", CANARY_NS, "nginx:1.27", 2)
    canary = {
        "clusterSelector": {"matchLabels": {"canary": "yes"}},
        "steps": [{"weight": 50}],
        "analysis": {"progressDeadlineSeconds": 5},
    }
    # Waves after the canary: its rollback halts them (the Rollout panels' series).
    waves = {"size": 1, "minHealthyTime": "0s"}
    create(fleet, application("web", CANARY_NS, [web], canary=canary, rollout={"waves": waves}))
    wait_ap(fleet, CANARY_NS, "web", "ready everywhere", ready_everywhere)

    def broken(spec: dict[str, Any]) -> None:
        template = spec["resources"]["manifests"][0]["spec"]["template"]
        template["metadata"]["annotations"] = {UNREADY_ANNOTATION: "true"}
        template["spec"]["containers"][0]["image"] = "nginx:broken"

    update_spec(fleet, CANARY_NS, "web", broken)
    wait_ap(
        fleet,
        CANARY_NS,
        "web",
        "rolled back, the waves halted",
        lambda a: (
            ((a.get("status") or {}).get("canary") or {}).get("phase") == "RolledBack"
            and ((a.get("status") or {}).get("rollout") or {}).get("phase") == "Halted"
        ),
    )


def _settings(value: str) -> dict[str, Any]:
    return config_map("settings", NS, mode=value)


def _heal_drift_and_stop_a_member(
    fleet: Fleet, prometheus: Prometheus, controller: Controller
) -> None:
    create(fleet, application("settings", NS, [_settings("a")]))
    web = _requesting(deployment("web", NS, "nginx:1.27", 6), "10m")
    create(
        fleet,
        application(
            "web",
            NS,
            [web],
            placement={"replicas": {"mode": "Divided"}},
            failover={"clusterUnreachableAfter": "2s"},
        ),
    )
    for name in ("settings", "web"):
        wait_ap(fleet, NS, name, "ready everywhere", ready_everywhere)
    # a user edits what the application owns on a member: it comes back
    fleet.core(CANARY_CLUSTER).patch_namespaced_config_map(
        "settings", NS, {"data": {"mode": "edited"}}
    )
    eventually(
        lambda: (
            fleet.core(CANARY_CLUSTER).read_namespaced_config_map("settings", NS).data
            == {"mode": "a"}
            or None
        ),
        "the edited ConfigMap healed",
    )
    with stopped(fleet, VICTIM):
        # a change while the member is down: its sync there fails and is retried
        update_spec(
            fleet, NS, "settings", lambda s: s["resources"].update(manifests=[_settings("b")])
        )
        eventually(
            lambda: (
                prometheus.series(
                    "ALERTS{alertname='PropagatorMemberNotReady', alertstate='firing', "
                    f"cluster='{VICTIM}'}}"
                )
                or None
            ),
            f"PropagatorMemberNotReady firing for {VICTIM}",
        )
        scraped = [
            f'propagator_evictions_total{{cluster="{VICTIM}",reason="unreachable"}}',
            f'propagator_apply_retries_total{{cluster="{VICTIM}"}}',
        ]
        eventually(
            lambda: all(s in controller.scrape() for s in scraped) or None,
            f"{VICTIM}'s evictions and retries counted",
        )
    firing = prometheus.series("ALERTS{alertstate='firing'}")
    assert "PropagatorNoLeader" not in {s["metric"]["alertname"] for s in firing}


def _without_data(prometheus: Prometheus) -> list[str]:
    """ "dashboard: panel: query" of every query that returns no series."""
    missing = []
    for dashboard in DASHBOARDS:
        values, empty = substituted(prometheus, dashboard)
        missing += empty
        # (a Pull member's panels: proven in tests/e2e/pull/, on a fleet that has one)
        for panel in (p for p in dashboard.panels if not p.pull):
            for expr, _ in panel.targets:
                promql = with_values(expr, values)
                if not prometheus.series(promql):
                    missing.append(f"{dashboard.title}: {panel.title}: {promql}")
    return missing


def test_every_panel_returns_data_and_the_member_not_ready_alert_fires(
    fleet: Fleet, observed: tuple[Prometheus, Controller]
) -> None:
    prometheus, controller = observed
    all_back(fleet)
    _exceed_a_quota(fleet)
    _roll_a_canary_back(fleet)
    _heal_drift_and_stop_a_member(fleet, prometheus, controller)
    # Prometheus scrapes every second: what happened last shows within a few scrapes.
    deadline = time.monotonic() + HANG_GUARD_S
    while missing := _without_data(prometheus):
        if time.monotonic() > deadline:
            pytest.fail("panels without data:\n" + "\n".join(missing))
        time.sleep(1)
    print(f"{sum(len(p.targets) for d in DASHBOARDS for p in d.panels)} panel queries return data")
