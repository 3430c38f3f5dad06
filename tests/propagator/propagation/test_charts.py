"""What the status says of an application's charts."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

from api.charts import ChartSource
from propagator.charts.releases import ChartResolution
from propagator.charts.store import Resolved
from propagator.propagation.charts import chart_status, charts_by_cluster, charts_condition

SOURCE = ChartSource(repository="oci://r.example.com/charts", name="shop")
RESOLVED = Resolved("1.4.2", "sha256:" + "a" * 64, "sha256:" + "b" * 64, "2.0", 0.0)


def release(version: str) -> dict[str, Any]:
    return {
        "apiVersion": "propagator.io/v1alpha1",
        "kind": "ChartRelease",
        "metadata": {"name": "web"},
        "chart": {"name": "shop", "version": version},
    }


def test_the_condition_names_each_chart_its_hooks_and_a_stale_resolution() -> None:
    hooked = dataclasses.replace(RESOLVED, hooks=("shop/templates/job.yaml",))
    kind, status, reason, message = charts_condition([ChartResolution("web", SOURCE, hooked, None)])
    assert (kind, status, reason) == ("ChartsResolved", True, "Resolved")
    assert message == (
        "web: shop 1.4.2 (sha256:aaaaaaaaaaaa…); its hooks are not run, left out: "
        "shop/templates/job.yaml"
    )
    stale = ChartResolution(
        "web", SOURCE, RESOLVED, "chart shop: ConnectError; going on with 1.4.2"
    )
    assert charts_condition([stale])[2:] == (
        "LastResolved",
        "chart shop: ConnectError; going on with 1.4.2",
    )


def test_a_status_line_per_chart() -> None:
    line = chart_status(ChartResolution("web", SOURCE, RESOLVED, None))
    assert line == {
        "release": "web",
        "chart": "shop",
        "repository": "oci://r.example.com/charts",
        "version": "1.4.2",
        "digest": RESOLVED.digest,
        "resolvedAt": "1970-01-01T00:00:00Z",
        "appVersion": "2.0",
    }


def test_each_cluster_shows_the_chart_version_of_the_revision_it_runs() -> None:
    rollout = SimpleNamespace(
        target_revision=SimpleNamespace(number=2, objects=[release("1.5.0")]),
        others=(SimpleNamespace(number=1, objects=[release("1.4.2")]),),
        assignment={"member-2": 1},
    )
    shown = charts_by_cluster(rollout, ["member-1", "member-2"])  # type: ignore[arg-type]
    assert shown == {"member-1": ("web: shop 1.5.0",), "member-2": ("web: shop 1.4.2",)}
    plain = SimpleNamespace(
        target_revision=SimpleNamespace(number=1, objects=[]), others=(), assignment={}
    )
    assert charts_by_cluster(plain, ["member-1"]) == {}  # type: ignore[arg-type]
    assert charts_by_cluster(None, ["member-1"]) == {}
