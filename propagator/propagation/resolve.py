"""What an application propagates: its inline manifests (``spec.resources.manifests``),
then the hub objects its selectors pick in the application's namespace, with
server-populated fields stripped."""

from __future__ import annotations

import copy
from typing import Any

from api.application import ApplicationPropagation
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
        objects += sorted(
            (strip_server_fields(o) for o in found), key=lambda o: o["metadata"]["name"]
        )
    return objects
