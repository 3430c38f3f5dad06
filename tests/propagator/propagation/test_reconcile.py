"""The application reconcile without I/O: a fake hub records its writes; the member
registry is reduced to what the reconcile asks of it."""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

import anyio
import pytest

from api.finalizerpolicy import FINALIZER
from fleet.snapshotstore import SnapshotStore
from kube.connection import KubeConnection
from kube.discovery import ResourceInfo
from kube.errors import ApiError
from propagator.interpreter.health import WorkloadHealth
from propagator.interpreter.registry import builtin_rules
from propagator.observability.metrics import Metrics
from propagator.propagation.plan import Plan
from propagator.propagation.reconcile import Reconciler
from propagator.propagation.statusnotes import not_applied
from propagator.scheduler import Scheduler
from propagator.settings import Settings
from propagator.tenancy.hubquota import QuotaAdmission
from propagator.tenancy.limits import LimitDefaults
from propagator.work.table import WorkTable
from propagator.work.workloadhealth import ClusterHealth
from tests.e2e.manifests import application, config_map, deployment
from tests.fakes import served
from tests.propagator.scheduler.test_scheduler import PROFILE, cluster


class FakeHub:
    """The hub's merge patches, recorded and applied to the stored application; and the
    ControllerRevisions it holds, listed by label selector (``key=value`` and ``key``
    terms)."""

    def __init__(self, app: dict[str, Any]) -> None:
        self.app = app
        self.patches: list[tuple[str | None, dict[str, Any]]] = []
        self.events: list[dict[str, Any]] = []
        self.revisions: dict[str, dict[str, Any]] = {}

    async def list(
        self, api_version: str, kind: str, namespace: str | None = None, **kw: Any
    ) -> dict[str, Any]:
        assert (api_version, kind) == ("apps/v1", "ControllerRevision")
        terms = [t.partition("=") for t in str(kw.get("labelSelector") or "").split(",") if t]

        def selected(item: dict[str, Any]) -> bool:
            labels = item["metadata"].get("labels") or {}
            return all(k in labels and (not eq or labels[k] == v) for k, eq, v in terms)

        return {"items": [i for i in self.revisions.values() if selected(i)]}

    async def apply(self, obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
        self.revisions[obj["metadata"]["name"]] = obj
        return obj

    async def delete(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> int:
        return 1 if self.revisions.pop(name, None) is not None else 0

    async def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        assert (method, path.rsplit("/", 1)[-1]) == ("POST", "events"), (method, path)
        self.events.append(kw["body"])
        return kw["body"]  # type: ignore[no-any-return]

    async def resource(self, api_version: str, kind: str) -> ResourceInfo:
        return served("hub", api_version, kind)

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any]:
        """The application's namespace holds one ServiceAccount, ``runner``."""
        if kind == "ControllerRevision" and name in self.revisions:
            return self.revisions[name]
        if (api_version, kind, name) == ("v1", "ServiceAccount", "runner"):
            return {"kind": kind, "metadata": {"name": name, "namespace": namespace}}
        raise ApiError("hub", f"GET: 404 NotFound: {kind} {name!r}", status=404)

    async def merge_patch(
        self, api_version: str, kind: str, name: str, body: dict[str, Any], **kw: Any
    ) -> dict[str, Any]:
        self.patches.append((kw.get("subresource"), body))
        if kw.get("subresource") == "status":
            self.app["status"] = body["status"]
        else:
            self.app["metadata"]["finalizers"] = body["metadata"]["finalizers"]
        return self.app


class LimitRanges:
    """A member's LimitRange cache, listed."""

    synced = True

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects

    def snapshot(self) -> list[dict[str, Any]]:
        return self.objects


class Harness:
    def __init__(
        self,
        app: dict[str, Any],
        clusters: Sequence[str] = ("a", "b"),
        quotas: Sequence[dict[str, Any]] = (),
        table: WorkTable | None = None,
        limit_ranges: Mapping[str, list[dict[str, Any]]] | None = None,
        kinds: frozenset[tuple[str, str]] = frozenset(
            {("v1", "ConfigMap"), ("apps/v1", "Deployment")}
        ),
    ) -> None:
        """``limit_ranges``: per cluster, its LimitRanges (clusters not named have not
        listed theirs); ``kinds``: what every cluster serves."""
        app["metadata"]["generation"] = 1
        app["metadata"].setdefault("uid", "uid-1")  # as the hub gives every object
        self.hub = FakeHub(app)
        self.clusters = tuple(clusters)
        self.table = table or WorkTable()
        self.queued: list[tuple[str, str]] = []
        self.healths: dict[str, WorkloadHealth] = {}
        """The application's health per cluster (Healthy unless set)."""
        store = SnapshotStore()
        store.publish([cluster(c, kinds=kinds) for c in clusters], {"f": list(clusters)})
        listed = {c: LimitRanges(objs) for c, objs in (limit_ranges or {}).items()}
        self.metrics = Metrics()
        self.reconciler = Reconciler(
            cast(KubeConnection, self.hub),
            Settings(),
            store,
            Scheduler(PROFILE),
            QuotaAdmission(
                lambda: list(quotas),
                lambda _: {},
                self.table,
                LimitDefaults(listed.get),
                self.metrics,
                builtin_rules(),
            ),
            self.table,
            self,
            self,
            self.metrics,
        )

    # -- the member registry, as the reconcile sees it (MemberView, SyncQueues) ----------

    def enqueue(self, cluster: str, app: str) -> str | None:
        self.queued.append((cluster, app))
        return None

    def known(self, cluster: str) -> bool:
        return cluster in self.clusters

    def health(
        self, cluster: str, objects: Sequence[Mapping[str, Any]], namespace: str
    ) -> WorkloadHealth:
        return self.healths.get(cluster, "Healthy")

    def judge(
        self, cluster: str, objects: Sequence[Mapping[str, Any]], namespace: str
    ) -> ClusterHealth:
        return ClusterHealth(self.health(cluster, objects, namespace))

    def quota_refusals(
        self, cluster: str, objects: Sequence[Mapping[str, Any]], namespace: str
    ) -> list[str]:
        return []

    def live(
        self, cluster: str, obj: Mapping[str, Any], namespace: str
    ) -> Mapping[str, Any] | None:
        return None

    def reconcile(self, replan: bool = True) -> Any:
        obj = copy.deepcopy(self.hub.app)  # what the informer's cache would hold
        return anyio.run(lambda: self.reconciler.reconcile(obj, replan=replan))

    def synced(self, app: str, *clusters: str) -> None:
        for c in clusters:
            state = self.table.state(app, c)
            assert state is not None
            self.table.record_try(state)
            self.table.record_applied(app, c, state, (), now=time.monotonic())

    def condition(self, type_: str) -> dict[str, Any]:
        conditions = self.hub.app.get("status", {}).get("conditions", [])
        return next(c for c in conditions if c["type"] == type_)


def _app(**spec: Any) -> dict[str, Any]:
    return application("web", "shop", [config_map("web", "shop", a="1")], "f", **spec)


def test_a_new_application_gets_its_finalizer_and_work_and_waits_for_the_syncs() -> None:
    h = Harness(_app())
    outcome = h.reconcile()
    assert h.hub.app["metadata"]["finalizers"] == [FINALIZER]
    assert sorted(h.queued) == [("a", "shop/web"), ("b", "shop/web")]
    assert outcome.refresh_after_s is not None  # the status waits for the syncs
    assert "status" not in h.hub.app
    work = h.table.get("shop/web", "a")
    assert work is not None
    assert work.objects[0]["data"] == {"a": "1"}

    h.synced("shop/web", "a", "b")
    h.reconcile(replan=False)
    assert h.condition("Applied")["message"] == "2/2 clusters applied"
    assert h.hub.app["status"]["ready"] == "2/2"
    assert h.condition("Available")["status"] == "True"
    # Nothing changed: no second write, and no sync queued again.
    writes, h.queued = len(h.hub.patches), []
    h.reconcile()
    assert len(h.hub.patches) == writes
    assert h.queued == []


def test_a_status_written_since_the_cache_was_read_is_what_a_refresh_compares_with() -> None:
    """A refresh compares its status with the last one written while the informer's copy
    is the one that write went over: else a status that went back to what the cache shows
    would not be written, and the hub would keep the newer, wrong one."""
    h = Harness(_app())
    h.hub.app["metadata"]["resourceVersion"] = "7"
    h.reconcile()
    h.synced("shop/web", "a")
    h.reconcile(replan=False)
    assert h.condition("Applied")["message"] == "1/2 clusters applied; 1 in progress: b"
    stale = copy.deepcopy(h.hub.app)  # the cache, before the next write comes back
    state = h.table.state("shop/web", "b")
    assert state is not None
    before = {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}
    h.synced("shop/web", "b")
    anyio.run(lambda: h.reconciler.reconcile(copy.deepcopy(stale), replan=False))
    assert h.condition("Applied")["message"] == "2/2 clusters applied"
    for name, value in before.items():  # b is back to where it was (applying again)
        setattr(state, name, value)
    anyio.run(lambda: h.reconciler.reconcile(copy.deepcopy(stale), replan=False))
    assert h.condition("Applied")["message"] == "1/2 clusters applied; 1 in progress: b"


def test_a_condition_keeps_its_transition_time_from_the_last_write_not_a_stale_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While the informer's copy predates the last status write, a refresh builds on what
    was written: a condition that has not changed since keeps that write's
    lastTransitionTime (and nothing is written again)."""
    clock = [1_800_000_000.0]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    h = Harness(_app())
    h.hub.app["metadata"]["resourceVersion"] = "7"
    h.reconcile()
    h.synced("shop/web", "a")
    h.reconcile(replan=False)
    assert h.condition("Applied")["status"] == "False"  # 1/2 applied
    stale = copy.deepcopy(h.hub.app)  # the cache, before the next writes come back
    h.synced("shop/web", "b")
    clock[0] += 60
    anyio.run(lambda: h.reconciler.reconcile(copy.deepcopy(stale), replan=False))
    applied = h.condition("Applied")
    assert applied["status"] == "True"
    writes = len(h.hub.patches)
    clock[0] += 60  # nothing changes; the cache still shows the copy before the write
    anyio.run(lambda: h.reconciler.reconcile(copy.deepcopy(stale), replan=False))
    assert h.condition("Applied")["lastTransitionTime"] == applied["lastTransitionTime"]
    assert len(h.hub.patches) == writes


def test_a_cluster_still_syncing_is_named_in_progress() -> None:
    h = Harness(_app())
    h.reconcile()
    h.synced("shop/web", "a")
    state = h.table.state("shop/web", "b")
    assert state is not None
    state.error, state.tries, state.attempts = "connection refused", 1, 1
    h.reconcile(replan=False)
    applied = h.condition("Applied")
    assert applied["reason"] == "Applying"
    assert (
        applied["message"]
        == "1/2 clusters applied; 1 in progress: b (retrying: connection refused)"
    )


def test_a_template_error_records_no_work() -> None:
    app = _app()
    app["spec"]["resources"]["manifests"][0]["data"] = {"a": "{{ cluster.zon }}"}
    h = Harness(app)
    h.reconcile()
    assert h.queued == []
    assert h.table.apps() == []
    assert h.condition("Applied")["reason"] == "RenderFailed"


def test_an_object_outside_the_tenant_fails_the_whole_application_before_any_write() -> None:
    app = _app()
    # an override moves the ConfigMap into another team's namespace on cluster b only
    app["spec"]["overrides"] = [
        {
            "clusterNames": ["b"],
            "patches": [{"op": "replace", "path": "/metadata/namespace", "value": "billing"}],
        }
    ]
    h = Harness(app)
    h.reconcile()
    assert h.queued == []
    assert h.table.apps() == []
    applied = h.condition("Applied")
    assert applied["status"] == "False"
    assert applied["reason"] == "Forbidden"
    assert applied["message"] == (
        "1 object(s) outside no tenant (default policy): v1 ConfigMap billing/web on b: "
        "namespace billing is not among the destinations [shop]; nothing was applied"
    )
    rejected = h.reconciler.metrics.tenant_rejections.labels("", "forbidden")
    assert rejected._value.get() == 1


def test_a_dependency_outside_the_tenant_is_forbidden_like_any_other_object() -> None:
    web = deployment("web", "shop", "nginx:1.27")
    web["spec"]["template"]["spec"]["serviceAccountName"] = "runner"
    app = application("web", "shop", [web], "f", dependencies={"propagate": True})
    # an override moves what the workload uses into another team's namespace on b
    app["spec"]["overrides"] = [
        {
            "clusterNames": ["b"],
            "target": {"kind": "ServiceAccount"},
            "patches": [{"op": "replace", "path": "/metadata/namespace", "value": "billing"}],
        }
    ]
    kinds = frozenset({("v1", "ServiceAccount"), ("apps/v1", "Deployment")})
    h = Harness(app, kinds=kinds)
    h.reconcile()
    assert h.queued == []
    applied = h.condition("Applied")
    assert applied["reason"] == "Forbidden"
    assert "v1 ServiceAccount billing/runner on b" in applied["message"]


def _one_cpu_tenant() -> dict[str, Any]:
    """A TenantQuota of hub namespace shop, one cpu per cluster."""
    return {"metadata": {"name": "team"}, "spec": {"namespaces": ["shop"], "hard": {"cpu": "1"}}}


def _asking(name: str, replicas: Any, cpu: str) -> dict[str, Any]:
    """An application of one Deployment whose pods request ``cpu``."""
    workload = deployment(name, "shop", "nginx:1.27", replicas=replicas)
    for c in workload["spec"]["template"]["spec"]["containers"]:
        c["resources"] = {"requests": {"cpu": cpu}}
    return application(name, "shop", [workload], "f")


def test_no_room_in_the_tenants_quota_is_quota_exceeded_and_nothing_is_written() -> None:
    app = _asking("web", 4, "500m")
    quota = _one_cpu_tenant()
    h = Harness(app, quotas=[quota])
    h.reconcile()
    assert h.queued == []
    exceeded = h.condition("QuotaExceeded")
    assert exceeded["status"] == "True"
    assert exceeded["message"].startswith("tenant team's quota leaves no room on a, b: ")
    assert h.condition("Scheduled")["status"] == "False"


def test_a_new_generation_that_cannot_be_placed_is_not_applied_and_what_runs_stays() -> None:
    h = Harness(_app())
    h.reconcile()
    h.synced("shop/web", "a", "b")
    h.reconcile(replan=False)
    assert h.condition("Applied")["status"] == "True"
    # generation 2 asks for a cluster the fleet does not have: nothing fits
    h.hub.app["spec"]["placement"] = {"clusterNames": ["nowhere"]}
    h.hub.app["metadata"]["generation"] = 2
    h.queued = []
    h.reconcile()
    assert h.hub.app["status"]["observedGeneration"] == 2
    applied = h.condition("Applied")
    assert (applied["status"], applied["reason"], applied["observedGeneration"]) == (
        "False",
        "Unschedulable",
        2,
    )
    assert applied["message"].startswith("generation 2 is not applied: 0/2 clusters fit")
    assert applied["message"].endswith("; what runs stays as it is")
    assert h.queued == []  # no removal either
    assert sorted(h.table.works_of("shop/web")) == ["a", "b"]


def test_the_applied_generation_replanned_without_room_stays_applied() -> None:
    previous = {
        "conditions": [
            {"type": "Applied", "status": "True", "reason": "Applied", "observedGeneration": 4}
        ]
    }
    plan = Plan(4)
    not_applied(plan, previous, "Unschedulable", "0/2 clusters fit")
    assert plan.conditions == []
    plan = Plan(5)
    not_applied(plan, previous, "QuotaExceeded", "over the quota")
    assert plan.conditions == [
        (
            "Applied",
            False,
            "QuotaExceeded",
            "generation 5 is not applied: over the quota; what runs stays as it is",
        )
    ]


def test_an_application_keeps_the_room_it_uses_when_placed_again() -> None:
    app = _asking("web", 2, "500m")
    quota: dict[str, Any] = {
        "metadata": {"name": "team"},
        "spec": {"namespaces": ["shop"], "hard": {"cpu": "1"}},
    }
    h = Harness(app, quotas=[quota])
    h.reconcile()
    h.synced("shop/web", "a", "b")
    h.reconcile(replan=False)
    assert h.condition("Scheduled")["status"] == "True"
    # its own pods now fill the tenant's quota on both clusters
    quota["status"] = {"clusters": [{"name": c, "used": {"cpu": "1"}} for c in ("a", "b")]}
    h.hub.app["metadata"]["generation"] = 2
    h.reconcile()
    assert h.condition("Scheduled")["status"] == "True"
    assert h.condition("QuotaExceeded")["status"] == "False"
    # another application of the tenant finds no room
    other = application("api", "shop", app["spec"]["resources"]["manifests"], "f")
    h2 = Harness(other, quotas=[quota])
    h2.reconcile()
    assert h2.condition("QuotaExceeded")["status"] == "True"


def test_what_is_planned_and_not_applied_yet_is_not_free() -> None:
    quota = _one_cpu_tenant()
    first = Harness(_asking("first", 1, "600m"), quotas=[quota])
    first.reconcile()
    assert sorted(first.queued) == [("a", "shop/first"), ("b", "shop/first")]
    # the members report no use yet: the first one's plan still takes the room
    second = Harness(_asking("second", 1, "600m"), quotas=[quota], table=first.table)
    second.reconcile()
    assert second.queued == []
    assert second.condition("QuotaExceeded")["status"] == "True"


def test_a_templated_replica_count_is_counted_once_rendered() -> None:
    app = _asking("web", "{{ 4 }}", "500m")  # unknown to the scheduler, 4 once rendered
    quota = _one_cpu_tenant()
    h = Harness(app, quotas=[quota])
    h.reconcile()
    assert h.queued == []
    exceeded = h.condition("QuotaExceeded")
    assert exceeded["status"] == "True"
    assert exceeded["message"] == (
        "as rendered, it asks more than the tenant's quota leaves on a, b: cpu 2 asked, 1 left; "
        "nothing was applied"
    )


def _limit_range(namespace: str, default_request: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": "defaults", "namespace": namespace},
        "spec": {"limits": [{"type": "Container", "defaultRequest": default_request}]},
    }


def _unrequested(name: str, replicas: int) -> dict[str, Any]:
    """An application of one Deployment whose container states no requests at all."""
    return application(name, "shop", [deployment(name, "shop", "nginx:1.27", replicas)], "f")


def test_a_container_without_requests_is_refused_where_the_quota_needs_them() -> None:
    # a's LimitRanges are listed (none in shop); b's are not listed yet: the member decides
    h = Harness(_unrequested("web", 1), quotas=[_one_cpu_tenant()], limit_ranges={"a": []})
    h.reconcile()
    assert h.queued == []
    exceeded = h.condition("QuotaExceeded")
    assert exceeded["status"] == "True"
    assert exceeded["reason"] == "RequestsMissing"
    assert exceeded["message"] == (
        "tenant team's quota limits what these containers leave unstated, and no LimitRange "
        "of their namespace gives a default: a: Deployment shop/web container main: no cpu "
        "request; nothing was applied"
    )
    assert h.metrics.tenant_rejections.labels("team", "requests-missing")._value.get() == 1


def test_a_container_without_requests_counts_as_its_namespaces_limit_range_default() -> None:
    ranges = {c: [_limit_range("shop", {"cpu": "400m"})] for c in ("a", "b")}
    fits = Harness(_unrequested("web", 2), quotas=[_one_cpu_tenant()], limit_ranges=ranges)
    fits.reconcile()  # 2 x 400m of 1 cpu
    assert sorted(fits.queued) == [("a", "shop/web"), ("b", "shop/web")]
    too_many = Harness(_unrequested("web", 3), quotas=[_one_cpu_tenant()], limit_ranges=ranges)
    too_many.reconcile()
    assert too_many.queued == []
    # The scheduler counts the defaults itself: no room, before anything is rendered.
    assert too_many.condition("QuotaExceeded")["message"] == (
        "tenant team's quota leaves no room on a, b: 3 replica(s) need 1.200 cpu; quota left: 1"
    )


def test_a_cluster_where_the_rendering_asks_too_much_is_left_out_not_the_application() -> None:
    # Four replicas on a once rendered (the scheduler cannot know), one on b.
    app = _asking("web", "{{ 4 if cluster.name == 'a' else 1 }}", "500m")
    h = Harness(app, quotas=[_one_cpu_tenant()])
    h.reconcile()
    assert h.queued == [("b", "shop/web")]
    h.synced("shop/web", "b")
    h.reconcile(replan=False)
    scheduled = h.condition("Scheduled")
    assert scheduled["status"] == "True"
    assert scheduled["message"].endswith(
        "; placed without a: cpu 2 asked, 1 left (as rendered, over the tenant's quota)"
    )
    assert h.condition("QuotaExceeded")["status"] == "False"


def test_where_it_runs_it_is_not_taken_away_for_want_of_room() -> None:
    """A new generation that asks too much of a cluster the application runs on is
    refused whole: what runs stays, there and everywhere."""
    h = Harness(_asking("web", 1, "500m"), quotas=[_one_cpu_tenant()])
    h.reconcile()
    h.synced("shop/web", "a", "b")
    h.reconcile(replan=False)
    workload = h.hub.app["spec"]["resources"]["manifests"][0]
    workload["spec"]["replicas"] = "{{ 4 if cluster.name == 'a' else 1 }}"
    h.hub.app["metadata"]["generation"] = 2
    h.queued = []
    h.reconcile()
    assert h.queued == []  # no removal from a, nothing new on b
    exceeded = h.condition("QuotaExceeded")
    assert exceeded["status"] == "True"
    assert exceeded["message"].startswith(
        "as rendered, it asks more than the tenant's quota leaves on a: cpu 2 asked"
    )
    assert sorted(h.table.works_of("shop/web")) == ["a", "b"]


def test_without_a_tenant_quota_requests_are_not_required() -> None:
    h = Harness(_unrequested("web", 1), limit_ranges={"a": [], "b": []})
    h.reconcile()
    assert sorted(h.queued) == [("a", "shop/web"), ("b", "shop/web")]


def test_within_the_quota_says_so() -> None:
    h = Harness(_app())
    h.reconcile()
    h.synced("shop/web", "a", "b")
    h.reconcile(replan=False)
    assert h.condition("QuotaExceeded")["status"] == "False"


def test_a_cluster_the_application_leaves_gets_removal_work() -> None:
    h = Harness(_app())
    h.reconcile()
    h.synced("shop/web", "a", "b")
    h.reconcile(replan=False)
    h.hub.app["spec"]["placement"] = {"excludeClusters": ["b"]}
    h.hub.app["metadata"]["generation"] = 2
    h.queued = []
    h.reconcile()
    removal = h.table.get("shop/web", "b")
    assert removal is not None
    assert removal.removal
    assert h.queued == [("b", "shop/web")]


def test_deletion_waits_for_the_removals_then_lets_go() -> None:
    h = Harness(_app())
    h.reconcile()
    h.synced("shop/web", "a", "b")
    h.reconcile(replan=False)
    h.hub.app["metadata"]["deletionTimestamp"] = "2026-11-30T00:00:00Z"
    h.reconcile()
    assert all(w.removal for w in h.table.works_of("shop/web").values())
    assert h.hub.app["metadata"]["finalizers"] == [FINALIZER]  # removals in flight
    h.synced("shop/web", "a", "b")
    h.reconcile(replan=False)
    assert h.hub.app["metadata"]["finalizers"] == []
    assert h.table.apps() == []


@pytest.mark.parametrize("orphan", [False, True])
def test_a_cluster_that_cannot_be_cleaned_holds_deletion_unless_orphaned(orphan: bool) -> None:
    h = Harness(_app())
    h.reconcile()
    h.synced("shop/web", "a", "b")
    h.reconcile(replan=False)
    h.hub.app["metadata"]["deletionTimestamp"] = "2026-11-30T00:00:00Z"
    if orphan:
        h.hub.app["metadata"]["annotations"] = {"propagator.io/orphan-unreachable": "true"}
    h.reconcile()
    h.synced("shop/web", "a")
    state = h.table.state("shop/web", "b")
    assert state is not None
    state.failed, state.error, state.attempts = True, "connection refused", 3
    h.reconcile(replan=False)
    if orphan:
        assert h.hub.app["metadata"]["finalizers"] == []
    else:
        assert h.hub.app["metadata"]["finalizers"] == [FINALIZER]
        assert h.condition("Applied")["reason"] == "CleanupFailed"
        assert "b: connection refused after 3 attempts" in h.condition("Applied")["message"]


def test_a_stale_snapshot_is_not_trusted_the_fresh_cluster_data_is_scanned() -> None:
    app = _app()
    app["spec"]["placement"] = {"maxClusters": 1, "clusterNames": ["a", "b"]}
    h = Harness(app, clusters=("a", "b"))
    store = h.reconciler.store
    store._confirmed_at -= 100  # no publish for 100 s
    snapshot = store.current()
    # the snapshot still shows a Ready; the probes have seen it stop answering
    fresh = [dataclasses.replace(snapshot.clusters["a"], ready=False), snapshot.clusters["b"]]
    h.reconciler.chooser.placer.fresh_clusters = lambda: fresh
    h.reconcile()
    h.reconcile(replan=False)
    assert [p["cluster"] for p in h.hub.app["status"]["placement"]] == ["b"]
    scheduled = h.condition("Scheduled")["message"]
    assert "full scan of fresh cluster data: snapshot is 100" in scheduled, scheduled
    assert h.reconciler.metrics.scheduler_full_scans._value.get() == 1


def test_a_change_of_work_logs_one_line_naming_its_clusters_and_a_recheck_none(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clusters = [f"c{i}" for i in range(7)]
    h = Harness(_app(), clusters=clusters)
    with caplog.at_level("INFO", logger="propagator.propagation.workrecord"):
        h.reconcile()
    lines = [r.getMessage() for r in caplog.records if "syncing" in r.getMessage()]
    assert lines == ["shop/web: syncing 7 clusters (c0, c1, c2, c3, c4 and 2 more)"]
    h.synced("shop/web", *clusters)
    caplog.clear()
    h.reconciler.work.recheck_after_s = Settings(resync_period_s=10).resync_period_s
    for c in clusters:  # long enough ago that the plan rechecks every cluster
        state = h.table.state("shop/web", c)
        assert state is not None
        state.tried_at = time.monotonic() - 60
    h.queued = []
    with caplog.at_level("INFO", logger="propagator.propagation.workrecord"):
        h.reconcile()
    assert len(h.queued) == 7  # rechecked, silently
    assert not [r for r in caplog.records if "syncing" in r.getMessage()]


def test_a_restarted_controller_keeps_the_status_while_its_clusters_are_synced_again() -> None:
    """A new controller (an empty work table) syncs every cluster again; until they
    report, the status stays what the last controller wrote (Applied does not flip to
    "in progress" and back at each restart, and nothing is written), with the health its
    caches cannot tell yet. An application changed meanwhile starts over."""
    h = Harness(_app())
    h.reconcile()
    h.synced("shop/web", "a", "b")
    h.reconcile(replan=False)
    applied = h.condition("Applied")
    assert applied["status"] == "True"

    restarted = Harness(copy.deepcopy(h.hub.app))
    restarted.healths["b"] = "Unknown"  # its caches have not listed yet
    restarted.reconcile()
    assert sorted(restarted.queued) == [("a", "shop/web"), ("b", "shop/web")]
    restarted.reconcile(replan=False)  # a refresh before any sync reports
    assert restarted.hub.patches == []
    assert restarted.hub.app["status"] == h.hub.app["status"]
    b = restarted.table.state("shop/web", "b")
    assert b is not None
    b.carried = False  # its sync reported: the caches are what tells its health now
    restarted.reconcile(replan=False)
    assert restarted.hub.app["status"]["clusters"][1]["health"] == "Unknown"
    assert restarted.condition("Applied") == applied

    changed = copy.deepcopy(h.hub.app)
    changed["spec"]["resources"]["manifests"][0]["data"] = {"a": "2"}
    meanwhile = Harness(changed)
    meanwhile.reconcile()
    meanwhile.synced("shop/web", "a")
    meanwhile.reconcile(replan=False)
    assert meanwhile.condition("Applied")["message"] == "1/2 clusters applied; 1 in progress: b"


@pytest.mark.parametrize(
    ("app", "bound"),
    [
        (_app(), False),  # configuration to every cluster that passes the filters
        (_app(placement={"maxClusters": 1}), True),  # which one: capacity may score it
        (_asking("big", 2, "500m"), True),  # pods, and what they request, need room
    ],
)
def test_a_placement_that_capacity_can_move_is_planned_again_when_capacity_changes(
    app: dict[str, Any], bound: bool
) -> None:
    h = Harness(app)
    key = f"shop/{app['metadata']['name']}"
    assert h.reconciler.capacity_bound(key)  # not planned yet
    h.reconcile()
    assert h.table.get(key, "a") is not None
    assert h.reconciler.capacity_bound(key) is bound
