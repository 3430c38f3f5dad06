from __future__ import annotations

from decimal import Decimal

import anyio
import pytest

from fleet.snapshot import ClusterInfoCache, SnapshotStore, build_snapshot, cluster_info


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


def test_cluster_info_reads_a_member_cluster() -> None:
    info = cluster_info(mc("a", "edge", {"env": "prod"}))
    assert info.ready
    assert (info.layer, info.region) == ("edge", "eu")
    assert info.available == {"cpu": Decimal("1.5"), "memory": Decimal(1024**3), "pods": 3}
    assert ("apps/v1", "Deployment") in info.api_enablements
    assert info.taints[0].key == "k"
    assert info.field_value("region") == "eu"


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
