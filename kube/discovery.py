"""What an API server serves, cached in memory per connection and refreshed on a miss.

Uses aggregated discovery (``apidiscovery.k8s.io/v2``): two requests describe every group,
version and kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kube.connection import KubeConnection

_AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


@dataclass(frozen=True)
class ResourceInfo:
    """How one kind is served."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        """The REST path of the collection, or of one object when ``name`` is given."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


class UnknownKind(LookupError):
    """The server does not serve this apiVersion/kind."""


class Discovery:
    """The kinds one server serves; refreshed when a lookup misses."""

    def __init__(self, connection: KubeConnection) -> None:
        self._connection = connection
        self._kinds: dict[tuple[str, str], ResourceInfo] | None = None
        self._roots: dict[str, tuple[str | None, dict[tuple[str, str], ResourceInfo]]] = {}
        """Per root (/api, /apis): its ETag and the kinds read from it."""

    async def _fetch(self) -> dict[tuple[str, str], ResourceInfo]:
        kinds: dict[tuple[str, str], ResourceInfo] = {}
        for root in ("/api", "/apis"):
            etag, known = self._roots.get(root, (None, {}))
            # Unchanged since the last read (If-None-Match): a 304 without a body, where
            # /apis is ~50 KB of JSON to parse (every member, every 30 probes).
            listing, etag = await self._connection.get_if_changed(root, _AGGREGATED, etag)
            if listing is not None:
                known = _kinds_of(listing)
                self._roots[root] = (etag, known)
            kinds.update(known)
        return kinds

    async def refresh(self) -> dict[tuple[str, str], ResourceInfo]:
        """Fetch the server's kinds again."""
        self._kinds = await self._fetch()
        return self._kinds

    async def kinds(self) -> dict[tuple[str, str], ResourceInfo]:
        """Every served (apiVersion, kind), fetched on first use."""
        return self._kinds if self._kinds is not None else await self.refresh()

    def known(self, api_version: str, kind: str) -> ResourceInfo | None:
        """``kind`` as last fetched, without a request (None if not fetched or not served)."""
        return (self._kinds or {}).get((api_version, kind))

    async def resource(self, api_version: str, kind: str) -> ResourceInfo:
        """Look ``kind`` up; a miss refreshes once (a CRD may just have been installed)."""
        key = (api_version, kind)
        info = (await self.kinds()).get(key) or (await self.refresh()).get(key)
        if info is None:
            raise UnknownKind(f"{self._connection.name} does not serve {kind} in {api_version}")
        return info

    async def enablements(self) -> list[dict[str, Any]]:
        """Group/versions with their kinds, sorted (for MemberCluster.status.apiEnablements)."""
        by_gv: dict[str, set[str]] = {}
        for gv, kind in await self.kinds():
            by_gv.setdefault(gv, set()).add(kind)
        return [{"groupVersion": gv, "kinds": sorted(k)} for gv, k in sorted(by_gv.items())]


def _kinds_of(listing: dict[str, Any]) -> dict[tuple[str, str], ResourceInfo]:
    """The kinds an aggregated discovery document (apidiscovery.k8s.io/v2) lists."""
    kinds: dict[tuple[str, str], ResourceInfo] = {}
    for group in listing.get("items") or []:
        group_name = (group.get("metadata") or {}).get("name", "")
        for version in group.get("versions") or []:
            for res in version.get("resources") or []:
                kind = (res.get("responseKind") or {}).get("kind")
                if not kind:
                    continue
                info = ResourceInfo(
                    group_name,
                    version["version"],
                    kind,
                    res["resource"],
                    res.get("scope") == "Namespaced",
                )
                kinds[(info.api_version, kind)] = info
    return kinds
