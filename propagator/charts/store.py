"""Which version each chart is, and its archive: resolved at most every
``resolve_every_s`` per chart (a moved tag or a new version in range is followed then), each
archive fetched once per digest, checked, and kept in a cache bounded in bytes."""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from api.charts import ChartSource
from propagator.charts.archive import ArchiveError, ChartMeta, check_archive
from propagator.charts.fetch import ChartFetcher, Credentials, FetchError, Located


@dataclass(frozen=True)
class Resolved:
    """A chart's version as resolved: what its content is."""

    version: str
    digest: str
    """``sha256:…`` of the OCI manifest, or of the repository's archive."""
    archive_digest: str
    """``sha256:…`` of the archive."""
    app_version: str | None
    at: float
    """When this content was first resolved (time.time())."""
    hooks: tuple[str, ...] = ()
    """Its templates that declare Helm hooks (their objects are left out)."""


@dataclass(frozen=True)
class Found:
    """A resolution, and what to say about it (the registry did not answer: the last one)."""

    resolved: Resolved
    stale: str | None = None


_SourceKey = tuple[str, str, str, str | None, "Who"]
Who = tuple[str, str | None]
"""Whose credentials fetch a chart: (the application's namespace, its Secret's name), or
``("*", None)`` without credentials (anyone may read what the registry gives anyone)."""
ANYONE: Who = ("*", None)


class ChartStore:
    """Resolves charts and keeps their archives."""

    def __init__(
        self,
        fetcher: ChartFetcher,
        *,
        cache_bytes: int = 256 << 20,
        resolve_every_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fetcher = fetcher
        self.cache_bytes = cache_bytes
        self.resolve_every_s = resolve_every_s
        self._clock = clock
        self._archives: OrderedDict[str, tuple[bytes, ChartMeta]] = OrderedDict()
        self._held = 0
        self._owners: dict[str, set[Who]] = {}
        self._resolved: dict[_SourceKey, tuple[float, Resolved]] = {}

    async def resolve(
        self, source: ChartSource, creds: Credentials | None, who: Who = ANYONE
    ) -> Found:
        """The version ``source`` asks for now, its archive fetched and checked (kept);
        when the registry does not answer, the last resolution (if its archive is still
        kept) with a note. ``who``: whose credentials ``creds`` are. Raises FetchError or
        ArchiveError."""
        key = (source.repository, source.name, source.version, source.digest, who)
        last = self._resolved.get(key)
        now = self._clock()
        if last is not None and now - last[0] < self.resolve_every_s and self.kept(last[1]):
            return Found(last[1])
        try:
            located = await self.fetcher.locate(source, creds)
            resolved = await self._with_archive(source, located, creds, who)
        except FetchError as exc:
            if exc.retry and last is not None and self.kept(last[1]):
                note = (
                    f"chart {source.name}: {exc}; going on with {last[1].version} "
                    f"({last[1].digest[:19]}…) as last resolved"
                )
                return Found(last[1], note)
            raise
        if last is not None and last[1].digest == resolved.digest:
            # The same content: the status keeps saying since when (no write per resolve).
            resolved = last[1]
        if len(self._resolved) > 10_000:
            self._resolved.clear()
        self._resolved[key] = (now, resolved)
        return Found(resolved)

    async def archive(
        self, source: ChartSource, resolved: Resolved, creds: Credentials | None, who: Who = ANYONE
    ) -> bytes:
        """The archive of ``resolved`` (fetched again, by digest, when it is no longer kept
        or was fetched only with someone else's credentials); raises FetchError or
        ArchiveError."""
        kept = self._archives.get(resolved.archive_digest)
        owners = self._owners.get(resolved.archive_digest, set())
        if kept is not None and (who in owners or ANYONE in owners):
            self._archives.move_to_end(resolved.archive_digest)
            return kept[0]
        pinned = source.model_copy(update={"version": resolved.version, "digest": resolved.digest})
        located = await self.fetcher.locate(pinned, creds)
        again = await self._with_archive(pinned, located, creds, who)
        if again.archive_digest != resolved.archive_digest:
            raise FetchError(
                f"chart {source.name} {resolved.version}: its archive is now "
                f"{again.archive_digest}, not {resolved.archive_digest}",
                retry=False,
            )
        return self._archives[resolved.archive_digest][0]

    def kept(self, resolved: Resolved) -> bool:
        return resolved.archive_digest in self._archives

    async def _with_archive(
        self, source: ChartSource, located: Located, creds: Credentials | None, who: Who
    ) -> Resolved:
        # The registry answered ``located`` to these credentials: the archive is theirs too.
        kept = self._archives.get(located.archive_digest or "")
        if kept is not None:
            data, meta = kept
        else:
            data = await self.fetcher.archive(source, located, creds)
            meta = _checked(source, located, data)
        archive_digest = "sha256:" + hashlib.sha256(data).hexdigest()
        self._keep(archive_digest, data, meta)
        self._owners.setdefault(archive_digest, set()).add(who if creds is not None else ANYONE)
        return Resolved(
            meta.version,
            located.digest or archive_digest,
            archive_digest,
            meta.app_version,
            time.time(),
            meta.hooks,
        )

    def _keep(self, digest: str, data: bytes, meta: ChartMeta) -> None:
        if digest in self._archives:
            self._archives.move_to_end(digest)
            return
        self._archives[digest] = (data, meta)
        self._held += len(data)
        while self._held > self.cache_bytes and len(self._archives) > 1:
            gone, (dropped, _) = self._archives.popitem(last=False)
            self._owners.pop(gone, None)
            self._held -= len(dropped)


def _checked(source: ChartSource, located: Located, data: bytes) -> ChartMeta:
    """The archive's chart, which must be the one asked for."""
    meta = check_archive(data)
    if meta.name != source.name:
        raise ArchiveError(f"chart {source.name}: the archive holds chart {meta.name[:100]!r}")
    if located.version and meta.version != located.version:
        raise ArchiveError(
            f"chart {source.name}: version {located.version} holds a Chart.yaml of version "
            f"{meta.version[:100]!r}"
        )
    return meta
