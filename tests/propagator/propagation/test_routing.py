"""Member cache events: drift and deletions sync again; workload changes refresh status.
Fleet snapshot changes: which fleets' applications are planned again."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fleet.snapshot import cluster_info
from fleet.snapshotstore import SnapshotStore
from propagator.interpreter.registry import builtin_rules
from propagator.propagation import drift
from propagator.propagation.drift import fingerprint
from propagator.propagation.routing import (
    FleetChange,
    Route,
    fleet_change,
    route_member_event,
    to_plan_again,
)
from propagator.runtime.memberregistry import Applied
from propagator.work.objects import Owner
from propagator.work.table import ClusterWork, SyncPolicy, WorkTable
from tests.e2e.manifests import config_map, deployment
from tests.fakes import FakeMember

APP = "shop/web"


INTERPRETS = builtin_rules().interprets


def _setup(obj: dict[str, Any]) -> tuple[Any, WorkTable, dict[str, Any]]:
    member = FakeMember("m1").unit()
    table = WorkTable()
    table.set_work(
        APP,
        {"m1": ClusterWork(APP, "m1", (obj,), "r1", frozenset(), SyncPolicy())},
        now=0,
        recheck_after_s=60,
    )
    desired = Owner("shop", "web", "").stamp(obj, "r1", "m1")
    live = {**copy.deepcopy(desired), "status": {"readyReplicas": 1}}
    live["metadata"]["resourceVersion"] = "5"
    key = ("apps/v1" if obj["kind"] == "Deployment" else "v1", obj["kind"], "shop")
    member.applied.record(
        "shop/web",
        (*key, obj["metadata"]["name"]),
        Applied(desired, fingerprint(live, desired), resource_version="5"),
    )
    return member, table, live


def _edited(live: dict[str, Any]) -> dict[str, Any]:
    """A later version of ``live``, as the member serves it."""
    edited = copy.deepcopy(live)
    edited["metadata"]["resourceVersion"] = str(int(live["metadata"]["resourceVersion"]) + 1)
    return edited


def test_a_status_change_refreshes_the_status_without_a_sync() -> None:
    member, table, live = _setup(deployment("web", "shop", "nginx:1"))
    newer = {**_edited(live), "status": {"readyReplicas": 2}}
    route = route_member_event(member, table, live, newer, INTERPRETS)
    assert route.sync is None
    assert route.refresh == APP


def test_an_edited_object_is_synced_again() -> None:
    member, table, live = _setup(deployment("web", "shop", "nginx:1"))
    edited = _edited(live)
    edited["spec"]["template"]["spec"]["containers"][0]["image"] = "evil:1"
    assert route_member_event(member, table, live, edited, INTERPRETS).sync == APP


def test_the_event_of_our_own_write_is_in_line_without_hashing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The watch brings back every object a sync writes: at the resourceVersion the
    write's answer gave, it is that write, with nothing to compare."""
    member, table, live = _setup(config_map("settings", "shop", a="1"))

    def hashed(*_: Any) -> str:
        raise AssertionError("fingerprinted")

    monkeypatch.setattr(drift, "fingerprint", hashed)
    assert route_member_event(member, table, None, live, INTERPRETS) == Route()
    with pytest.raises(AssertionError, match="fingerprinted"):
        route_member_event(member, table, live, _edited(live), INTERPRETS)


def test_a_deleted_object_is_synced_again_and_a_config_map_needs_no_refresh() -> None:
    member, table, live = _setup(config_map("settings", "shop", a="1"))
    route = route_member_event(member, table, live, None, INTERPRETS)
    assert route.sync == APP
    assert route.refresh is None


@pytest.mark.parametrize(
    "objects", [(), (config_map("other", "shop", a="1"),)], ids=["removal", "pruned"]
)
def test_a_deleted_object_the_work_no_longer_wants_is_not_synced_again(
    objects: tuple[dict[str, Any], ...],
) -> None:
    """The watch brings back every delete of a sync's own (a removal, a prune): only an
    object the work still puts there is restored."""
    member, table, live = _setup(config_map("settings", "shop", a="1"))
    table.set_work(
        APP,
        {"m1": ClusterWork(APP, "m1", objects, "r2", frozenset(), SyncPolicy())},
        now=0,
        recheck_after_s=60,
    )
    assert route_member_event(member, table, live, None, INTERPRETS).sync is None


def test_a_deleted_object_without_a_namespace_in_the_work_is_synced_again() -> None:
    """Objects without a namespace go into the application's."""
    member, table, live = _setup(config_map("settings", "", a="1"))
    work = table.get(APP, "m1")
    assert work is not None
    del work.objects[0]["metadata"]["namespace"]
    live["metadata"]["namespace"] = "shop"
    assert route_member_event(member, table, live, None, INTERPRETS).sync == APP


def test_objects_of_applications_without_work_here_are_ignored() -> None:
    member, table, live = _setup(config_map("settings", "shop", a="1"))
    other = Owner("shop", "other", "").stamp(config_map("x", "shop", a="1"), "r1", "m1")
    assert route_member_event(member, table, other, None, INTERPRETS).sync is None
    table.forget(APP)
    assert route_member_event(member, table, live, None, INTERPRETS).sync is None


def test_our_own_apply_of_a_new_revision_is_not_drift() -> None:
    member, table, live = _setup(config_map("settings", "shop", a="1"))
    newer = Owner("shop", "web", "").stamp(config_map("settings", "shop", a="2"), "r2", "m1")
    assert route_member_event(member, table, live, newer, INTERPRETS).sync is None


def _member_cluster(name: str, pods: str = "10", ready: str = "True") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"env": "prod"}},
        "spec": {"layer": "default"},
        "status": {
            "conditions": [{"type": "Ready", "status": ready}],
            "nodes": {"total": 1, "ready": 1},
            "resources": {"allocatable": {"pods": "110"}, "available": {"pods": pods}},
        },
    }


def test_a_change_of_capacity_alone_replans_only_what_capacity_can_move() -> None:
    store = SnapshotStore()
    fleets = {"blue": ["a", "b"], "green": ["c"], "red": ["d"]}
    members = {n: _member_cluster(n) for n in "abcd"}
    before = store.publish([cluster_info(m) for m in members.values()], fleets)
    members["a"] = _member_cluster("a", pods="9")  # a pod started on a
    members["c"] = _member_cluster("c", pods="8")  # and on c, which also went not ready
    members["c"]["status"]["conditions"][0]["status"] = "False"
    after = store.publish([cluster_info(m) for m in members.values()], fleets)
    change = fleet_change(before, after)
    assert (change.replan, change.capacity) == (frozenset({"green"}), frozenset({"blue"}))
    # A member joining a fleet (a, to red) or a member relabeled (b, in blue): all again.
    members["b"]["metadata"]["labels"] = {"env": "dev"}
    joined = store.publish(
        [cluster_info(m) for m in members.values()], {**fleets, "red": ["d", "a"]}
    )
    change = fleet_change(after, joined)
    assert (change.replan, change.capacity) == (frozenset({"blue", "red"}), frozenset())


def test_a_change_of_capacity_alone_plans_again_the_applications_it_can_move() -> None:
    apps = [
        {"metadata": {"namespace": "shop", "name": name}, "spec": {"fleet": fleet}}
        for name, fleet in (("web", "blue"), ("settings", "blue"), ("db", "green"), ("x", "red"))
    ]
    change = FleetChange(replan=frozenset({"green"}), capacity=frozenset({"blue"}))
    asked: list[str] = []

    def bound(key: str) -> bool:
        asked.append(key)
        return key == "shop/web"

    assert to_plan_again(change, apps, bound) == ["shop/web", "shop/db"]
    assert asked == ["shop/web", "shop/settings"]  # only where capacity alone changed
