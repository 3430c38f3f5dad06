from __future__ import annotations

from decimal import Decimal

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.snapshot import (
    ClusterInfo,
    ClusterInfoCache,
    FleetSnapshot,
    build_snapshot,
    capacity_only,
    cluster_info,
)
from fleet.snapshotstore import SnapshotStore


def mc(name: str, layer: str, labels: dict[str, str], ready: bool = True) -> dict[str, object]:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"layer": layer, "region": "eu", "taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "apiEnablements": [{"groupVersion": "apps/v1", "kinds": ["Deployment"]}],
            "resources": {"available": {"cpu": "1500m", "memory": "1Gi", "pods": 3}},
        },
    }


def test_a_change_of_capacity_alone_is_told_from_any_other() -> None:
    before = cluster_info(mc("a", "edge", {"env": "prod"}))
    fuller = mc("a", "edge", {"env": "prod"})
    fuller["status"]["resources"] = {"available": {"cpu": "1", "memory": "1Gi", "pods": 2}}  # type: ignore[index]
    assert capacity_only(before, cluster_info(fuller))
    relabeled = cluster_info({**fuller, "metadata": {"name": "a", "labels": {"env": "dev"}}})
    assert not capacity_only(before, relabeled)
    assert not capacity_only(before, cluster_info(mc("a", "edge", {"env": "prod"}, ready=False)))
    assert not capacity_only(None, before)


def test_cluster_info_reads_a_member_cluster() -> None:
    info = cluster_info(mc("a", "edge", {"env": "prod"}))
    assert info.ready
    assert (info.layer, info.region) == ("edge", "eu")
    assert info.available == {"cpu": Decimal("1.5"), "memory": Decimal(1024**3), "pods": 3}
    assert ("apps/v1", "Deployment") in info.api_enablements
    assert info.taints[0].key == "k"


def test_indexes_by_layer_and_label() -> None:
    infos = [
        cluster_info(mc("a", "edge", {"env": "prod", "gpu": "yes"})),
        cluster_info(mc("b", "core", {"env": "prod"})),
        cluster_info(mc("c", "core", {"env": "dev"})),
    ]
    snap = build_snapshot(infos, {"f": ["a", "c", "gone"]}, generation=7)
    assert snap.in_layer("core") == {"b", "c"}
    assert snap.in_layer("nope") == frozenset()
    assert snap.with_label("env", "prod") == {"a", "b"}
    assert snap.with_label("gpu") == {"a"}
    assert snap.fleet("f") == {"a", "c"}
    assert snap.generation == 7


def _indexes(snap: FleetSnapshot) -> tuple[object, ...]:
    return (
        dict(snap.by_layer),
        {k: dict(v) for k, v in snap.by_label.items()},
        dict(snap.fleets),
    )


_member = st.tuples(
    st.sampled_from(["edge", "core", "gpu"]),
    st.dictionaries(st.sampled_from(["env", "tier", "zone"]), st.sampled_from("abc")),
)
_names = st.sampled_from([f"m{i}" for i in range(16)])


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(_names, _member),
    st.lists(st.dictionaries(_names, st.none() | _member, max_size=4), min_size=1, max_size=6),
)
def test_indexes_patched_from_the_previous_generation_are_the_indexes_from_scratch(
    first: dict[str, tuple[str, dict[str, str]]],
    edits: list[dict[str, tuple[str, dict[str, str]] | None]],
) -> None:
    """Generation after generation, a few members changing, coming and going (None: gone;
    unchanged ones keep their ClusterInfo, as the info cache gives it): the next
    snapshot's indexes, patched from the previous ones, are the ones built from scratch."""
    infos: dict[str, ClusterInfo] = {}

    def generation(members: dict[str, tuple[str, dict[str, str]]]) -> list[ClusterInfo]:
        for name, (layer, labels) in members.items():
            info = infos.get(name)
            if info is None or (info.layer, dict(info.labels)) != (layer, labels):
                infos[name] = cluster_info(mc(name, layer, labels))
        return [infos[n] for n in members]

    members = dict(first)
    snap = build_snapshot(generation(members), {"f": list(members)}, generation=1)
    for number, edit in enumerate(edits, start=2):
        for name, value in edit.items():
            if value is None:
                members.pop(name, None)
            else:
                members[name] = value
        clusters = generation(members)
        patched = build_snapshot(clusters, {"f": list(members)}, number, previous=snap)
        assert _indexes(patched) == _indexes(build_snapshot(clusters, {"f": list(members)}, 1))
        snap = patched


def test_one_changed_member_is_moved_in_the_indexes_of_the_next_generation() -> None:
    def versioned(name: str, layer: str, env: str, version: str) -> dict[str, object]:
        member = mc(name, layer, {"env": env})
        return {
            **member,
            "metadata": {"name": name, "labels": {"env": env}, "resourceVersion": version},
        }

    members = [versioned(f"m{i}", "core", "prod", "1") for i in range(20)]
    cache = ClusterInfoCache()
    first = build_snapshot(cache.infos(members), {"f": [f"m{i}" for i in range(20)]}, 1)
    members[3] = versioned("m3", "edge", "dev", "2")
    infos = cache.infos(members[:19])
    assert sum(info is not first.clusters[info.name] for info in infos) == 1  # m3 alone
    second = build_snapshot(infos, {"f": ["m3", "m19"]}, 2, previous=first)
    assert second.in_layer("edge") == {"m3"}
    assert second.in_layer("core") == {f"m{i}" for i in range(19)} - {"m3"}
    assert second.with_label("env", "dev") == {"m3"}
    assert "m19" not in second.with_label("env", "prod")  # gone
    assert second.fleet("f") == {"m3"}
    assert first.in_layer("core") == {f"m{i}" for i in range(20)}  # the old one unchanged


def test_snapshot_cannot_be_changed() -> None:
    snap = build_snapshot([cluster_info(mc("a", "edge", {}))], {}, generation=1)
    with pytest.raises(TypeError):
        snap.clusters["b"] = snap.clusters["a"]  # type: ignore[index]
    with pytest.raises(TypeError):
        snap.clusters["a"].labels["x"] = "y"  # type: ignore[index]


async def _append_newer(store: SnapshotStore, seen: list[int]) -> None:
    seen.append((await store.newer_than(0)).generation)


def test_store_publishes_whole_generations() -> None:
    store = SnapshotStore()
    assert store.current().generation == 0
    seen: list[int] = []

    async def wait_and_publish() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: _append_newer(store, seen))
            await anyio.sleep(0.01)
            store.publish([cluster_info(mc("a", "edge", {}))], {})

    anyio.run(wait_and_publish)
    assert seen == [1]
    assert store.publish([], {}).generation == 2
    assert store.current().clusters == {}


def test_info_cache_reparses_only_changed_members() -> None:
    cache = ClusterInfoCache()
    a, b = mc("a", "edge", {}), mc("b", "edge", {})
    a["metadata"]["resourceVersion"] = "1"  # type: ignore[index]
    b["metadata"]["resourceVersion"] = "1"  # type: ignore[index]
    first = {i.name: i for i in cache.infos([a, b])}
    b["metadata"]["resourceVersion"] = "2"  # type: ignore[index]
    b["spec"]["layer"] = "core"  # type: ignore[index]
    second = {i.name: i for i in cache.infos([a, b])}
    assert second["a"] is first["a"]
    assert second["b"].layer == "core"
    assert [i.name for i in cache.infos([b])] == ["b"]


def test_store_age_is_time_since_built_or_confirmed() -> None:
    store = SnapshotStore()
    built = store.publish([], {})
    assert store.age_s(built.built_at + 5) == 5
    store.confirm(built.built_at + 4)
    assert store.age_s(built.built_at + 5) == 1


def test_a_taint_written_before_validation_still_keeps_applications_off() -> None:
    from fleet.snapshot import cluster_info

    member = {
        "metadata": {"name": "old"},
        "spec": {
            "taints": [
                {"key": "team", "value": "a b", "effect": "NoSchedule"},
                {"key": "legacy", "effect": "NoAdmit"},
            ]
        },
    }
    taints = cluster_info(member).taints
    assert [(t.key, t.value, t.effect) for t in taints] == [
        ("team", "a b", "NoSchedule"),
        ("legacy", "", "NoSchedule"),
    ]
