"""Discovery: the kinds a member serves, read again only when its documents changed."""

from __future__ import annotations

from typing import Any, cast

import anyio

from kube.connection import KubeConnection
from kube.discovery import Discovery


def _document(*kinds: tuple[str, str, str]) -> dict[str, Any]:
    """An aggregated discovery document listing (group, kind, plural) at version v1."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for group, kind, plural in kinds:
        groups.setdefault(group, []).append(
            {"resource": plural, "responseKind": {"kind": kind}, "scope": "Namespaced"}
        )
    return {
        "items": [
            {"metadata": {"name": g}, "versions": [{"version": "v1", "resources": r}]}
            for g, r in groups.items()
        ]
    }


class _Server:
    """Answers /api and /apis as an API server with ETags does; records what was asked."""

    def __init__(self) -> None:
        self.documents = {"/api": _document(("", "ConfigMap", "configmaps"))}
        self.documents["/apis"] = _document(("apps", "Deployment", "deployments"))
        self.versions = {"/api": 1, "/apis": 1}
        self.asked: list[tuple[str, str | None]] = []
        self.name = "m"

    async def get_if_changed(
        self, path: str, accept: str, etag: str | None
    ) -> tuple[dict[str, Any] | None, str | None]:
        self.asked.append((path, etag))
        current = f'"{self.versions[path]}"'
        return (None, etag) if etag == current else (self.documents[path], current)


def test_discovery_reads_a_document_again_only_when_its_etag_changed() -> None:
    server = _Server()
    discovery = Discovery(cast(KubeConnection, server))

    async def run() -> None:
        kinds = await discovery.refresh()
        assert set(kinds) == {("v1", "ConfigMap"), ("apps/v1", "Deployment")}
        assert server.asked == [("/api", None), ("/apis", None)]
        # Unchanged: both answered 304, the kinds are those read before.
        assert await discovery.refresh() == kinds
        assert server.asked[2:] == [("/api", '"1"'), ("/apis", '"1"')]
        # A CRD installed: /apis changed, /api did not.
        server.documents["/apis"] = _document(
            ("apps", "Deployment", "deployments"), ("example.io", "Widget", "widgets")
        )
        server.versions["/apis"] = 2
        info = await discovery.resource("example.io/v1", "Widget")  # a miss refreshes
        assert info.path("ns", "w") == "/apis/example.io/v1/namespaces/ns/widgets/w"
        assert ("v1", "ConfigMap") in await discovery.kinds()
        assert await discovery.refresh() == await discovery.kinds()
        assert server.asked[-2:] == [("/api", '"1"'), ("/apis", '"2"')]

    anyio.run(run)
