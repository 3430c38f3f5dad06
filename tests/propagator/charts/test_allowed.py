"""Which chart sources the platform allows, and over which scheme."""

from __future__ import annotations

import pytest

from propagator.charts.allowed import Allowed, SourceNotAllowed, parse_sources

SOURCES = "oci://Registry.example.com/charts, https://charts.example.com, http://127.0.0.1:5000/dev"


def test_an_oci_or_https_prefix_allows_https_under_its_path_only() -> None:
    allowed = Allowed(parse_sources(SOURCES))
    assert allowed.scheme_for("oci://registry.example.com/charts/web") == "https"
    assert allowed.scheme_for("oci://registry.example.com/charts/team/web") == "https"
    assert allowed.scheme_for("https://charts.example.com/index.yaml") == "https"
    # not a path boundary, another path, another port, another host
    assert allowed.scheme_for("oci://registry.example.com/chartsevil/web") is None
    assert allowed.scheme_for("oci://registry.example.com/other/web") is None
    assert allowed.scheme_for("oci://registry.example.com:444/charts/web") is None
    assert allowed.scheme_for("oci://169.254.169.254/charts/web") is None
    # plain HTTP only where an http:// prefix says so
    assert allowed.scheme_for("http://charts.example.com/index.yaml") is None
    assert allowed.scheme_for("oci://127.0.0.1:5000/dev/web") == "http"
    assert allowed.scheme_for("http://127.0.0.1:5000/dev/web-1.0.0.tgz") == "http"


def test_a_refusal_names_the_address_and_what_is_allowed_without_a_query() -> None:
    allowed = Allowed(parse_sources("oci://registry.example.com/charts"))
    with pytest.raises(SourceNotAllowed) as refused:
        allowed.check("https://10.0.0.1/steal?token=abc", "a redirect to")
    message = str(refused.value)
    assert "a redirect to https://10.0.0.1/steal is not among the chart sources" in message
    assert "(PROPAGATOR_CHART_SOURCES: https://registry.example.com/charts)" in message
    assert "token" not in message
    with pytest.raises(SourceNotAllowed, match="PROPAGATOR_CHART_SOURCES: none"):
        Allowed(()).check("oci://registry.example.com/charts/web", "chart")


@pytest.mark.parametrize(
    "entry",
    [
        "registry.example.com",
        "ftp://x",
        "https://user:pw@x.example.com",
        "https://x/?q=1",
        "https://x/#f",
    ],
)
def test_a_source_that_is_no_plain_address_is_refused_naming_the_setting(entry: str) -> None:
    with pytest.raises(ValueError, match=r"PROPAGATOR_CHART_SOURCES: .* is not a chart source"):
        parse_sources(entry)
