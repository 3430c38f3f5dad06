"""A chart archive checked before Helm reads it: a gzipped tar of one chart directory
whose size unpacked, number of files, nesting (subcharts are archives inside it) and paths
are bounded, with no links and no path leaving the chart. What the registry says the chart
is (its name and version) must be what its ``Chart.yaml`` says."""

from __future__ import annotations

import dataclasses
import gzip
import io
import tarfile
import zlib
from dataclasses import dataclass, field

import yaml

MAX_UNPACKED_BYTES = 32 << 20
"""Bytes a chart may unpack to, its subcharts included."""
MAX_FILE_BYTES = 4 << 20
"""Bytes one file of a chart may hold."""
MAX_FILES = 5000
"""Files a chart may hold, its subcharts included."""
MAX_NESTING = 5
"""Levels of subchart archives (``charts/*.tgz``) inside a chart."""
HOOK = b"helm.sh/hook"
MAX_PATH_CHARS = 1024
MAX_PATH_DEPTH = 32
"""Directories deep a path inside a chart may be."""


class ArchiveError(ValueError):
    """A chart archive refused; says which bound or rule it breaks."""


@dataclass(frozen=True)
class ChartMeta:
    """What a chart's ``Chart.yaml`` says."""

    name: str
    version: str
    app_version: str | None = None
    hooks: tuple[str, ...] = ()
    """Templates that declare Helm hooks (``helm.sh/hook``): their objects are left out."""


@dataclass
class _Budget:
    unpacked: int = 0
    files: int = 0
    hooks: list[str] = field(default_factory=list)


def check_archive(data: bytes) -> ChartMeta:
    """The chart ``data`` holds; raises ArchiveError for anything outside the bounds."""
    budget = _Budget()
    meta = _check(data, budget, 0, "the chart")
    return dataclasses.replace(meta, hooks=tuple(budget.hooks[:20]))


def _check(data: bytes, budget: _Budget, level: int, what: str) -> ChartMeta:
    if level > MAX_NESTING:
        raise ArchiveError(f"{what}: subcharts nest more than {MAX_NESTING} levels")
    meta: ChartMeta | None = None
    top: str | None = None
    try:
        # Read through a bounded decompressor: a tar header may claim any size.
        stream = _Bounded(gzip.GzipFile(fileobj=io.BytesIO(data)), budget, what)
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                name = member.name
                if len(name) > MAX_PATH_CHARS or name.count("/") > MAX_PATH_DEPTH:
                    raise ArchiveError(f"{what}: a path is longer or deeper than allowed")
                parts = name.split("/")
                if name.startswith("/") or ".." in parts or "\\" in name:
                    raise ArchiveError(f"{what}: {name[:200]!r} leaves the chart's directory")
                if top is None:
                    top = parts[0]
                elif parts[0] != top:
                    raise ArchiveError(
                        f"{what}: holds more than one top directory ({top}, {parts[0][:100]})"
                    )
                if member.isdir():
                    continue
                if not member.isfile():
                    raise ArchiveError(
                        f"{what}: {name[:200]!r} is a link or a special file (not allowed)"
                    )
                budget.files += 1
                if budget.files > MAX_FILES:
                    raise ArchiveError(f"the chart holds more than {MAX_FILES} files")
                if member.size > MAX_FILE_BYTES:
                    raise ArchiveError(
                        f"{what}: {name[:200]} has {member.size} bytes; at most "
                        f"{MAX_FILE_BYTES} per file"
                    )
                extracted = tar.extractfile(member)
                content = extracted.read() if extracted is not None else b""
                inner = parts[1:]
                if inner == ["Chart.yaml"]:
                    meta = _chart_yaml(content, what)
                elif inner[:1] == ["templates"] and HOOK in content:
                    budget.hooks.append(name[:200])
                elif len(inner) == 2 and inner[0] == "charts" and inner[1].endswith(".tgz"):
                    _check(content, budget, level + 1, f"{what}, subchart {inner[1][:100]}")
    except ArchiveError:
        raise
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise ArchiveError(f"{what} is not a gzipped tar archive: {exc}") from exc
    if meta is None:
        raise ArchiveError(f"{what} has no Chart.yaml in its top directory")
    return meta


def _chart_yaml(content: bytes, what: str) -> ChartMeta:
    try:
        doc = yaml.load(content, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise ArchiveError(f"{what}: Chart.yaml does not parse: {exc}") from exc
    if not isinstance(doc, dict):
        raise ArchiveError(f"{what}: Chart.yaml is not a map")
    name, version = doc.get("name"), doc.get("version")
    if not isinstance(name, str) or not isinstance(version, str | int | float):
        raise ArchiveError(f"{what}: Chart.yaml needs a name and a version")
    app = doc.get("appVersion")
    return ChartMeta(name, str(version), None if app is None else str(app)[:100])


class _Bounded(io.RawIOBase):
    """A reader that refuses to give more than the unpacked budget allows."""

    def __init__(self, inner: gzip.GzipFile, budget: _Budget, what: str) -> None:
        self._inner = inner
        self._budget = budget
        self._what = what

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        chunk = self._inner.read(len(buffer))
        self._budget.unpacked += len(chunk)
        if self._budget.unpacked > MAX_UNPACKED_BYTES:
            raise ArchiveError(
                f"{self._what} unpacks to more than {MAX_UNPACKED_BYTES} bytes (subcharts included)"
            )
        buffer[: len(chunk)] = chunk
        return len(chunk)
