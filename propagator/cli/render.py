"""``--render CLUSTER`` of ``propagator schedule`` and ``kubectl propagator explain``: the
objects the application's spec renders to for one member cluster, as the controller renders
them (its charts fetched from the allowed sources and rendered by helm with that cluster's
version and APIs, its templates and overrides, its replicas there), printed as YAML."""

from __future__ import annotations

import argparse
import copy
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from api.application import ApplicationPropagation
from fleet.snapshot import cluster_info
from kube.connection import KubeConnection
from propagator.charts.archive import ArchiveError
from propagator.charts.fetch import FetchError
from propagator.charts.releases import ChartError, ChartReleases
from propagator.charts.store import ChartStore
from propagator.interpreter.registry import Interpreters
from propagator.propagation.rendering import api_versions
from propagator.propagation.resolve import resolve
from propagator.render.helm import ChartRenderer
from propagator.render.manifests import ApplicationRef, RenderError
from propagator.render.worker import RenderTarget, render_bounded
from propagator.scheduler import Decision
from propagator.settings import Settings
from propagator.tenancy.policy import Forbidden, policy_for
from propagator.work.release import scale_fields


def add_render_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--render",
        metavar="CLUSTER",
        help="print, as YAML, the objects the spec renders to for the member CLUSTER (its "
        "charts fetched and rendered by helm, its templates and overrides, its replicas "
        "there) instead of the decision; a canary's or a rollout's hold on older revisions "
        "is not shown",
    )


class NeedsHub(ValueError):
    """What the render reads exists only on the live hub."""


class UnknownCluster(ValueError):
    """``--render`` names no MemberCluster."""


RENDER_FAILURES = (
    NeedsHub,
    UnknownCluster,
    ChartError,
    FetchError,
    ArchiveError,
    RenderError,
    Forbidden,
)
"""What ends a ``--render`` with its message (exit code 1)."""


class _NoHub:
    """Stands for the hub when the fleet comes from a file: says what needed it."""

    async def get(self, api_version: str, kind: str, name: str, namespace: str) -> Any:
        raise NeedsHub(f"reading {kind} {namespace}/{name} needs the live hub (no --fleet-file)")

    async def list(self, api_version: str, kind: str, *args: Any, **kwargs: Any) -> Any:
        raise NeedsHub(f"selecting {kind} objects needs the live hub (no --fleet-file)")

    async def resource(self, api_version: str, kind: str) -> Any:
        raise NeedsHub(f"selecting {kind} objects needs the live hub (no --fleet-file)")


async def render_one(
    app: ApplicationPropagation,
    objects: list[dict[str, Any]],
    decision: Decision,
    cluster: str,
    settings: Settings,
    hub: KubeConnection | None,
    interpreters: Interpreters,
) -> list[dict[str, Any]]:
    """The objects ``app`` renders to on ``cluster`` (a MemberCluster among ``objects``);
    raises one of RENDER_FAILURES."""
    members = {o["metadata"]["name"]: o for o in objects if o.get("kind") == "MemberCluster"}
    if cluster not in members:
        known = ", ".join(sorted(members)[:20]) or "none"
        raise UnknownCluster(f"no MemberCluster of that name (there are: {known})")
    info = cluster_info(members[cluster])
    name, namespace = app.metadata["name"], app.metadata.get("namespace", "default")
    source: Any = hub if hub is not None else _NoHub()
    resolved = await resolve(app, source, policy_for(namespace, None, settings.platform()))
    charts = ChartReleases(
        ChartStore(settings.chart_fetcher(), resolve_every_s=settings.chart_resolve_interval_s)
    )
    try:
        releases, _ = await charts.releases(app.spec.resources.charts, name, namespace, source)
        resolved += releases
        materialized = await charts.materialize(resolved, namespace, source)
    finally:
        await charts.store.fetcher.aclose()
    shared = app.spec.placement.replicas.mode != "Duplicated"
    fields = scale_fields(resolved, interpreters, info.api_enablements) if shared else ()
    placed = {p.cluster: p.replicas for p in decision.placed}
    target = RenderTarget(
        info.name,
        dict(info.labels),
        info.layer,
        info.region,
        info.zone,
        info.provider,
        placed.get(cluster) if shared else None,
        fields,
        info.kubernetes_version,
        api_versions(info.api_enablements),
    )
    rendered = await render_bounded(
        materialized,
        app.spec.overrides,
        [target],
        ApplicationRef(name, namespace),
        timeout_s=settings.render_timeout_s,
        max_bytes=settings.render_max_bytes,
        renderer=ChartRenderer(settings.chart_renderer, settings.render_max_bytes),
    )
    return rendered[cluster]


def as_yaml(objects: Sequence[Mapping[str, Any]]) -> str:
    """The objects as YAML documents, as ``kubectl get -o yaml`` would list them."""
    return yaml.safe_dump_all(
        [copy.deepcopy(dict(o)) for o in objects], sort_keys=False, explicit_start=True
    )
