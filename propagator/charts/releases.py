"""An application's charts among its objects: each ``spec.resources.charts`` entry, resolved
to a version and digest, becomes one chart release object (kept in the application's
revisions like any object: a new chart version, or new values, is a new revision); just
before rendering, each release gets its archive and values files (never kept)."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import ValidationError

from api.charts import CHART_RELEASE_KIND, ChartSource, ValuesSource, is_chart_release
from api.common import API_VERSION
from kube.connection import KubeConnection
from kube.errors import ApiError
from propagator.charts.allowed import SourceNotAllowed
from propagator.charts.archive import ArchiveError
from propagator.charts.fetch import Credentials, FetchError
from propagator.charts.store import ANYONE, ChartStore, Resolved, Who

MAX_VALUES_BYTES = 1 << 20
"""Bytes of values files one chart may read from ConfigMaps and Secrets."""


class ChartError(Exception):
    """A chart that cannot be used now: ``reason`` for the condition, ``retry`` whether
    trying again may help (the registry did not answer)."""

    def __init__(self, reason: str, message: str, *, retry: bool = False) -> None:
        super().__init__(message)
        self.reason = reason
        self.retry = retry


@dataclass(frozen=True)
class ChartResolution:
    """What the status says of one chart."""

    release: str
    source: ChartSource
    resolved: Resolved
    stale: str | None


class ChartReleases:
    """Turns charts into chart release objects and materializes them for rendering."""

    def __init__(self, store: ChartStore) -> None:
        self.store = store

    async def releases(
        self, charts: Sequence[ChartSource], application: str, namespace: str, hub: KubeConnection
    ) -> tuple[list[dict[str, Any]], list[ChartResolution]]:
        """A chart release object per chart, and how each resolved; raises ChartError
        (or ApiError when the hub did not answer)."""
        objects, resolutions = [], []
        for index, source in enumerate(charts):
            where = f"spec.resources.charts[{index}] ({source.name})"
            creds, who = await _credentials(source, namespace, hub, where)
            try:
                found = await self.store.resolve(source, creds, who)
            except Exception as exc:
                raise _chart_error(where, exc) from exc
            files = await _values_files(source.values_from, namespace, hub, where)
            release = source.release(application)
            objects.append(_release_object(source, release, namespace, found.resolved, files))
            resolutions.append(ChartResolution(release, source, found.resolved, found.stale))
        return objects, resolutions

    async def materialize(
        self, objects: Sequence[Mapping[str, Any]], namespace: str, hub: KubeConnection
    ) -> list[Mapping[str, Any]]:
        """``objects`` with each chart release given its archive and values files (read
        now); raises ChartError (or ApiError)."""
        if not any(is_chart_release(o) for o in objects):
            return list(objects)
        out: list[Mapping[str, Any]] = []
        for obj in objects:
            if not is_chart_release(obj):
                out.append(obj)
                continue
            where = f"chart release {(obj.get('metadata') or {}).get('name', '?')}"
            source, resolved = _source_of(obj, where)
            creds, who = await _credentials(source, namespace, hub, where)
            try:
                archive = await self.store.archive(source, resolved, creds, who)
            except Exception as exc:
                raise _chart_error(where, exc) from exc
            files = await _values_files(source.values_from, namespace, hub, where)
            materialized = {k: v for k, v in obj.items() if k not in ("archive", "valuesFiles")}
            materialized["archive"] = base64.b64encode(archive).decode()
            materialized["valuesFiles"] = files
            out.append(materialized)
        return out


def _chart_error(where: str, exc: Exception) -> Exception:
    if isinstance(exc, SourceNotAllowed):
        return ChartError("ChartNotAllowed", f"{where}: {exc}")
    if isinstance(exc, FetchError):
        reason = "ChartUnavailable" if exc.retry else "ChartRefused"
        return ChartError(reason, f"{where}: {exc}", retry=exc.retry)
    if isinstance(exc, ArchiveError):
        return ChartError("ChartRefused", f"{where}: {exc}")
    return exc


def _release_object(
    source: ChartSource, release: str, namespace: str, resolved: Resolved, files: list[str]
) -> dict[str, Any]:
    """The chart release object: everything that makes its render, with the values files'
    digest (their content stays out of the revisions: a Secret's would be readable there)."""
    values_digest = hashlib.sha256("\0".join(files).encode()).hexdigest()[:16]
    return {
        "apiVersion": API_VERSION,
        "kind": CHART_RELEASE_KIND,
        "metadata": {"name": release},
        "chart": {
            "repository": source.repository,
            "name": source.name,
            "version": resolved.version,
            "digest": resolved.digest,
            "archiveDigest": resolved.archive_digest,
        },
        "namespace": source.namespace or namespace,
        "includeCRDs": source.include_crds,
        "values": source.values,
        "valuesFrom": [v.model_dump(by_alias=True) for v in source.values_from],
        "valuesDigest": values_digest,
        "credentials": source.credentials.secret_name if source.credentials else None,
    }


def _source_of(obj: Mapping[str, Any], where: str) -> tuple[ChartSource, Resolved]:
    """The chart a release object names (one read from a revision is checked as the spec
    is: it may be forged)."""
    chart = obj.get("chart") or {}
    try:
        source = ChartSource.model_validate(
            {
                "repository": chart.get("repository"),
                "name": chart.get("name"),
                "version": chart.get("version") or "*",
                "digest": chart.get("digest"),
                "valuesFrom": obj.get("valuesFrom") or [],
                "credentials": {"secretName": obj["credentials"]}
                if obj.get("credentials")
                else None,
            }
        )
        resolved = Resolved(
            str(chart["version"]), str(chart["digest"]), str(chart["archiveDigest"]), None, 0.0
        )
    except (ValidationError, KeyError, TypeError, AttributeError) as exc:
        raise ChartError("ChartRefused", f"{where}: not a chart release: {exc}") from exc
    return source, resolved


async def _credentials(
    source: ChartSource, namespace: str, hub: KubeConnection, where: str
) -> tuple[Credentials | None, Who]:
    if source.credentials is None:
        return None, ANYONE
    name = source.credentials.secret_name
    try:
        secret = await hub.get("v1", "Secret", name, namespace)
    except ApiError as exc:
        if exc.status == 404:
            raise ChartError(
                "ChartRefused", f"{where}: credentials Secret {namespace}/{name} does not exist"
            ) from exc
        raise
    data = secret.get("data") or {}
    try:
        username = base64.b64decode(data["username"]).decode()
        password = base64.b64decode(data["password"]).decode()
    except (KeyError, TypeError, ValueError, binascii.Error, UnicodeDecodeError):
        raise ChartError(
            "ChartRefused",
            f"{where}: credentials Secret {namespace}/{name} needs the keys username and password",
        ) from None
    return Credentials(username, password), (namespace, name)


async def _values_files(
    sources: Sequence[ValuesSource], namespace: str, hub: KubeConnection, where: str
) -> list[str]:
    """The values files' text, in order; ChartError when one is missing (and not
    optional), not a YAML map, or all together larger than MAX_VALUES_BYTES."""
    files: list[str] = []
    total = 0
    for source in sources:
        what = f"{where}: valuesFrom {source.kind} {namespace}/{source.name} key {source.key}"
        try:
            obj = await hub.get("v1", source.kind, source.name, namespace)
        except ApiError as exc:
            if exc.status != 404:
                raise
            if source.optional:
                continue
            raise ChartError("ValuesMissing", f"{what}: it does not exist") from exc
        raw = (obj.get("data") or {}).get(source.key)
        if raw is None:
            if source.optional:
                continue
            raise ChartError("ValuesMissing", f"{what}: the key is missing")
        try:
            text = base64.b64decode(raw).decode() if source.kind == "Secret" else str(raw)
        except (binascii.Error, ValueError, UnicodeDecodeError):
            raise ChartError("ChartRefused", f"{what}: not UTF-8 text") from None
        total += len(text.encode())
        if total > MAX_VALUES_BYTES:
            raise ChartError(
                "ChartRefused", f"{what}: values files over {MAX_VALUES_BYTES} bytes in all"
            )
        try:
            parsed = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except yaml.YAMLError as exc:
            raise ChartError("ChartRefused", f"{what}: not YAML: {exc}") from exc
        if parsed is not None and not isinstance(parsed, dict):
            raise ChartError("ChartRefused", f"{what}: values must be a YAML map")
        files.append(text)
    return files
