"""The chart source of an application: what it accepts and how it names a chart."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from api.charts import ChartSource


def test_a_version_that_is_no_version_or_range_is_refused_naming_it() -> None:
    with pytest.raises(ValidationError) as refused:
        ChartSource(repository="oci://r.example.com/c", name="web", version="latest")
    [error] = refused.value.errors()
    assert error["loc"] == ("version",)
    assert "'latest' is not a version or a version range" in error["msg"]


def test_a_chart_is_named_as_helm_names_it_and_released_as_the_application() -> None:
    oci = ChartSource(repository="oci://r.example.com/charts/", name="web")
    repo = ChartSource(repository="https://charts.example.com", name="web", release_name="site")
    assert oci.reference() == "oci://r.example.com/charts/web"
    assert repo.reference() == "https://charts.example.com web"
    assert oci.release("shop") == "shop"
    assert repo.release("shop") == "site"
    assert oci.version == "*"  # the newest release
