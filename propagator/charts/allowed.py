"""Which chart sources the controller may fetch from (the platform's
PROPAGATOR_CHART_SOURCES): the controller fetches what tenants name, so only the addresses
the platform listed, over https unless an entry says ``http://`` itself."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

_ENTRY = re.compile(r"(oci|https|http)://[A-Za-z0-9.\-\[\]:]+(/[A-Za-z0-9._~\-/]*)?")


class SourceNotAllowed(ValueError):
    """An address outside the platform's chart sources."""


@dataclass(frozen=True)
class Prefix:
    scheme: str
    """https or http (an ``oci://`` entry is https)."""
    host: str
    """host[:port], lower case."""
    path: str
    """Without a trailing ``/``."""

    def __str__(self) -> str:
        return f"{self.scheme}://{self.host}{self.path}"


def parse_sources(text: str, setting: str = "PROPAGATOR_CHART_SOURCES") -> tuple[Prefix, ...]:
    """The prefixes of a comma-separated list; raises ValueError naming ``setting`` and the
    entry that is not an address without credentials, query or fragment."""
    out = []
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        if not _ENTRY.fullmatch(entry):
            raise ValueError(
                f"{setting}: {entry[:200]!r} is not a chart source address such as "
                "oci://registry.example.com/charts or https://charts.example.com (no user "
                "name, password, query or fragment)"
            )
        parts = urlsplit(entry)
        scheme = "https" if parts.scheme == "oci" else parts.scheme
        out.append(Prefix(scheme, parts.netloc.lower(), parts.path.rstrip("/")))
    return tuple(out)


@dataclass(frozen=True)
class Allowed:
    """The platform's chart sources."""

    prefixes: tuple[Prefix, ...]

    def scheme_for(self, url: str) -> str | None:
        """How an address (``oci://``, ``https://`` or ``http://``) may be reached: https,
        http (a listed ``http://`` prefix covers it), or None when no prefix covers it."""
        parts = urlsplit(url)
        host, path = parts.netloc.lower(), parts.path.rstrip("/")
        wanted = ("https", "http") if parts.scheme == "oci" else (parts.scheme,)
        for scheme in wanted:
            for p in self.prefixes:
                if p.scheme == scheme and p.host == host and _under(path, p.path):
                    return scheme
        return None

    def check(self, url: str, what: str) -> str:
        """The scheme to reach ``url`` with; raises SourceNotAllowed naming ``what``, the
        address and the allowed sources."""
        scheme = self.scheme_for(url)
        if scheme is None:
            raise SourceNotAllowed(
                f"{what} {_shown(url)} is not among the chart sources the platform allows "
                f"(PROPAGATOR_CHART_SOURCES: {self.described()})"
            )
        return scheme

    def described(self) -> str:
        return ", ".join(str(p) for p in self.prefixes) or "none"


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/") or prefix == ""


def _shown(url: str) -> str:
    """``url`` without anything after the path (a query may hold a signature)."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname or ''}{port}{parts.path}"[:300]
