"""Versions and version ranges as Helm reads them (what a chart's ``version`` resolves to)."""

from __future__ import annotations

import pytest

from api.semver import MAX_COMPARISONS, RangeError, Version, parse_range, parse_version

VERSIONS = ["0.2.5", "0.3.0", "1.0.0", "1.2.3", "1.2.9", "1.3.0-rc.1", "1.3.0", "2.0.0"]


def admitted(text: str) -> list[str]:
    wanted = parse_range(text)
    return [v for v in VERSIONS if wanted.admits(parse_version(v) or Version(0, 0, 0))]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("*", ["0.2.5", "0.3.0", "1.0.0", "1.2.3", "1.2.9", "1.3.0", "2.0.0"]),
        ("^1.2", ["1.2.3", "1.2.9", "1.3.0"]),
        ("^0.2", ["0.2.5"]),
        ("~1.2.3", ["1.2.3", "1.2.9"]),
        ("1.2.x", ["1.2.3", "1.2.9"]),
        ("1.x", ["1.0.0", "1.2.3", "1.2.9", "1.3.0"]),
        (">=1.2.0 <1.3", ["1.2.3", "1.2.9"]),
        (">=1.2.0, <1.3", ["1.2.3", "1.2.9"]),
        ("> 1.2.3", ["1.2.9", "1.3.0", "2.0.0"]),
        (">1.2", ["1.3.0", "2.0.0"]),
        ("<=1.2", ["0.2.5", "0.3.0", "1.0.0", "1.2.3", "1.2.9"]),
        ("1.0 - 1.2.3", ["1.0.0", "1.2.3"]),
        ("2.0.0 || 1.0.0", ["1.0.0", "2.0.0"]),
        ("!=1.2.3 ^1.2", ["1.2.9", "1.3.0"]),
        # a pre-release only where the range names one of the same version
        ("1.3.0-rc.1", ["1.3.0-rc.1"]),
        (">=1.3.0-rc.0", ["1.3.0-rc.1", "1.3.0", "2.0.0"]),
    ],
)
def test_a_range_admits_what_helm_would(text: str, expected: list[str]) -> None:
    assert admitted(text) == expected


def test_the_newest_admitted_version_is_chosen_and_an_exact_one_is_known() -> None:
    versions = [v for t in VERSIONS if (v := parse_version(t)) is not None]
    assert str(parse_range("^1.0").newest(versions)) == "1.3.0"
    assert parse_range("^3").newest(versions) is None
    assert str(parse_range("1.2.3").exact()) == "1.2.3"
    assert parse_range("^1.2.3").exact() is None


def test_versions_order_as_semver_says() -> None:
    ordered = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta.2", "1.0.0"]
    parsed = [parse_version(v) for v in ordered]
    assert all(v is not None for v in parsed)
    assert sorted(parsed) == parsed  # type: ignore[type-var]
    assert parse_version("v1.2.3+build.7") == parse_version("1.2.3")
    assert str(parse_version("1.2.3_build.7")) == "1.2.3+build.7"  # as an OCI tag writes it


@pytest.mark.parametrize("text", ["1.2", "01.2.3", "1.2.3-01", "latest", "1.2.3.4", "x" * 300])
def test_what_is_not_a_version_reads_as_none(text: str) -> None:
    assert parse_version(text) is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "empty"),
        ("abc", "'abc' is not a version"),
        (">=", ">= is not followed by a version"),
        ("!=1.2", "!= takes a whole version"),
        ("||", "an alternative between || is empty"),
        ("1" * 300, "at most 256"),
        (" ".join(["1.2.3"] * (MAX_COMPARISONS + 1)), f"more than {MAX_COMPARISONS} comparisons"),
    ],
)
def test_a_range_that_cannot_be_read_says_why(text: str, says: str) -> None:
    with pytest.raises(RangeError, match=says.replace("|", r"\|")):
        parse_range(text)
