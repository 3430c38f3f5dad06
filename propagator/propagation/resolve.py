"""What an application propagates: its inline manifests (``spec.resources.manifests``),
then the hub objects its selectors pick in the application's namespace, with
server-populated fields stripped (its charts follow: :mod:`propagator.charts.releases`)."""

from __future__ import annotations

import copy
from typing import Any

from api.application import ApplicationPropagation
from api.charts import CHART_RELEASE_KIND, is_chart_release
from api.common import API_VERSION
from api.selectors import to_query
from kube.connection import KubeConnection
from propagator.tenancy.policy import Forbidden, Refusal, TenantPolicy
from propagator.work.objects import strip_server_fields


async def resolve(
    app: ApplicationPropagation, hub: KubeConnection, policy: TenantPolicy
) -> list[dict[str, Any]]:
    """Inline manifests, then the hub objects its selectors pick (sorted by name). Selectors
    read the application's own namespace; a cluster-scoped hub kind only for a platform
    namespace (else :class:`Forbidden`)."""
    namespace = app.metadata.get("namespace", "default")
    objects = [copy.deepcopy(m) for m in app.spec.resources.manifests]
    for index, manifest in enumerate(objects):
        if is_chart_release(manifest):
            _not_a_chart(policy, f"spec.resources.manifests[{index}]")
    for index, selector in enumerate(app.spec.resources.selectors):
        info = await hub.resource(selector.api_version, selector.kind)
        if not info.namespaced and not policy.platform:
            where = f"spec.resources.selectors[{index}]"
            rule = (
                f"selectors read only namespaced objects of the application's namespace; "
                f"{selector.api_version} {selector.kind} is cluster-scoped on the hub"
            )
            raise Forbidden(policy, [Refusal(where, rule)])
        if selector.name:
            found = [await hub.get(selector.api_version, selector.kind, selector.name, namespace)]
        else:
            assert selector.label_selector is not None
            listing = await hub.list(
                selector.api_version,
                selector.kind,
                namespace,
                labelSelector=to_query(selector.label_selector),
            )
            found = listing["items"]
            for item in found:  # list items carry no apiVersion/kind
                item.setdefault("apiVersion", selector.api_version)
                item.setdefault("kind", selector.kind)
        if any(is_chart_release(o) for o in found):
            _not_a_chart(policy, f"spec.resources.selectors[{index}]")
        objects += sorted(
            (strip_server_fields(o) for o in found), key=lambda o: o["metadata"]["name"]
        )
    return objects


def _not_a_chart(policy: TenantPolicy, where: str) -> None:
    """A chart release written by hand would render an archive nobody fetched or checked."""
    rule = (
        f"{API_VERSION} {CHART_RELEASE_KIND} stands for a chart the controller fetched; "
        "name charts in spec.resources.charts"
    )
    raise Forbidden(policy, [Refusal(where, rule)])
