"""Semantic versions (SemVer 2.0) and the version ranges charts are asked for with.

A range is written as Helm writes one: comparisons (``>=1.2.0 <2``, also comma-separated),
alternatives (``^1.2 || ~2.0.3``), caret and tilde ranges, wildcards (``1.2.x``, ``1.*``,
``*``) and hyphen ranges (``1.2 - 1.4.5``). A pre-release (``1.3.0-rc.1``) matches only
a range that names a pre-release itself. Parsing is bounded (the text is a tenant's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

MAX_RANGE_CHARS = 256
"""Characters a version range may have."""
MAX_COMPARISONS = 32
"""Comparisons a version range may hold, all alternatives together."""

_VERSION = re.compile(
    r"v?(0|[1-9]\d{0,8})\.(0|[1-9]\d{0,8})\.(0|[1-9]\d{0,8})"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
)
_PARTIAL = re.compile(
    r"v?(\d{1,9}|[xX*])(?:\.(\d{1,9}|[xX*]))?(?:\.(\d{1,9}|[xX*]))?"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z.-]+)?"
)
_COMPARISON = re.compile(r"(>=|<=|!=|==|=|>|<|\^|~>|~)?\s*(\S+)")


@total_ordering
@dataclass(frozen=True)
class Version:
    """A SemVer 2.0 version; ordered as SemVer orders them (build metadata ignored)."""

    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()
    build: str = ""

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(self.prerelease)
        return text + (f"+{self.build}" if self.build else "")

    def _key(self) -> tuple[int, int, int, int, tuple[tuple[int, int | str], ...]]:
        # A release sorts after its pre-releases; numeric identifiers before alphanumeric.
        pre = tuple((0, int(p)) if p.isdigit() else (1, p) for p in self.prerelease)
        return (self.major, self.minor, self.patch, 0 if self.prerelease else 1, pre)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Version) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


def parse_version(text: str) -> Version | None:
    """The version ``text`` states (a leading ``v`` allowed; ``_`` read as ``+``, as OCI
    tags write build metadata), or None when it is not one."""
    if len(text) > MAX_RANGE_CHARS:
        return None
    found = _VERSION.fullmatch(text.replace("_", "+"))
    if found is None:
        return None
    major, minor, patch, pre, build = found.groups()
    prerelease = tuple(pre.split(".")) if pre else ()
    if any(p.isdigit() and len(p) > 1 and p.startswith("0") for p in prerelease):
        return None  # SemVer: no leading zeros in numeric identifiers
    return Version(int(major), int(minor), int(patch), prerelease, build or "")


Comparison = tuple[str, Version]
"""An operator (``>=``, ``>``, ``<=``, ``<``, ``=``, ``!=``) and a version."""


@dataclass(frozen=True)
class VersionRange:
    """Alternatives, each a set of comparisons that must all hold."""

    text: str
    alternatives: tuple[tuple[tuple[Comparison, ...], bool], ...]
    """Each alternative's comparisons, and whether it names a pre-release."""

    def exact(self) -> Version | None:
        """The one version this range admits when it names exactly one."""
        if len(self.alternatives) == 1 and len(self.alternatives[0][0]) == 1:
            op, version = self.alternatives[0][0][0]
            if op == "=":
                return version
        return None

    def admits(self, version: Version) -> bool:
        """Whether ``version`` is in the range (a pre-release only where a comparison of
        its alternative names a pre-release of the same major.minor.patch)."""
        return any(_admits(group, pre, version) for group, pre in self.alternatives)

    def newest(self, versions: list[Version]) -> Version | None:
        """The highest of ``versions`` the range admits."""
        return max((v for v in versions if self.admits(v)), default=None)


def _admits(group: tuple[Comparison, ...], named_pre: bool, version: Version) -> bool:
    triple = (version.major, version.minor, version.patch)
    if version.prerelease and not (
        named_pre and any(v.prerelease and (v.major, v.minor, v.patch) == triple for _, v in group)
    ):
        return False
    return all(_holds(op, version, bound) for op, bound in group)


def _holds(op: str, version: Version, bound: Version) -> bool:
    if op == "=":
        return version == bound
    if op == "!=":
        return version != bound
    if op == ">":
        return version > bound
    if op == ">=":
        return version >= bound
    if op == "<":
        return version < bound
    return version <= bound  # "<="


class RangeError(ValueError):
    """A version range that cannot be read; says why."""


def _partial(text: str) -> tuple[list[int | None], tuple[str, ...]]:
    found = _PARTIAL.fullmatch(text)
    if found is None:
        raise RangeError(f"{text!r} is not a version (such as 1.2.3, 1.2 or 1.x)")
    parts: list[int | None] = []
    for part in found.groups()[:3]:
        if part is None or part in "xX*":
            parts.append(None)
        else:
            parts.append(int(part))
    # 1.x.3: what follows a wildcard is a wildcard too
    for index, part in enumerate(parts):
        if part is None:
            parts[index:] = [None] * (3 - index)
            break
    pre = tuple(found.group(4).split(".")) if found.group(4) else ()
    return parts, pre


def _floor(parts: list[int | None], pre: tuple[str, ...]) -> Version:
    major, minor, patch = (p or 0 for p in parts)
    return Version(major, minor, patch, pre if parts[2] is not None else ())


def _next(parts: list[int | None], level: int) -> Version:
    """The first version past ``parts`` at ``level`` (0 major, 1 minor, 2 patch)."""
    major, minor, patch = (p or 0 for p in parts)
    if level == 0:
        return Version(major + 1, 0, 0, ("0",))
    if level == 1:
        return Version(major, minor + 1, 0, ("0",))
    return Version(major, minor, patch + 1, ("0",))


def _comparisons(op: str, text: str) -> list[Comparison]:
    parts, pre = _partial(text)
    known = sum(p is not None for p in parts)
    low = _floor(parts, pre)
    if op in ("", "=", "=="):
        if known == 3:
            return [("=", low)]
        if known == 0:
            return [(">=", Version(0, 0, 0))]
        return [(">=", low), ("<", _next(parts, known - 1))]
    if op == "!=":
        if known == 3:
            return [("!=", low)]
        raise RangeError(f"!={text}: != takes a whole version (such as 1.2.3)")
    if op in ("~", "~>"):
        return (
            [(">=", low), ("<", _next(parts, 0 if known == 1 else 1))]
            if known
            else [(">=", Version(0, 0, 0))]
        )
    if op == "^":
        if known == 0:
            return [(">=", Version(0, 0, 0))]
        # the first non-zero part may not change (^0.2.3 < 0.3.0, ^0.0.3 < 0.0.4)
        level = next((i for i, p in enumerate(parts[:known]) if p), known - 1)
        return [(">=", low), ("<", _next(parts, level))]
    if op in (">", "<="):
        if known in (1, 2):  # >1.2 means >=1.3.0; <=1.2 means <1.3.0
            upper = _next(parts, known - 1)
            return [(">=", upper)] if op == ">" else [("<", upper)]
        return [(op, low)]
    return [(op, low)]  # >=, <


def parse_range(text: str) -> VersionRange:
    """The range ``text`` states; raises :class:`RangeError` saying what is wrong."""
    if not text.strip():
        raise RangeError("the version range is empty (use * for any version)")
    if len(text) > MAX_RANGE_CHARS:
        raise RangeError(f"the version range has {len(text)} characters; at most {MAX_RANGE_CHARS}")
    alternatives = []
    count = 0
    for alternative in text.split("||"):
        words = alternative.replace(",", " ").split()
        if not words:
            raise RangeError(f"{text!r}: an alternative between || is empty")
        group: list[Comparison] = []
        index = 0
        while index < len(words):
            if index + 2 < len(words) and words[index + 1] == "-":  # a hyphen range
                group += [(">=", _floor(*_partial(words[index])))]
                high, _ = _partial(words[index + 2])
                if any(p is not None for p in high):  # "1.2 - *" has no upper bound
                    group += _comparisons("<=", words[index + 2])
                index += 3
                continue
            word = words[index]
            if set(word) <= set("<>=!^~"):  # an operator written apart: "> 1.2"
                if index + 1 == len(words):
                    raise RangeError(f"{text!r}: {word} is not followed by a version")
                op, version = word, words[index + 1]
                index += 1
            else:
                found = _COMPARISON.fullmatch(word)
                op, version = (found.group(1) or "", found.group(2)) if found else ("", word)
            group += _comparisons(op, version)
            index += 1
        count += len(group)
        if count > MAX_COMPARISONS:
            raise RangeError(f"the version range holds more than {MAX_COMPARISONS} comparisons")
        named_pre = any("-" in w.lstrip("<>=!^~").split("+")[0] for w in words if w != "-")
        alternatives.append((tuple(group), named_pre))
    return VersionRange(text, tuple(alternatives))
