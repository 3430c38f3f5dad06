"""Fetching charts: from OCI registries (the distribution API Helm pushes to) and from
chart repositories (an ``index.yaml`` and its archives), over httpx.

Every address is checked against the platform's chart sources first — a redirect, a
token service and an archive's URL in an index too — so a tenant cannot make the hub
fetch anything else. Each answer is read up to a bound and each fetch ends at a deadline
(a registry that answers slowly or without end is cut off); what is fetched is checked
against its digest. Credentials go only to the registry (or repository host) they are
for and to its token service, never with a redirect to another host, and never into a
message.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

import anyio
import httpx
import yaml

from api.charts import ChartSource
from api.semver import Version, parse_range, parse_version
from propagator.charts.allowed import Allowed, SourceNotAllowed, _shown

HELM_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
MANIFEST_TYPES = "application/vnd.oci.image.manifest.v1+json"
MAX_MANIFEST_BYTES = 1 << 20
MAX_INDEX_BYTES = 16 << 20
"""Bytes of a chart repository's index.yaml."""
MAX_TAG_PAGES = 10
MAX_VERSIONS = 10_000
"""Versions of one chart considered (tags of a repository, entries of an index)."""
MAX_REDIRECTS = 5
MAX_SMALL_BYTES = 64 << 10
"""Bytes of a token answer or an error body."""


class FetchError(Exception):
    """A chart that could not be fetched. ``retry``: whether trying again may help (the
    registry did not answer, or answered 5xx), as opposed to a refusal (not allowed, not
    found, too large, digest mismatch)."""

    def __init__(self, message: str, *, retry: bool) -> None:
        super().__init__(message)
        self.retry = retry


@dataclass(frozen=True)
class Credentials:
    """A registry's user name and password (never shown)."""

    username: str = field(repr=False)
    password: str = field(repr=False)

    def basic(self) -> str:
        raw = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(raw).decode()


@dataclass(frozen=True)
class Located:
    """One version of a chart, found: what identifies its content, and where it is."""

    version: str
    digest: str
    """``sha256:…`` of the OCI manifest, or of the archive for a chart repository."""
    archive_url: str
    archive_digest: str | None
    """``sha256:…`` the archive must have (None: the repository's index gives none)."""
    size: int | None


@dataclass
class _Token:
    value: str
    until: float


class ChartFetcher:
    """Fetches charts from the allowed sources."""

    def __init__(
        self,
        allowed: Allowed,
        *,
        timeout_s: float = 30.0,
        max_bytes: int = 4 << 20,
        ca_file: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.allowed = allowed
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        verify: ssl.SSLContext | bool = True
        if ca_file:
            verify = ssl.create_default_context(cafile=ca_file)
        self._client = httpx.AsyncClient(
            verify=verify,
            transport=transport,
            follow_redirects=False,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
            trust_env=False,  # no proxy or .netrc credentials from the controller's env
            headers={"User-Agent": "propagator"},
        )
        self._tokens: dict[tuple[str, str, str, str], _Token] = {}

    async def aclose(self) -> None:
        await self._client.aclose()

    # -- what the application asks for --------------------------------------------------

    async def locate(self, source: ChartSource, creds: Credentials | None) -> Located:
        """The version of ``source`` its version (range) and digest ask for; raises
        FetchError (or SourceNotAllowed)."""
        with self._deadline(f"finding chart {source.name}"):
            if source.repository.startswith("oci://"):
                return await self._locate_oci(source, creds)
            return await self._locate_repository(source, creds)

    async def archive(
        self, source: ChartSource, located: Located, creds: Credentials | None
    ) -> bytes:
        """The chart archive of ``located``, checked against its digest; raises FetchError."""
        with self._deadline(f"fetching chart {source.name} {located.version}"):
            base = self._base(source)
            send = creds if _same_host(located.archive_url, base) else None
            data = await self._get(located.archive_url, send, None, self.max_bytes, "archive")
        actual = "sha256:" + hashlib.sha256(data).hexdigest()
        expected = located.archive_digest
        if expected is not None and actual != expected:
            raise FetchError(
                f"chart {source.name} {located.version}: its archive has digest {actual}, "
                f"not {expected}",
                retry=False,
            )
        return data

    # -- OCI -----------------------------------------------------------------------------

    def _base(self, source: ChartSource) -> str:
        """The registry's or repository's address as reached (scheme checked)."""
        ref = source.repository.rstrip("/")
        if ref.startswith("oci://"):
            scheme = self.allowed.check(f"{ref}/{source.name}", "chart")
            parts = urlsplit(ref)
            return f"{scheme}://{parts.netloc}"
        self.allowed.check(f"{ref}/index.yaml", "chart repository")
        return ref

    async def _locate_oci(self, source: ChartSource, creds: Credentials | None) -> Located:
        base = self._base(source)
        path = urlsplit(source.repository).path.strip("/")
        repo = f"{path}/{source.name}" if path else source.name
        wanted = parse_range(source.version)
        if source.digest:
            ref = source.digest
        elif (exact := wanted.exact()) is not None:
            ref = str(exact).replace("+", "_")
        else:
            tags = await self._tags(base, repo, creds)
            newest = wanted.newest([v for t in tags if (v := parse_version(t)) is not None])
            if newest is None:
                raise FetchError(
                    f"chart {source.reference()}: no version matches {source.version!r} "
                    f"(newest: {_newest(tags)})",
                    retry=False,
                )
            ref = str(newest).replace("+", "_")
        url = f"{base}/v2/{repo}/manifests/{ref}"
        body = await self._get(url, creds, MANIFEST_TYPES, MAX_MANIFEST_BYTES, "manifest")
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        if source.digest and digest != source.digest:
            raise FetchError(
                f"chart {source.reference()}: the registry's manifest has digest {digest}, "
                f"not the pinned {source.digest}",
                retry=False,
            )
        layer = _helm_layer(body, source)
        size = layer.get("size")
        if isinstance(size, int) and size > self.max_bytes:
            raise FetchError(
                f"chart {source.reference()}: its archive has {size} bytes; at most "
                f"{self.max_bytes} (PROPAGATOR_CHART_MAX_BYTES)",
                retry=False,
            )
        return Located(  # a pinned digest's version is read from its Chart.yaml
            "" if source.digest else ref.replace("_", "+"),
            digest,
            f"{base}/v2/{repo}/blobs/{layer['digest']}",
            str(layer["digest"]),
            size if isinstance(size, int) else None,
        )

    async def _tags(self, base: str, repo: str, creds: Credentials | None) -> list[str]:
        tags: list[str] = []
        url: str | None = f"{base}/v2/{repo}/tags/list?n=1000"
        for _ in range(MAX_TAG_PAGES):
            if url is None:
                break
            body, headers = await self._get_with_headers(url, creds, None, MAX_MANIFEST_BYTES)
            try:
                page = json.loads(body)
                found = page.get("tags") or []
                if not isinstance(found, list):
                    raise TypeError("tags is not a list")
            except (ValueError, TypeError, AttributeError) as exc:
                raise FetchError(
                    f"the registry's tag list does not parse: {exc}", retry=False
                ) from None
            tags += [t for t in found if isinstance(t, str)][: MAX_VERSIONS - len(tags)]
            url = _next_page(base, headers.get("link", ""))
            if len(tags) >= MAX_VERSIONS:
                break
        return tags

    # -- chart repositories ---------------------------------------------------------------

    async def _locate_repository(self, source: ChartSource, creds: Credentials | None) -> Located:
        base = self._base(source)
        body = await self._get(f"{base}/index.yaml", creds, None, MAX_INDEX_BYTES, "index.yaml")
        entries = _index_entries(body, source)
        wanted = parse_range(source.version)
        found: list[tuple[Version, Mapping[str, Any]]] = []
        for entry in entries[:MAX_VERSIONS]:
            version = parse_version(str(entry.get("version", "")))
            if version is not None:
                found.append((version, entry))
        if source.digest:
            chosen = [e for _, e in found if f"sha256:{e.get('digest')}" == source.digest]
            if not chosen:
                raise FetchError(
                    f"chart {source.reference()}: no version in the index has digest "
                    f"{source.digest}",
                    retry=False,
                )
            entry = chosen[0]
        else:
            newest = wanted.newest([v for v, _ in found])
            if newest is None:
                raise FetchError(
                    f"chart {source.reference()}: no version matches {source.version!r} "
                    f"(newest: {max((str(v) for v, _ in found), default='none', key=_key)})",
                    retry=False,
                )
            entry = next(e for v, e in found if v == newest)
        urls = entry.get("urls")
        if not isinstance(urls, list) or not urls or not isinstance(urls[0], str):
            raise FetchError(f"chart {source.reference()}: its index entry has no URL", retry=False)
        url = urljoin(base + "/", urls[0])
        self.allowed.check(url, "chart archive")
        digest = entry.get("digest")
        archive_digest = (
            f"sha256:{digest}"
            if isinstance(digest, str) and re.fullmatch(r"[a-f0-9]{64}", digest)
            else None
        )
        return Located(str(entry.get("version")), archive_digest or "", url, archive_digest, None)

    # -- HTTP ------------------------------------------------------------------------------

    def _deadline(self, what: str) -> Any:
        return _Deadline(self.timeout_s, what)

    async def _get(
        self, url: str, creds: Credentials | None, accept: str | None, limit: int, what: str
    ) -> bytes:
        body, _ = await self._get_with_headers(url, creds, accept, limit, what)
        return body

    async def _get_with_headers(
        self,
        url: str,
        creds: Credentials | None,
        accept: str | None,
        limit: int,
        what: str = "answer",
    ) -> tuple[bytes, httpx.Headers]:
        """GET ``url`` (auth challenges answered, redirects followed within the allowed
        sources), its body read up to ``limit`` bytes."""
        auth: str | None = None
        origin = url
        for _ in range(MAX_REDIRECTS + 2):
            headers = {"Accept": accept} if accept else {}
            if auth is not None and _same_host(url, origin):
                headers["Authorization"] = auth
            try:
                async with self._client.stream("GET", url, headers=headers) as answer:
                    if answer.status_code == 401 and auth is None:
                        await answer.aclose()
                        auth = await self._authorize(
                            answer.headers.get("www-authenticate", ""), creds, origin
                        )
                        continue
                    if answer.status_code in (301, 302, 303, 307, 308):
                        target = urljoin(url, answer.headers.get("location", ""))
                        self.allowed.check(target, "a redirect to")
                        url = target
                        continue
                    if answer.status_code != 200:
                        retry = answer.status_code >= 500 or answer.status_code == 429
                        raise FetchError(
                            f"{_shown(url)} answered {answer.status_code}"
                            + _refused(answer.status_code),
                            retry=retry,
                        )
                    declared = answer.headers.get("content-length")
                    if declared and declared.isdigit() and int(declared) > limit:
                        raise FetchError(
                            f"{_shown(url)}: the {what} has {declared} bytes; at most {limit}",
                            retry=False,
                        )
                    body = bytearray()
                    async for chunk in answer.aiter_bytes():
                        body += chunk
                        if len(body) > limit:
                            raise FetchError(
                                f"{_shown(url)}: the {what} is larger than {limit} bytes",
                                retry=False,
                            )
                    return bytes(body), answer.headers
            except httpx.HTTPError as exc:
                raise FetchError(
                    f"{_shown(url)}: {type(exc).__name__}: {_plain(exc)}", retry=True
                ) from None
        raise FetchError(f"{_shown(origin)}: too many redirects or challenges", retry=False)

    async def _authorize(self, challenge: str, creds: Credentials | None, origin: str) -> str:
        """The Authorization header that answers ``challenge`` (Basic, or a Bearer token
        from the registry's token service)."""
        scheme, params = _challenge(challenge)
        if scheme == "basic":
            if creds is None:
                raise FetchError(
                    f"{_shown(origin)} needs credentials (spec.resources.charts[].credentials)",
                    retry=False,
                )
            return creds.basic()
        if scheme != "bearer" or "realm" not in params:
            raise FetchError(
                f"{_shown(origin)} asks for authentication the controller does not speak",
                retry=False,
            )
        realm = params["realm"]
        if not _same_host(realm, origin):
            self.allowed.check(realm, "the registry's token service")
        # A token is kept for the credentials that got it (a digest of them: the same user
        # name with another password must not get it).
        holder = hashlib.sha256(creds.basic().encode()).hexdigest() if creds else ""
        key = (realm, params.get("service", ""), params.get("scope", ""), holder)
        kept = self._tokens.get(key)
        if kept is not None and kept.until > time.monotonic():
            return f"Bearer {kept.value}"
        query: dict[str, str] = {k: params[k] for k in ("service", "scope") if k in params}
        url = realm + ("&" if "?" in realm else "?") + urlencode(query)
        headers = {"Authorization": creds.basic()} if creds is not None else {}
        try:
            answer = await self._client.get(url, headers=headers)
        except httpx.HTTPError as exc:
            raise FetchError(
                f"token service {_shown(realm)}: {type(exc).__name__}", retry=True
            ) from None
        if answer.status_code != 200 or len(answer.content) > MAX_SMALL_BYTES:
            raise FetchError(
                f"token service {_shown(realm)} answered {answer.status_code}"
                + _refused(answer.status_code),
                retry=answer.status_code >= 500,
            )
        try:
            doc = answer.json()
            token = doc.get("token") or doc.get("access_token")
            lifetime = float(doc.get("expires_in") or 60)
        except (ValueError, AttributeError, TypeError):
            token = None
        if not isinstance(token, str) or not token:
            raise FetchError(f"token service {_shown(realm)} gave no token", retry=False)
        if len(self._tokens) > 256:
            self._tokens.clear()
        self._tokens[key] = _Token(token, time.monotonic() + max(min(lifetime, 3600) - 10, 0))
        return f"Bearer {token}"


class _Deadline:
    """The fetch's deadline: past it, FetchError (retried) saying what took too long."""

    def __init__(self, timeout_s: float, what: str) -> None:
        self._scope = anyio.fail_after(timeout_s)
        self._timeout = timeout_s
        self._what = what

    def __enter__(self) -> None:
        self._scope.__enter__()

    def __exit__(self, *exc: Any) -> bool:
        try:
            return bool(self._scope.__exit__(*exc))
        except TimeoutError:
            raise FetchError(
                f"{self._what} took longer than {self._timeout:g}s "
                "(PROPAGATOR_CHART_FETCH_TIMEOUT_S); it was stopped",
                retry=True,
            ) from None


_PARAM = re.compile(r'(\w+)="([^"]*)"')


def _challenge(header: str) -> tuple[str, dict[str, str]]:
    scheme, _, rest = header.strip().partition(" ")
    return scheme.lower(), dict(_PARAM.findall(rest[:4096]))


def _same_host(url: str, other: str) -> bool:
    a, b = urlsplit(url), urlsplit(other)
    return (a.scheme, a.netloc.lower()) == (b.scheme, b.netloc.lower())


def _next_page(base: str, link: str) -> str | None:
    found = re.match(r'\s*<([^>]+)>\s*;\s*rel="?next"?', link)
    if found is None:
        return None
    target = urljoin(base, found.group(1))
    return target if _same_host(target, base) else None


def _helm_layer(body: bytes, source: ChartSource) -> Mapping[str, Any]:
    try:
        manifest = json.loads(body)
        layers = manifest.get("layers")
        found = [
            layer
            for layer in layers
            if isinstance(layer, dict) and layer.get("mediaType") == HELM_LAYER
        ]
    except (ValueError, AttributeError, TypeError) as exc:
        raise FetchError(
            f"chart {source.reference()}: the registry's manifest does not parse: {exc}",
            retry=False,
        ) from None
    if len(found) != 1 or not re.fullmatch(r"sha256:[a-f0-9]{64}", str(found[0].get("digest"))):
        raise FetchError(
            f"chart {source.reference()}: the artifact is not a Helm chart (no single layer "
            f"of type {HELM_LAYER})",
            retry=False,
        )
    return found[0]


def _index_entries(body: bytes, source: ChartSource) -> list[Mapping[str, Any]]:
    try:
        index = yaml.load(body, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        entries = index["entries"][source.name]
        if not isinstance(entries, list):
            raise TypeError("not a list")
    except KeyError:
        raise FetchError(
            f"chart repository {source.repository}: it has no chart {source.name}", retry=False
        ) from None
    except (yaml.YAMLError, TypeError) as exc:
        raise FetchError(
            f"chart repository {source.repository}: index.yaml does not parse: "
            f"{type(exc).__name__}",
            retry=False,
        ) from None
    return [e for e in entries[:MAX_VERSIONS] if isinstance(e, dict)]


def _key(text: str) -> Any:
    version = parse_version(text)
    return (version is not None, version or Version(0, 0, 0))


def _newest(tags: list[str]) -> str:
    versions = [v for t in tags if (v := parse_version(t)) is not None]
    return str(max(versions)) if versions else "none"


def _refused(status: int) -> str:
    return " (credentials refused or missing)" if status in (401, 403) else ""


def _plain(exc: Exception) -> str:
    """An httpx error's message without a URL (a query may hold a signature)."""
    return re.sub(r"https?://\S+", "<url>", str(exc))[:200] or type(exc).__name__


__all__ = ["ChartFetcher", "Credentials", "FetchError", "Located", "SourceNotAllowed"]
