from __future__ import annotations

import argparse

import pytest

from propagator.settings import Settings, SettingsError, add_setting_flags, load_settings


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_setting_flags(parser)
    return parser.parse_args(argv)


def test_defaults() -> None:
    settings = load_settings(parse())
    assert settings.max_concurrency == 10
    assert settings.namespace == "propagator-system"
    assert settings.allow_exec_kubeconfigs is False


def test_flags_override_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROPAGATOR_MAX_CONCURRENCY", "20")
    assert load_settings(parse()).max_concurrency == 20
    assert load_settings(parse("--max-concurrency", "30")).max_concurrency == 30


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["--max-concurrency", "0"],
            "PROPAGATOR_MAX_CONCURRENCY / --max-concurrency = '0': Input should be greater than "
            "or equal to 1",
        ),
        (["--max-concurrency", "501"], "less than or equal to 500"),
        (
            ["--probe-interval-s", "soon"],
            "PROPAGATOR_PROBE_INTERVAL_S / --probe-interval-s = "
            "'soon': Input should be a valid number",
        ),
        (["--log-format", "xml"], "Input should be 'json' or 'text'"),
        (
            ["--workers", "0"],
            "PROPAGATOR_WORKERS / --workers = '0': Input should be greater than or equal to 1",
        ),
        (
            ["--retry-backoff-s", "60", "--retry-max-backoff-s", "5"],
            "PROPAGATOR_RETRY_BACKOFF_S (60) must not exceed PROPAGATOR_RETRY_MAX_BACKOFF_S (5)",
        ),
        (["--resync-period-s", "1"], "greater than or equal to 10"),
        (["--trace-exporter", "jaeger"], "Input should be 'none', 'console' or 'otlp'"),
        (
            ["--denied-kinds", "ClusterRole"],
            "PROPAGATOR_DENIED_KINDS: 'ClusterRole' is not group/Kind",
        ),
        (
            ["--platform-owned-kinds", "LimitRange"],
            "PROPAGATOR_PLATFORM_OWNED_KINDS: 'LimitRange' is not group/Kind",
        ),
        (
            ["--pod-security-default", "strict"],
            "PROPAGATOR_POD_SECURITY_DEFAULT / --pod-security-default = 'strict': "
            "Input should be 'privileged', 'baseline' or 'restricted'",
        ),
        (
            ["--platform-namespaces", "Platform_Team"],
            "PROPAGATOR_PLATFORM_NAMESPACES: 'Platform_Team' is not a namespace name",
        ),
        (
            ["--analysis-addresses", "http://prom:9090,ftp://x"],
            "PROPAGATOR_ANALYSIS_ADDRESSES: 'ftp://x' is not an http(s) address",
        ),
        (
            ["--analysis-addresses", "http://u:p@prom:9090"],
            "is not an http(s) address without credentials",
        ),
        (
            ["--bind-address", "not an address"],
            "PROPAGATOR_BIND_ADDRESS: 'not an address' is not an IP address or a host name",
        ),
        (["--bind-address=-x.example"], "is not an IP address or a host name"),
        (
            ["--metrics-port", "9000", "--health-port", "9000"],
            "PROPAGATOR_METRICS_PORT and PROPAGATOR_HEALTH_PORT are both 9000",
        ),
        (
            ["--scheduler-plugins", "Capacity,Teleport"],
            "PROPAGATOR_SCHEDULER_PLUGINS: unknown scheduler plugin 'Teleport' (known: ",
        ),
    ],
)
def test_bad_values_name_the_setting_value_and_bounds(argv: list[str], says: str) -> None:
    with pytest.raises(SettingsError) as bad:
        load_settings(parse(*argv))
    assert says in str(bad.value)


def test_bad_environment_is_named_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROPAGATOR_PROBE_FAILURE_THRESHOLD", "-2")
    with pytest.raises(
        SettingsError, match="PROPAGATOR_PROBE_FAILURE_THRESHOLD / --probe-failure-threshold = '-2'"
    ):
        load_settings(parse())


@pytest.mark.parametrize("address", ["0.0.0.0", "::", "127.0.0.1", "localhost", "hub.example"])
def test_listen_addresses_and_ports_that_work_are_taken(address: str) -> None:
    settings = load_settings(
        parse("--bind-address", address, "--metrics-port", "0", "--health-port", "0")
    )
    assert settings.bind_address == address


def test_every_setting_has_help() -> None:
    assert all(info.description for info in Settings.model_fields.values())


def test_run_refuses_an_unknown_scheduler_plugin(capsys: pytest.CaptureFixture[str]) -> None:
    from propagator.cli.main import main

    assert main(["run", "--scheduler-plugins", "Capacity,Teleport"]) == 2
    assert "unknown scheduler plugin 'Teleport'" in capsys.readouterr().err


def test_leader_timings_must_nest() -> None:
    with pytest.raises(SettingsError) as bad:
        load_settings(parse("--leader-renew-deadline-s", "20"))
    assert str(bad.value) == (
        "invalid settings: leader election needs PROPAGATOR_LEADER_RETRY_PERIOD_S (2) < "
        "PROPAGATOR_LEADER_RENEW_DEADLINE_S (20) < PROPAGATOR_LEADER_LEASE_DURATION_S (15)"
    )
