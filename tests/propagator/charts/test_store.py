"""Resolving charts and keeping their archives: resolved again only after the interval, the
last resolution used (and said) while the registry does not answer, each archive kept once
within a byte bound and served only to those the registry gave it to."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from typing import Any

import anyio
import pytest

from api.charts import ChartSource
from propagator.charts.archive import ArchiveError
from propagator.charts.fetch import Credentials, FetchError, Located
from propagator.charts.store import ANYONE, ChartStore


def archive(version: str, name: str = "web", pad: int = 0) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for path, content in (
            (f"{name}/Chart.yaml", f"name: {name}\nversion: {version}\n".encode()),
            (f"{name}/pad", bytes(range(256)) * pad),
        ):
            info = tarfile.TarInfo(path)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return gzip.compress(raw.getvalue(), compresslevel=0)


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class FakeFetcher:
    """The registry as the store sees it: a version per tag, an archive per version."""

    def __init__(self) -> None:
        self.tag = "1.0.0"
        self.archives: dict[str, bytes] = {"1.0.0": archive("1.0.0"), "1.1.0": archive("1.1.0")}
        self.down = False
        self.calls: list[tuple[str, str | None]] = []

    async def locate(self, source: ChartSource, creds: Credentials | None) -> Located:
        self.calls.append(("locate", creds.username if creds else None))
        if self.down:
            raise FetchError("registry: ConnectError", retry=True)
        version = source.version if source.version != "*" else self.tag
        data = self.archives[version]
        return Located(version, sha(data + b"manifest"), "blob", sha(data), len(data))

    async def archive(
        self, source: ChartSource, located: Located, creds: Credentials | None
    ) -> bytes:
        self.calls.append(("archive", creds.username if creds else None))
        return self.archives[located.version]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


SOURCE = ChartSource(repository="oci://r.example.com/charts", name="web")


def store(fetcher: FakeFetcher, clock: Clock, **options: Any) -> ChartStore:
    return ChartStore(fetcher, resolve_every_s=60, clock=clock, **options)  # type: ignore[arg-type]


def test_a_tag_is_resolved_again_after_the_interval_and_a_moved_tag_followed() -> None:
    fetcher, clock = FakeFetcher(), Clock()
    charts = store(fetcher, clock)
    first = anyio.run(charts.resolve, SOURCE, None)
    assert (first.resolved.version, first.stale) == ("1.0.0", None)
    fetcher.tag = "1.1.0"
    clock.now = 59
    assert anyio.run(charts.resolve, SOURCE, None).resolved.version == "1.0.0"  # not asked
    assert [c for c, _ in fetcher.calls] == ["locate", "archive"]
    clock.now = 61
    moved = anyio.run(charts.resolve, SOURCE, None).resolved
    assert moved.version == "1.1.0"
    # asked again, the same content: resolved "since" as before (the status is not rewritten)
    clock.now = 122
    assert anyio.run(charts.resolve, SOURCE, None).resolved == moved


def test_while_the_registry_does_not_answer_the_last_resolution_is_used_and_said() -> None:
    fetcher, clock = FakeFetcher(), Clock()
    charts = store(fetcher, clock)
    anyio.run(charts.resolve, SOURCE, None)
    fetcher.down = True
    clock.now = 120
    found = anyio.run(charts.resolve, SOURCE, None)
    assert found.resolved.version == "1.0.0"
    assert found.stale is not None
    assert "ConnectError; going on with 1.0.0" in found.stale
    # a chart never resolved has nothing to go on with
    with pytest.raises(FetchError):
        anyio.run(charts.resolve, SOURCE.model_copy(update={"version": "1.1.0"}), None)


def test_an_archive_fetched_with_someones_credentials_is_not_served_to_others() -> None:
    fetcher, clock = FakeFetcher(), Clock()
    charts = store(fetcher, clock)
    found = anyio.run(charts.resolve, SOURCE, Credentials("team-a", "pw"), ("team-a", "creds"))
    fetcher.calls.clear()
    # team-a again: from the cache
    anyio.run(
        charts.archive, SOURCE, found.resolved, Credentials("team-a", "pw"), ("team-a", "creds")
    )
    assert fetcher.calls == []
    # team-b (or nobody) naming the same digest: asked of the registry with its own
    anyio.run(charts.archive, SOURCE, found.resolved, None, ANYONE)
    assert fetcher.calls[0] == ("locate", None)


def test_the_cache_keeps_archives_within_its_bound() -> None:
    fetcher, clock = FakeFetcher(), Clock()
    fetcher.archives = {v: archive(v, pad=2000) for v in ("1.0.0", "1.1.0", "1.2.0")}
    size = len(fetcher.archives["1.0.0"])
    charts = store(fetcher, clock, cache_bytes=2 * size + size // 2)
    kept = []
    for version in ("1.0.0", "1.1.0", "1.2.0"):
        kept.append(anyio.run(charts.resolve, SOURCE.model_copy(update={"version": version}), None))
    assert [charts.kept(k.resolved) for k in kept] == [False, True, True]


def test_an_archive_that_is_not_the_chart_asked_for_is_refused() -> None:
    fetcher, clock = FakeFetcher(), Clock()
    fetcher.archives["1.0.0"] = archive("1.0.0", name="other")
    with pytest.raises(ArchiveError, match="the archive holds chart 'other'"):
        anyio.run(store(fetcher, clock).resolve, SOURCE, None)
    fetcher.archives["1.0.0"] = archive("6.6.6")
    with pytest.raises(ArchiveError, match=r"version 1.0.0 holds a Chart.yaml of version '6.6.6'"):
        anyio.run(store(fetcher, clock).resolve, SOURCE, None)
