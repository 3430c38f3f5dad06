"""The Helm chart's generated files are current, and its schema bounds the settings as
``propagator run`` does."""

from __future__ import annotations

import json

from propagator.cli.chart import CHART_SET, agent_generated, generated, values_schema
from propagator.observability.dashboards import DASHBOARDS, grafana
from propagator.settings import Settings
from tests.root import ROOT

CHART = ROOT / "charts" / "propagator"
AGENT_CHART = ROOT / "charts" / "propagator-agent"


def test_generated_files_are_current() -> None:
    for name, text in generated().items():
        written = (CHART / name).read_text()
        assert json.loads(written) == json.loads(text), f"{name}: run `make crds`"
    for name, text in agent_generated().items():
        written = (AGENT_CHART / name).read_text()
        assert json.loads(written) == json.loads(text), f"agent chart {name}: run `make crds`"
    on_disk = {p.name for p in (CHART / "dashboards").glob("*.json")}
    assert on_disk == {n.split("/")[1] for n in generated() if n.startswith("dashboards/")}


def test_every_dashboard_has_its_variables_and_queries() -> None:
    for dashboard in DASHBOARDS:
        board = grafana(dashboard)
        names = {v["name"] for v in board["templating"]["list"]}
        assert "datasource" in names
        for panel in board["panels"]:
            assert panel["targets"], panel["title"]
            for target in panel["targets"]:
                used = {
                    n
                    for n in ("cluster", "namespace", "application", "tenant")
                    if f"${n}" in target["expr"]
                }
                assert used <= names, (dashboard.uid, panel["title"], used - names)
    titles = {d.title for d in DASHBOARDS}
    assert titles == {
        "Propagator / Fleet",
        "Propagator / Propagation",
        "Propagator / Scheduling",
        "Propagator / Canary",
        "Propagator / Tenants",
    }


def test_every_setting_the_chart_does_not_set_is_a_value() -> None:
    settings = values_schema()["properties"]["settings"]["properties"]
    assert set(settings) == set(Settings.model_fields) - CHART_SET
    assert settings["max_concurrency"] == {
        "description": Settings.model_fields["max_concurrency"].description,
        "maximum": 500,
        "minimum": 1,
        "type": "integer",
    }
    assert settings["trace_exporter"]["enum"] == ["none", "console", "otlp"]
