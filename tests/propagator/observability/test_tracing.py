"""Where OTLP spans go: the settings over the OTEL_* variables, refused when unsafe, and
header values (often credentials) never in an error."""

from __future__ import annotations

import re

import pytest

from propagator.observability.tracing import otlp_target, parse_headers, service_resource
from propagator.settings import Settings, SettingsError, load_settings


def test_a_bare_address_gets_the_traces_path_and_a_full_one_is_kept() -> None:
    assert otlp_target("https://otel:4318", "", False, {}).endpoint == "https://otel:4318/v1/traces"
    assert otlp_target("https://otel:4318/", "", False, {}).endpoint == (
        "https://otel:4318/v1/traces"
    )
    assert otlp_target("https://otel/custom/path", "", False, {}).endpoint == (
        "https://otel/custom/path"
    )


def test_the_otel_variables_apply_when_the_settings_leave_the_endpoint_open() -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "https://base:4318/",
        "OTEL_EXPORTER_OTLP_HEADERS": "a=1,b=2",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "b=3",
    }
    target = otlp_target("", "", False, env)
    assert target.endpoint == "https://base:4318/v1/traces"
    assert target.headers == {"a": "1", "b": "3"}  # the traces-specific value wins
    env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = "https://traces:4318/x"
    assert otlp_target("", "", False, env).endpoint == "https://traces:4318/x"
    # The settings win over the variables.
    target = otlp_target("https://mine:4318", "c=4", False, env)
    assert (target.endpoint, target.headers) == ("https://mine:4318/v1/traces", {"c": "4"})
    assert otlp_target("", "", True, {}).endpoint == "http://localhost:4318/v1/traces"


@pytest.mark.parametrize(
    ("endpoint", "env", "message"),
    [
        ("http://otel:4318", {}, "PROPAGATOR_OTLP_ENDPOINT: 'http://otel:4318/v1/traces' is plain"),
        ("", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, "OTEL_EXPORTER_OTLP_ENDPOINT: "),
        ("", {}, "the default OTLP endpoint: 'http://localhost:4318/v1/traces' is plain http"),
        ("file:///etc/passwd", {}, "file://… is not allowed"),
        ("grpc://otel:4317", {}, "grpc://… is not allowed"),
        ("https://user:pw@otel:4318", {}, "the URL holds credentials"),
        ("https://otel:99999", {}, "is not a URL"),
    ],
)
def test_unsafe_or_malformed_endpoints_are_refused_naming_the_source(
    endpoint: str, env: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as caught:
        otlp_target(endpoint, "", False, env)
    assert "pw" not in str(caught.value)


def test_headers_are_percent_decoded_and_a_bad_entry_is_named_without_its_text() -> None:
    assert parse_headers("Authorization=Bearer%20s3cret, x-tenant = a ", "S") == {
        "Authorization": "Bearer s3cret",
        "x-tenant": "a",
    }
    for bad in ("Bearer s3cret", "bad name=s3cret", "a=1,=s3cret"):
        with pytest.raises(ValueError, match="PROPAGATOR_OTLP_HEADERS: entry") as caught:
            parse_headers(bad, "PROPAGATOR_OTLP_HEADERS")
        assert "s3cret" not in str(caught.value)


def test_settings_check_the_otlp_target_at_start_and_never_echo_the_headers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PROPAGATOR_TRACE_EXPORTER", "otlp")
    monkeypatch.setenv("PROPAGATOR_OTLP_ENDPOINT", "https://otel:4318")
    monkeypatch.setenv("PROPAGATOR_OTLP_HEADERS", "Bearer s3cret")
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert "PROPAGATOR_OTLP_HEADERS: entry 1" in str(caught.value)
    assert "s3cret" not in str(caught.value)
    monkeypatch.setenv("PROPAGATOR_OTLP_HEADERS", "authorization=Bearer s3cret")
    monkeypatch.setenv("PROPAGATOR_OTLP_ENDPOINT", "http://otel:4318")
    with pytest.raises(SettingsError, match="plain http"):
        load_settings()
    monkeypatch.setenv("PROPAGATOR_OTLP_INSECURE", "true")
    settings = load_settings()
    assert "s3cret" not in repr(settings)
    assert settings.otlp_target().headers == {"authorization": "Bearer s3cret"}
    # Another exporter does not care where OTLP would go.
    monkeypatch.setenv("PROPAGATOR_TRACE_EXPORTER", "console")
    monkeypatch.delenv("PROPAGATOR_OTLP_INSECURE")
    assert Settings().trace_exporter == "console"


def test_the_service_name_is_propagator_unless_the_otel_variables_say_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    assert service_resource().attributes["service.name"] == "propagator"
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attributes,region=eu")
    assert service_resource().attributes["service.name"] == "from-attributes"
    assert service_resource().attributes["region"] == "eu"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "propagator-eu")
    assert service_resource().attributes["service.name"] == "propagator-eu"
