"""The canary's stable revisions on the hub: one not shaped as a kept source (anyone who
may edit the namespace may write a ControllerRevision there) reads as not kept."""

from __future__ import annotations

from typing import Any, cast

import anyio
import pytest

from kube.connection import KubeConnection
from propagator.canary.revisions import StableRevisions
from tests.e2e.manifests import deployment
from tests.propagator.propagation.test_reconcile import FakeHub


def _hub(data: Any) -> FakeHub:
    hub = FakeHub({"metadata": {"name": "web", "namespace": "shop"}})
    hub.revisions["web-abc"] = {
        "metadata": {
            "name": "web-abc",
            "labels": {"propagator.io/application": "web", "propagator.io/release": "abc"},
        },
        "revision": 1,
        "data": data,
    }
    return hub


def _get(hub: FakeHub) -> Any:
    revisions = StableRevisions(cast(KubeConnection, hub))
    return anyio.run(lambda: revisions.get("shop", "web", "abc"))


def test_a_kept_stable_revision_is_read_back() -> None:
    source = {"workloads": [deployment("web", "shop", "nginx:1.27")], "overrides": []}
    assert _get(_hub(source)) == source


@pytest.mark.parametrize(
    "data",
    [
        "workloads",
        {"workloads": {"web": 1}},
        {"workloads": [{"kind": "Deployment"}]},
        {"workloads": [], "overrides": [{"clusterSelector": "everyone"}]},
    ],
)
def test_a_forged_stable_revision_reads_as_not_kept(data: Any) -> None:
    assert _get(_hub(data)) is None
