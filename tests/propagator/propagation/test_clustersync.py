"""One application on one member: what is written, judged from the caches."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, cast

import anyio
import pytest

from kube.connection import KubeConnection, apply_creating_namespace
from kube.errors import ApiError
from propagator.propagation.clustersync import IN_FLIGHT, sync_cluster
from propagator.work.objects import APP_LABEL, MEMBER_LABEL, Owner, app_label_value
from propagator.work.release import Release
from propagator.work.table import ClusterWork, SyncPolicy
from tests.e2e.manifests import config_map, deployment
from tests.fakes import FakeMember

pytestmark = pytest.mark.anyio

APP = "shop/web"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _work(
    objects: list[dict[str, Any]], kinds: frozenset[str] = frozenset(), adopt: bool = False
) -> ClusterWork:
    return ClusterWork(APP, "m1", tuple(objects), "r1", kinds, SyncPolicy(), "uid-web", adopt)


def _objects() -> list[dict[str, Any]]:
    return [
        deployment("web", "shop", "nginx:1.27"),
        config_map("web-config", "shop", mode="a", cpu="1000m"),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
    ]


async def _sync(fake: FakeMember, work: ClusterWork, member: Any = None) -> Any:
    return await sync_cluster(member or fake.unit(), work, fake.caches, 5.0)


async def test_a_first_sync_into_a_new_namespace_costs_one_request_per_object() -> None:
    fake = FakeMember()
    report = await _sync(fake, _work(_objects()))
    assert report.applied == 3
    assert report.deleted == report.healed == 0
    verbs = [(verb, key[1]) for verb, key in fake.requests]
    # Created first (the answer says nothing can be in it yet), then its stamp and the
    # objects in one round: nothing read.
    assert verbs[0] == ("create", "Namespace")
    assert sorted(verbs[1:]) == [
        ("apply", "ConfigMap"),
        ("apply", "Deployment"),
        ("apply", "Namespace"),
    ]
    owner = Owner("shop", "web", "uid-web")
    assert owner.owns(fake.objects["apps/v1", "Deployment", "shop", "web"])
    assert owner.owns(fake.objects["v1", "Namespace", "", "shop"])


async def test_a_fresh_members_objects_are_written_before_its_caches_are_waited_for() -> None:
    # Nothing can be in the namespaces the sync made: no listing to wait for first.
    fake = FakeMember()
    listed_after: list[list[tuple[str, Any]]] = []

    async def caches(member: Any, kinds: Any, timeout_s: float) -> Any:
        listed_after.append(list(fake.requests))
        return await fake.caches(member, kinds, timeout_s)

    member = fake.unit()
    report = await sync_cluster(member, _work(_objects()), caches, 5.0)
    assert report.applied == 3
    assert len(listed_after) == 1
    assert sorted(verb for verb, _ in listed_after[0]) == ["apply", "apply", "apply", "create"]
    # Listed from then on: the next sync judges from them at once, and writes nothing.
    fake.requests.clear()
    assert (await sync_cluster(member, _work(_objects()), caches, 5.0)).applied == 0
    assert fake.requests == []
    assert len(listed_after) == 2


async def test_a_fresh_member_whose_namespace_exists_is_judged_from_its_caches() -> None:
    # A restarted controller: the namespace exists, its objects are ours and in line.
    fake = FakeMember()
    objects = [config_map("web-config", "team-a", mode="a")]
    await _sync(fake, _work(objects))
    fake.requests.clear()
    report = await _sync(fake, _work(objects), fake.unit())
    assert report.applied == 0
    assert [verb for verb, _ in fake.writes()] == ["create"]  # the namespace: refused
    # One of two namespaces new: the objects in it are written as creates, which an object
    # there would refuse (the caches listed only once the existing one said so), the
    # others judged from them.
    fake.requests.clear()
    more = [*objects, config_map("other", "team-b", mode="b")]
    report = await _sync(fake, _work(more), fake.unit())
    assert report.applied == 1
    other = ("v1", "ConfigMap", "team-b", "other")
    assert [r for r in fake.requests if r[1] == other] == [("apply new", other)]


async def test_a_fresh_members_sync_prunes_what_the_application_left_elsewhere() -> None:
    fake = FakeMember()
    await _sync(fake, _work([config_map("web-config", "old-place", mode="a")]))
    moved = [config_map("web-config", "new-place", mode="a")]
    report = await _sync(fake, _work(moved, frozenset({"v1/ConfigMap"})), fake.unit())
    assert (report.applied, report.deleted) == (1, 1)
    assert ("v1", "ConfigMap", "old-place", "web-config") not in fake.objects
    assert ("v1", "ConfigMap", "new-place", "web-config") in fake.objects


async def test_a_namespace_the_objects_need_is_created_labelled_but_not_the_applications() -> None:
    fake = FakeMember()
    objects = [config_map("web-config", "team-a", mode="a")]
    member = fake.unit()
    await _sync(fake, _work(objects), member)
    assert [(verb, key[1]) for verb, key in fake.requests] == [
        ("create", "Namespace"),
        ("apply", "ConfigMap"),
    ]
    namespace = fake.objects["v1", "Namespace", "", "team-a"]
    assert namespace["metadata"]["labels"][MEMBER_LABEL] == "m1"  # a Namespace cache sees it
    assert not Owner("shop", "web", "uid-web").annotated(namespace)
    # Known to exist from then on, no longer new: a second object in it is written as a
    # create (someone may have made it meanwhile), and the namespace not created again.
    fake.requests.clear()
    await _sync(fake, _work([*objects, config_map("more", "team-a", a="1")]), member)
    more = ("v1", "ConfigMap", "team-a", "more")
    assert fake.requests == [("apply new", more)]
    # The application leaves: its ConfigMaps go, the namespace (maybe shared) stays.
    report = await _sync(fake, _work([], frozenset({"v1/ConfigMap", "v1/Namespace"})), member)
    assert report.deleted == 2
    assert ("v1", "Namespace", "", "team-a") in fake.objects


async def test_in_an_existing_namespace_each_new_object_is_one_create() -> None:
    fake = FakeMember(namespaces=["shop"])
    member = fake.unit()
    report = await _sync(fake, _work(_objects()), member)
    assert report.applied == 2
    verbs = [(verb, key[1]) for verb, key in fake.requests]
    assert verbs[0] == ("create", "Namespace")  # refused: it exists, not ours
    # The application's Namespace, known to exist, is read first, and left as it is.
    assert verbs[1] == ("get", "Namespace")
    assert sorted(verbs[2:]) == [("apply new", "ConfigMap"), ("apply new", "Deployment")]
    assert "labels" not in fake.objects["v1", "Namespace", "", "shop"]["metadata"]  # left as is
    # Known to exist from then on: a new object in it is a create, the namespace not made.
    fake.requests.clear()
    await _sync(fake, _work([*_objects(), config_map("more", "shop", a="1")]), member)
    more = ("v1", "ConfigMap", "shop", "more")
    assert fake.requests == [("get", ("v1", "Namespace", "", "shop")), ("apply new", more)]


async def test_a_namespace_the_application_brings_that_someone_made_is_read_once() -> None:
    # The caches listed by an earlier sync: a namespace not known yet is created, which
    # is refused as it exists; the application's Namespace is then read, not created
    # again, and left as it is, and what goes in it is written as creates.
    fake = FakeMember(namespaces=["shop"])
    member = fake.unit()

    def namespace(name: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}

    first = [namespace("first"), config_map("a", "first", a="1")]
    await _sync(fake, _work(first), member)
    fake.requests.clear()
    report = await _sync(fake, _work([*first, namespace("shop"), *_objects()[:2]]), member)
    assert report.applied == 2
    shop = ("v1", "Namespace", "", "shop")
    assert [r for r in fake.requests if r[1] == shop] == [("create", shop), ("get", shop)]
    assert "labels" not in fake.objects[shop]["metadata"]  # someone else's: left as it is
    assert sorted(verb for verb, key in fake.requests if key[2] == "shop") == [
        "apply new",
        "apply new",
    ]


async def test_an_object_the_caches_cannot_see_is_read_when_its_create_is_refused() -> None:
    # Ours, its watch event still on the way: refused as a create, read, written.
    fake = FakeMember(namespaces=["shop"])
    member = fake.unit()
    objects = [config_map("web-config", "shop", mode="a")]
    await _sync(fake, _work(objects), member)
    key = ("v1", "ConfigMap", "shop", "web-config")
    fake.unseen.add(key)
    fake.requests.clear()
    report = await _sync(fake, _work([config_map("web-config", "shop", mode="b")]), member)
    assert report.applied == 1
    assert fake.requests == [("apply new", key), ("get", key), ("apply", key)]
    assert fake.objects[key]["data"] == {"mode": "b"}


async def test_a_member_that_takes_no_precondition_on_a_create_gets_a_read_first() -> None:
    # As Kubernetes 1.22 does for a Service: the create refused with a 500, read, written.
    fake = FakeMember(namespaces=["shop"])
    fake.no_create_precondition.add("ConfigMap")
    objects = [config_map("web-config", "shop", mode="a")]
    report = await _sync(fake, _work(objects))
    assert report.applied == 1
    key = ("v1", "ConfigMap", "shop", "web-config")
    assert [r for r in fake.requests if r[1] == key] == [
        ("apply new", key),
        ("get", key),
        ("apply", key),
    ]
    assert fake.objects[key]["data"] == {"mode": "a"}


async def test_nothing_is_written_when_the_member_holds_it() -> None:
    fake = FakeMember()
    member = fake.unit()
    await _sync(fake, _work(_objects()), member)
    fake.requests.clear()
    report = await _sync(fake, _work(_objects()), member)
    assert report.applied == 0
    assert fake.requests == []  # the normalised 1000m included


async def test_after_a_restart_what_matches_is_not_written_and_a_normalised_value_once() -> None:
    fake = FakeMember()
    await _sync(fake, _work(_objects()))
    fake.requests.clear()
    restarted = fake.unit()  # nothing recorded
    report = await _sync(fake, _work(_objects()), restarted)
    assert report.applied == 1  # the ConfigMap with cpu 1000m (stored as 1)
    fake.requests.clear()
    assert (await _sync(fake, _work(_objects()), restarted)).applied == 0


async def test_drift_and_deletion_are_healed_and_counted() -> None:
    fake = FakeMember()
    member = fake.unit()
    await _sync(fake, _work(_objects()), member)

    def set_image(obj: dict[str, Any]) -> None:
        obj["spec"]["template"]["spec"]["containers"][0]["image"] = "evil:1"

    fake.edit(("apps/v1", "Deployment", "shop", "web"), set_image)
    del fake.objects["v1", "ConfigMap", "shop", "web-config"]
    fake.requests.clear()
    report = await _sync(fake, _work(_objects()), member)
    assert report.applied == report.healed == 2
    live = fake.objects["apps/v1", "Deployment", "shop", "web"]
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert ("v1", "ConfigMap", "shop", "web-config") in fake.objects


async def test_our_object_whose_label_was_removed_is_healed_after_a_restart() -> None:
    fake = FakeMember()
    await _sync(fake, _work(_objects()))

    def unlabel(obj: dict[str, Any]) -> None:
        del obj["metadata"]["labels"]

    fake.edit(("v1", "ConfigMap", "shop", "web-config"), unlabel)
    report = await _sync(fake, _work(_objects()), fake.unit())  # nothing recorded
    assert report.conflicts == ()  # its annotations still name the application and UID
    assert report.applied == 1
    live = fake.objects["v1", "ConfigMap", "shop", "web-config"]
    assert Owner("shop", "web", "uid-web").owns(live)
    assert live["metadata"]["labels"][MEMBER_LABEL] == "m1"


async def test_an_object_written_before_the_member_label_gets_it() -> None:
    fake = FakeMember(namespaces=["shop"])
    older = Owner("shop", "web", "uid-web").stamp(
        config_map("web-config", "shop", a="1"), "r0", "m1"
    )
    del older["metadata"]["labels"][MEMBER_LABEL]
    fake.put(older)
    report = await _sync(fake, _work([config_map("web-config", "shop", a="1")]))
    assert report.conflicts == ()
    assert (
        fake.objects["v1", "ConfigMap", "shop", "web-config"]["metadata"]["labels"][MEMBER_LABEL]
        == "m1"
    )


async def test_two_member_clusters_on_one_api_server_do_not_take_objects_from_each_other() -> None:
    one = FakeMember("m1")
    two = FakeMember("m2")
    two.objects = one.objects  # the same API server, registered twice
    await _sync(one, _work(_objects()))
    before = copy.deepcopy(one.objects)
    report = await _sync(two, _work(_objects()))
    assert report.conflicts == (
        "apps/v1 Deployment shop/web is propagated there through MemberCluster m1 as well "
        "(two MemberClusters reach the same API server)",
        "v1 ConfigMap shop/web-config is propagated there through MemberCluster m1 as well "
        "(two MemberClusters reach the same API server)",
        "v1 Namespace shop is propagated there through MemberCluster m1 as well "
        "(two MemberClusters reach the same API server)",
    )
    assert report.applied == 0
    assert two.objects == before  # nothing written: creating the namespace was refused
    labels = one.objects["apps/v1", "Deployment", "shop", "web"]["metadata"]["labels"]
    assert labels[MEMBER_LABEL] == "m1"
    # m2's caches hold nothing of m1's, so m1's prune of its own objects is not m2's
    caches = await two.caches(two.unit(), [("v1", "ConfigMap")], 1.0)
    assert caches["v1", "ConfigMap"].snapshot() == []


async def test_a_status_update_on_the_member_is_not_drift() -> None:
    fake = FakeMember()
    member = fake.unit()
    await _sync(fake, _work(_objects()), member)
    fake.edit(
        ("apps/v1", "Deployment", "shop", "web"),
        lambda obj: obj.update(status={"readyReplicas": 2}),
    )
    fake.requests.clear()
    assert (await _sync(fake, _work(_objects()), member)).applied == 0


async def test_reported_drift_is_left_as_it_is_and_named_until_healing_is_asked() -> None:
    fake = FakeMember()
    member = fake.unit()
    await _sync(fake, _work(_objects()), member)

    def set_image(obj: dict[str, Any]) -> None:
        obj["spec"]["template"]["spec"]["containers"][0]["image"] = "evil:1"

    key = ("apps/v1", "Deployment", "shop", "web")
    fake.edit(key, set_image)
    del fake.objects["v1", "ConfigMap", "shop", "web-config"]
    fake.requests.clear()
    report = await sync_cluster(member, _work(_objects()), fake.caches, 5.0, heal=False)
    assert fake.writes() == []
    assert report.drift == ("apps/v1 Deployment shop/web", "v1 ConfigMap shop/web-config")
    assert fake.objects[key]["spec"]["template"]["spec"]["containers"][0]["image"] == "evil:1"
    report = await sync_cluster(member, _work(_objects()), fake.caches, 5.0, heal=True)
    assert report.healed == 2
    assert report.drift == ()
    assert fake.objects[key]["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"


async def test_a_suspended_sync_writes_nothing_and_reports_what_differs_or_is_missing() -> None:
    fake = FakeMember()
    member = fake.unit()
    await _sync(fake, _work(_objects()), member)
    fake.edit(("v1", "ConfigMap", "shop", "web-config"), lambda o: o["data"].update(mode="b"))
    extra = config_map("extra", "shop", a="1")
    fake.requests.clear()
    # Without the Deployment (a prune would delete it), with a ConfigMap not there yet.
    suspended = dataclasses.replace(_work([*_objects()[1:], extra]), suspended=True)
    report = await sync_cluster(member, suspended, fake.caches, 5.0)
    assert fake.writes() == []  # no apply, no heal, and no prune of the Deployment
    assert report.drift == ("v1 ConfigMap shop/extra", "v1 ConfigMap shop/web-config")
    assert ("apps/v1", "Deployment", "shop", "web") in fake.objects


async def test_after_a_restart_an_object_of_the_same_revision_that_differs_is_drift() -> None:
    fake = FakeMember()
    await _sync(fake, _work(_objects()))
    fake.edit(("v1", "ConfigMap", "shop", "web-config"), lambda o: o["data"].update(mode="b"))
    fake.requests.clear()
    report = await sync_cluster(fake.unit(), _work(_objects()), fake.caches, 5.0, heal=False)
    assert report.drift == ("v1 ConfigMap shop/web-config",)
    # (the namespace's create, refused, is how a new unit learns that it exists)
    assert fake.writes() == [("create", ("v1", "Namespace", "", "shop"))]


async def test_an_object_kept_on_delete_loses_the_stamp_and_stays_with_its_namespace() -> None:
    fake = FakeMember()
    member = fake.unit()
    kept = config_map("data", "shop", a="1")
    kept["metadata"]["annotations"] = {"propagator.io/on-delete": "Orphan"}
    await _sync(fake, _work([*_objects(), kept]), member)
    kinds = frozenset({"v1/ConfigMap", "apps/v1/Deployment", "v1/Namespace"})
    report = await _sync(fake, _work([], kinds), member)
    assert report.orphaned == ("v1 ConfigMap shop/data", "v1 Namespace shop")
    left = fake.objects["v1", "ConfigMap", "shop", "data"]
    assert not Owner("shop", "web", "uid-web").annotated(left)
    assert APP_LABEL not in left["metadata"]["labels"]
    assert left["metadata"]["annotations"]["propagator.io/orphaned-from"] == "shop/web"
    assert ("v1", "Namespace", "", "shop") in fake.objects
    assert ("apps/v1", "Deployment", "shop", "web") not in fake.objects
    # Not the application's any more: a later sync of it leaves it alone.
    report = await _sync(fake, _work([], kinds), member)
    assert report.deleted == 0
    assert ("v1", "ConfigMap", "shop", "data") in fake.objects


async def test_replicas_an_autoscaler_on_the_member_set_are_left_to_it() -> None:
    fake = FakeMember()
    member = fake.unit()
    release = Release((), (("apps/v1", "Deployment", "/spec/replicas"),))
    work = dataclasses.replace(_work(_objects()), release=release)
    await sync_cluster(member, work, fake.caches, 5.0)
    key = ("apps/v1", "Deployment", "shop", "web")

    def scale(obj: dict[str, Any]) -> None:
        obj["spec"]["replicas"] = 7

    fake.edit(key, scale)
    # Without an autoscaler there, the count is drift: healed.
    await sync_cluster(member, work, fake.caches, 5.0)
    assert fake.objects[key]["spec"]["replicas"] == 2
    fake.put(
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
            },
        }
    )
    fake.edit(key, scale)
    fake.requests.clear()
    report = await sync_cluster(member, work, fake.caches, 5.0)
    assert fake.objects[key]["spec"]["replicas"] == 7
    assert report.applied == 0  # the rest is in line: nothing written
    assert [verb for verb, _ in fake.requests] == ["get", "list"]
    fake.requests.clear()
    await sync_cluster(member, work, fake.caches, 5.0)
    assert fake.writes() == []  # judged from the caches from then on


async def test_only_this_applications_unwanted_objects_are_deleted() -> None:
    fake = FakeMember()
    member = fake.unit()
    await _sync(fake, _work(_objects()), member)
    fake.put(Owner("shop", "other", "").stamp(config_map("theirs", "shop", a="1"), "x", "m1"))
    fake.put(config_map("unowned", "shop", a="1"))
    kinds = frozenset({"v1/ConfigMap", "apps/v1/Deployment"})
    report = await _sync(fake, _work(_objects()[:1], kinds), member)
    assert report.deleted == 1
    assert ("v1", "ConfigMap", "shop", "web-config") not in fake.objects
    assert ("v1", "ConfigMap", "shop", "theirs") in fake.objects
    assert ("v1", "ConfigMap", "shop", "unowned") in fake.objects
    # The removal work (no objects) takes everything of this application, and only that.
    report = await _sync(fake, _work([], kinds), member)
    assert report.deleted == 1
    assert ("apps/v1", "Deployment", "shop", "web") not in fake.objects
    assert ("v1", "ConfigMap", "shop", "theirs") in fake.objects


async def test_an_object_written_before_the_caches_saw_it_is_still_pruned() -> None:
    fake = FakeMember()
    member = fake.unit()
    await _sync(fake, _work(_objects()), member)
    hidden = ("v1", "ConfigMap", "shop", "web-config")
    fake.unseen.add(hidden)  # its watch event has not arrived yet
    kinds = frozenset({"v1/ConfigMap", "apps/v1/Deployment"})
    report = await _sync(fake, _work(_objects()[:1], kinds), member)
    assert report.deleted == 1
    assert hidden not in fake.objects
    # What the caches show under another owner since is not this sync's to delete.
    await _sync(fake, _work(_objects()), member)
    theirs = Owner("shop", "other", "").stamp(config_map("web-config", "shop", a="1"), "x", "m1")
    fake.put(theirs)
    fake.unseen.clear()
    report = await _sync(fake, _work(_objects()[:1], kinds), member)
    assert report.deleted == 0
    assert hidden in fake.objects


def test_a_namespace_gone_since_the_cache_saw_it_is_created_on_the_refusal() -> None:
    fake = FakeMember()
    answer = anyio.run(
        apply_creating_namespace, cast(KubeConnection, fake), config_map("c", "late", a="1")
    )
    assert answer["metadata"]["namespace"] == "late"
    assert [key[1] for _, key in fake.requests] == ["ConfigMap", "Namespace", "ConfigMap"]


async def test_objects_without_a_namespace_go_into_the_applications() -> None:
    fake = FakeMember(namespaces=["shop"])
    plain = config_map("plain", "shop", a="1")
    del plain["metadata"]["namespace"]
    await _sync(fake, _work([plain]))
    assert ("v1", "ConfigMap", "shop", "plain") in fake.objects


async def test_a_cluster_scoped_object_that_names_a_namespace_is_kept_and_left_alone() -> None:
    # The API server drops its metadata.namespace: the sync must key it as stored, or the
    # next one finds it missing (written again) and unwanted (deleted).
    fake = FakeMember(namespaces=["shop"])
    member = fake.unit()
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com", "namespace": "shop"},
    }
    kinds = frozenset({"apiextensions.k8s.io/v1/CustomResourceDefinition"})
    assert (await _sync(fake, _work([crd], kinds), member)).applied == 1
    key = ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.com")
    assert key in fake.objects
    fake.requests.clear()
    report = await _sync(fake, _work([crd], kinds), member)
    assert (report.applied, report.deleted) == (0, 0)
    assert fake.requests == []
    assert key in fake.objects


async def test_a_refusal_fails_the_sync_and_starts_nothing_new() -> None:
    fake = FakeMember(namespaces=["shop"])
    fake.failures = [ApiError("m1", "422 Invalid: spec.replicas", status=422)]
    many = [config_map(f"c{i}", "shop", a="1") for i in range(3 * IN_FLIGHT)]
    with pytest.raises(ApiError, match="422"):
        await _sync(fake, _work(many))
    assert len(fake.objects) < 3 * IN_FLIGHT  # stopped early (IN_FLIGHT at once at most)


async def test_in_flight_applies_are_bounded() -> None:
    fake = FakeMember(namespaces=["shop"])
    in_flight = peak = 0
    apply = fake.apply

    async def slow_apply(obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await anyio.sleep(0.01)
        in_flight -= 1
        return await apply(obj, **kw)

    fake.apply = slow_apply  # type: ignore[method-assign]
    await _sync(fake, _work([config_map(f"c{i}", "shop", a="1") for i in range(3 * IN_FLIGHT)]))
    assert peak == IN_FLIGHT


# -- ownership ----------------------------------------------------------------------------


async def test_another_applications_object_is_left_alone_and_named() -> None:
    fake = FakeMember(namespaces=["shop"])
    theirs = Owner("shop", "api", "uid-api").stamp(
        config_map("web-config", "shop", a="x"), "r9", "m1"
    )
    fake.put(theirs)
    before = fake.objects["v1", "ConfigMap", "shop", "web-config"]["metadata"]["resourceVersion"]
    report = await _sync(fake, _work(_objects()))
    assert report.conflicts == ("v1 ConfigMap shop/web-config belongs to application shop/api",)
    live = fake.objects["v1", "ConfigMap", "shop", "web-config"]
    assert live["metadata"]["resourceVersion"] == before  # not written
    assert live["data"] == {"a": "x"}
    assert ("apps/v1", "Deployment", "shop", "web") in fake.objects  # the rest is applied


async def test_what_the_platform_keeps_for_a_tenant_is_named_as_the_platforms() -> None:
    """A platform application that collides with a tenant's ResourceQuota (the quota
    enforcer's) is told whose it is: the platform's, not "an application"."""
    fake = FakeMember(namespaces=["shop"])
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": "propagator-tenant-team",
            "namespace": "shop",
            "labels": {APP_LABEL: app_label_value("tenant", "team"), MEMBER_LABEL: "m1"},
            "annotations": {"propagator.io/tenant": "team"},
        },
        "spec": {"hard": {"pods": "6"}},
    }
    fake.put(quota)
    mine = {**quota, "metadata": {"name": "propagator-tenant-team", "namespace": "shop"}}
    report = await _sync(fake, _work([mine]))
    assert report.conflicts == (
        "v1 ResourceQuota shop/propagator-tenant-team belongs to the platform "
        "(it keeps it for TenantQuota team)",
    )
    assert fake.objects["v1", "ResourceQuota", "shop", "propagator-tenant-team"]["spec"] == {
        "hard": {"pods": "6"}
    }


async def test_an_unstamped_object_is_a_conflict_unless_adopted() -> None:
    fake = FakeMember(namespaces=["shop"])
    fake.put(config_map("web-config", "shop", mode="manual"))
    report = await _sync(fake, _work(_objects()))
    assert report.conflicts == (
        "v1 ConfigMap shop/web-config exists on the member without Propagator's stamp "
        "(spec.conflictResolution: Adopt takes it over)",
    )
    assert fake.objects["v1", "ConfigMap", "shop", "web-config"]["data"] == {"mode": "manual"}
    key = ("v1", "ConfigMap", "shop", "web-config")
    assert [r for r in fake.requests if r[1] == key] == [("apply new", key), ("get", key)]

    report = await _sync(fake, _work(_objects(), adopt=True))
    assert report.conflicts == ()
    live = fake.objects["v1", "ConfigMap", "shop", "web-config"]
    assert Owner("shop", "web", "uid-web").owns(live)
    assert live["data"]["mode"] == "a"


async def test_a_namespace_that_exists_is_shared_not_taken_over() -> None:
    fake = FakeMember(namespaces=["shop"])  # created by someone else, no stamp
    report = await _sync(fake, _work(_objects()))
    assert report.conflicts == ()
    namespace = fake.objects["v1", "Namespace", "", "shop"]
    assert not Owner("shop", "web", "uid-web").owns(namespace)
    assert ("apply", ("v1", "Namespace", "", "shop")) not in fake.requests


async def test_prune_deletes_only_objects_with_this_applications_uid() -> None:
    fake = FakeMember()
    member = fake.unit()
    await _sync(fake, _work(_objects()), member)
    # an application of the same name created anew (another UID) left one behind
    fake.put(Owner("shop", "web", "uid-old").stamp(config_map("older", "shop", a="1"), "r0", "m1"))
    kinds = frozenset({"v1/ConfigMap", "apps/v1/Deployment"})
    report = await _sync(fake, _work([], kinds), member)
    assert report.deleted == 2
    assert ("v1", "ConfigMap", "shop", "older") in fake.objects


async def test_a_syncs_writes_go_out_together_before_any_answer_is_read() -> None:
    # Each of _each's workers after the first would send only after a round of the event
    # loop's other work: the writes of one round go out first, then the answers are read.
    fake = FakeMember()
    member = fake.unit()
    first = [config_map("web-config", "shop", mode="a")]
    await _sync(fake, _work(first), member)
    assert len(fake.reads) == 1  # the fresh namespace's round: one object
    fake.requests.clear()
    fake.reads.clear()
    objects = [*first, *(config_map(f"c{i}", "shop", mode="a") for i in range(3))]
    report = await _sync(fake, _work(objects), member)
    assert report.applied == 3
    assert [verb for verb, _ in fake.requests] == ["apply new"] * 3  # creates, as unseen
    assert sorted(key[3] for key, _ in fake.reads) == ["c0", "c1", "c2"]
    assert [made for _, made in fake.reads] == [3, 3, 3]  # every answer read after all 3
    assert fake.dropped == []


async def test_a_sync_that_fails_gives_up_the_writes_it_sent_ahead() -> None:
    fake = FakeMember()
    member = fake.unit()
    first = [config_map("web-config", "shop", mode="a")]
    await _sync(fake, _work(first), member)
    fake.failures.append(ApiError("m1", "PATCH: 403 Forbidden", status=403))
    objects = [*first, *(config_map(f"c{i}", "shop", mode="a") for i in range(3))]
    with pytest.raises(ApiError, match="Forbidden"):
        await _sync(fake, _work(objects), member)
    # The first answer failed the sync: the other two were never read, and are dropped
    # (their streams reset) rather than left open on the connection.
    assert sorted(key[3] for key in fake.dropped) == ["c1", "c2"]
    assert len(fake.reads) == 2  # the fresh sync's, then the refused one


async def test_a_member_limited_to_namespaces_gets_its_objects_without_a_namespace_made() -> None:
    # spec.namespaces: they exist (the member's admin made them); none is created or read.
    fake = FakeMember(namespaces=("shop",))
    objects = [deployment("web", "shop", "nginx:1.27"), config_map("web-config", "shop", a="1")]
    report = await _sync(fake, _work(objects), fake.unit(allowed_namespaces=("shop", "tools")))
    assert report.applied == 2
    # Each written as a create: one request per object, nothing read.
    assert sorted(verb for verb, _ in fake.requests) == ["apply new", "apply new"]
    assert ("apps/v1", "Deployment", "shop", "web") in fake.objects


@pytest.mark.parametrize(
    ("obj", "why"),
    [
        (config_map("stray", "billing", a="1"), "v1 ConfigMap billing/stray: metadata.namespace "),
        (
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "billing"}},
            "v1 Namespace billing is cluster-scoped",
        ),
        (  # its metadata.namespace says nothing: the member's discovery decides
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": "widgets.example.com", "namespace": "shop"},
            },
            "CustomResourceDefinition widgets.example.com is cluster-scoped",
        ),
    ],
)
async def test_a_member_limited_to_namespaces_refuses_what_is_outside_before_writing(
    obj: dict[str, Any], why: str
) -> None:
    fake = FakeMember(namespaces=("shop",))
    objects = [config_map("web-config", "shop", a="1"), obj]
    with pytest.raises(ApiError) as raised:
        await _sync(fake, _work(objects), fake.unit(allowed_namespaces=("shop", "tools")))
    assert not raised.value.retryable
    assert "1 object(s) outside the namespaces MemberCluster m1 allows" in str(raised.value)
    assert "(spec.namespaces: shop, tools)" in str(raised.value)
    assert why in str(raised.value)
    assert fake.requests == []  # not even the object that was allowed


async def test_a_member_of_the_whole_cluster_still_makes_the_namespaces_it_needs() -> None:
    fake = FakeMember(namespaces=())
    report = await _sync(fake, _work([config_map("stray", "billing", a="1")]))
    assert report.applied == 1
    assert ("create", ("v1", "Namespace", "", "billing")) in fake.requests
