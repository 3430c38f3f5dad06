"""The Helm chart's generated files are current, and its schema bounds the settings as
``propagator run`` does."""

from __future__ import annotations

import json
from pathlib import Path

from propagator.cli.chart import CHART_SET, values_schema
from propagator.settings import Settings

CHART = Path(__file__).resolve().parents[1] / "charts" / "propagator"


def test_values_schema_is_current() -> None:
    written = json.loads((CHART / "values.schema.json").read_text())
    assert written == values_schema(), "run `make crds` (it writes values.schema.json too)"


def test_every_setting_the_chart_does_not_set_is_a_value() -> None:
    settings = values_schema()["properties"]["settings"]["properties"]
    assert set(settings) == set(Settings.model_fields) - CHART_SET
    assert settings["max_concurrency"] == {
        "description": Settings.model_fields["max_concurrency"].description,
        "maximum": 500,
        "minimum": 1,
        "type": "integer",
    }
    assert settings["trace_exporter"]["enum"] == ["none", "console"]
