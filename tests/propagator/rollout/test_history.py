"""The revisions kept on the hub: what a revision keeps (Secrets by name only), how it is
rendered again, numbering, the history limit and what is never deleted."""

from __future__ import annotations

from typing import Any, cast

import anyio
import pytest

from kube.connection import KubeConnection
from propagator.rollout.history import (
    MAX_SOURCE_BYTES,
    Revisions,
    RevisionTooLarge,
    digest_of,
    restored,
    source_of,
)
from tests.e2e.manifests import config_map
from tests.propagator.propagation.test_reconcile import FakeHub

APP = {
    "apiVersion": "propagator.io/v1alpha1",
    "kind": "ApplicationPropagation",
    "metadata": {"name": "web", "namespace": "shop", "uid": "u-1"},
}
SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "db", "namespace": "shop"},
    "data": {"password": "aHVudGVyMg=="},
}


def test_a_revision_keeps_secrets_by_name_only_and_renders_them_as_they_are_now() -> None:
    source = source_of([config_map("web", "shop", v="1"), SECRET], [])
    assert "aHVudGVyMg==" not in str(source)
    rotated = {**SECRET, "data": {"password": "bmV3"}}
    objects = restored(source, [rotated])
    assert objects[1] == rotated
    assert restored(source, []) == [config_map("web", "shop", v="1")]  # a Secret gone: left out


def test_the_digest_ignores_key_order() -> None:
    a = source_of([{"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "x"}}], [])
    b = source_of([{"apiVersion": "v1", "metadata": {"name": "x"}, "kind": "ConfigMap"}], [])
    assert digest_of(a) == digest_of(b)


def _revisions() -> tuple[Revisions, FakeHub]:
    hub = FakeHub(dict(APP))
    return Revisions(cast(KubeConnection, hub)), hub


def _keep(revisions: Revisions, number: int, value: str, limit: int, protected: set[int]) -> None:
    source = source_of([config_map("web", "shop", v=value)], [])
    anyio.run(lambda: revisions.keep(APP, number, source, limit, protected))


def test_the_oldest_beyond_the_limit_go_but_never_one_a_cluster_runs() -> None:
    revisions, hub = _revisions()
    for n in range(1, 6):
        _keep(revisions, n, str(n), 3, {n, 1})
    assert sorted(r["revision"] for r in hub.revisions.values()) == [1, 4, 5]
    # Read back from the hub by a controller that starts now.
    fresh = Revisions(cast(KubeConnection, hub))
    listed = anyio.run(lambda: fresh.listed("shop", "web"))
    assert sorted(listed) == [1, 4, 5]
    source = anyio.run(lambda: fresh.source("shop", "web", 4))
    assert source is not None
    assert source["objects"][0]["data"] == {"v": "4"}
    assert anyio.run(lambda: fresh.source("shop", "web", 2)) is None


def test_a_source_too_large_for_the_hub_is_refused_and_nothing_written() -> None:
    revisions, hub = _revisions()
    huge = source_of([config_map("web", "shop", v="x" * (MAX_SOURCE_BYTES + 1))], [])
    with pytest.raises(RevisionTooLarge, match="not kept"):
        anyio.run(lambda: revisions.keep(APP, 1, huge, 10, set()))
    assert hub.revisions == {}


def test_keeping_the_same_revision_again_writes_nothing() -> None:
    revisions, hub = _revisions()
    _keep(revisions, 1, "1", 10, {1})
    writes: list[Any] = []
    original = hub.apply

    async def counting(obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
        writes.append(obj)
        return await original(obj, **kw)

    hub.apply = counting  # type: ignore[method-assign]
    _keep(revisions, 1, "1", 10, {1})
    assert writes == []


@pytest.mark.parametrize(
    "data",
    [
        None,
        "objects",
        {"objects": "x"},
        {"objects": [1]},
        {"objects": [{"kind": "ConfigMap", "metadata": {"name": "x"}}]},
        {"objects": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": 7}}]},
        {"objects": [], "overrides": "all"},
        {"objects": [], "overrides": [3]},
        {"objects": [], "overrides": [{"clusterSelector": "everyone"}]},
    ],
)
def test_a_forged_revision_on_the_hub_reads_as_not_kept(data: Any) -> None:
    revisions, hub = _revisions()
    hub.revisions["web-rollout-forged"] = {
        "metadata": {
            "name": "web-rollout-forged",
            "labels": {"propagator.io/application": "web", "propagator.io/rollout-revision": "f"},
        },
        "revision": 3,
        "data": data,
    }
    assert anyio.run(lambda: revisions.source("shop", "web", 3)) is None
