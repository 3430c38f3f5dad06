"""The canary inside the application reconcile, without I/O: the stable revision kept on
a fake hub, what each cluster is given, and nothing kept when the plan does not go ahead."""

from __future__ import annotations

from typing import Any

from api.application import ApplicationPropagationStatus
from tests.e2e.manifests import application, deployment
from tests.propagator.propagation.test_reconcile import Harness, _one_cpu_tenant

STEPS = {"steps": [{"weight": 50, "manual": True}, {"weight": 100}]}


def harness(app: dict[str, Any], **kw: Any) -> Harness:
    return Harness(app, **kw)


def web(image: str, cpu: str | None = "100m") -> dict[str, Any]:
    workload = deployment("web", "shop", image, replicas=4)
    if cpu is not None:
        for c in workload["spec"]["template"]["spec"]["containers"]:
            c["resources"] = {"requests": {"cpu": cpu}}
    return application("web", "shop", [workload], "f", canary=STEPS)


def stable_revisions(h: Harness) -> list[dict[str, Any]]:
    """The canary's stable revisions the hub holds."""
    return [
        r for r in h.hub.revisions.values() if "propagator.io/release" in r["metadata"]["labels"]
    ]


def settle(h: Harness) -> None:
    """Plan, the member syncs apply everything, and the status is written."""
    h.reconcile()
    h.synced("shop/web", "a", "b")
    h.reconcile(replan=False)


def given(h: Harness, cluster: str) -> dict[str, tuple[str, int]]:
    work = h.table.get("shop/web", cluster)
    assert work is not None
    return {
        o["metadata"]["name"]: (
            o["spec"]["template"]["spec"]["containers"][0]["image"],
            o["spec"]["replicas"],
        )
        for o in work.objects
        if o["kind"] == "Deployment"
    }


def test_a_first_release_is_kept_as_the_stable_revision_then_a_new_template_splits() -> None:
    h = harness(web("nginx:1.27"))
    settle(h)
    assert h.hub.app["status"]["canary"]["phase"] == "Succeeded"
    assert len(stable_revisions(h)) == 1
    assert given(h, "a") == {"web": ("nginx:1.27", 4)}
    h.hub.app["spec"]["resources"]["manifests"][0]["spec"]["template"]["spec"]["containers"][0][
        "image"
    ] = "nginx:1.28"
    h.hub.app["metadata"]["generation"] = 2
    settle(h)
    canary = h.hub.app["status"]["canary"]
    assert (canary["phase"], canary["weight"]) == ("Progressing", 50)
    assert canary["stableRevision"] != canary["canaryRevision"]
    for cluster in ("a", "b"):  # every placed cluster is a canary cluster by default
        assert given(h, cluster) == {"web": ("nginx:1.27", 2), "web-canary": ("nginx:1.28", 2)}
    assert h.condition("CanaryProgressing")["status"] == "True"


def test_a_plan_that_does_not_go_ahead_keeps_no_canary_move() -> None:
    # the tenant's quota needs requests these containers do not state: nothing is applied,
    # and the release is not recorded as the stable revision
    h = harness(web("nginx:1.27", cpu=None), quotas=[_one_cpu_tenant()], limit_ranges={"a": []})
    h.reconcile()
    assert h.condition("QuotaExceeded")["reason"] == "RequestsMissing"
    assert "canary" not in h.hub.app["status"]
    assert stable_revisions(h) == []


def test_statefulsets_alone_say_the_canary_does_not_run_them() -> None:
    stateful = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "shop"},
        "spec": {"serviceName": "db", "selector": {"matchLabels": {"app": "db"}}, "template": {}},
    }
    served = frozenset({("apps/v1", "StatefulSet")})
    h = harness(application("web", "shop", [stateful], "f", canary=STEPS), kinds=served)
    settle(h)
    condition = h.condition("CanaryProgressing")
    assert (condition["status"], condition["reason"]) == ("False", "CanaryUnsupported")
    assert "StatefulSet db roll(s) out at once" in condition["message"]


def test_a_huge_action_value_is_acted_on_once_and_the_status_still_validates() -> None:
    h = harness(web("nginx:1.27"))
    settle(h)
    h.hub.app["metadata"]["annotations"] = {"propagator.io/canary-action": "abort/" + "x" * 4000}
    settle(h)
    canary = h.hub.app["status"]["canary"]
    assert canary["lastAction"].startswith("sha256:")
    ApplicationPropagationStatus.model_validate(h.hub.app["status"])  # what the CRD allows
    writes = len(h.hub.patches)
    settle(h)
    assert h.hub.app["status"]["canary"]["lastAction"] == canary["lastAction"]
    assert len(h.hub.patches) == writes  # nothing new to act on or write
