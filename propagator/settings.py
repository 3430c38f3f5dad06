"""Controller settings: ``PROPAGATOR_*`` environment variables, overridden by CLI flags.

Every bound is checked at start; a bad value is reported with the setting's environment
variable, its flag, the value given and what is allowed.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
import socket
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from api.common import DNS_LABEL
from api.rollout import (
    DEFAULT_RETRY_ATTEMPTS,
    DEFAULT_RETRY_BACKOFF_S,
    DEFAULT_RETRY_MAX_BACKOFF_S,
    MAX_CONCURRENCY_CEILING,
    MAX_RETRY_ATTEMPTS,
)
from kube.hub import SERVICE_ACCOUNT_DIR
from kube.session import ConnectionOptions
from propagator.charts.allowed import Allowed, parse_sources
from propagator.charts.fetch import ChartFetcher
from propagator.observability.tracing import OtlpTarget, otlp_target
from propagator.runtime.eventloop import DEFAULT as DEFAULT_EVENT_LOOP
from propagator.runtime.eventloop import EventLoop
from propagator.runtime.shardplan import REPLICA_NAME
from propagator.scheduler.pluginregistry import DEFAULT_PLUGINS, build_profile
from propagator.tenancy.podsecurity import Level as PodSecurityLevel
from propagator.tenancy.policy import (
    DEFAULT_DENIED_KINDS,
    DEFAULT_DENIED_NAMESPACES,
    DEFAULT_PLATFORM_OWNED_KINDS,
    GroupKind,
    Platform,
    parse_group_kind,
)
from propagator.work.table import SyncPolicy

ANALYSIS_ADDRESS = re.compile(r"https?://[^/@\s]+(/[^\s]*)?")

ENV_PREFIX = "PROPAGATOR_"
SECRET_SETTINGS = frozenset({"otlp_headers"})
"""Settings whose value is never echoed in an error."""


class SettingsError(ValueError):
    """Settings that cannot be used; the message names each bad setting."""


class Settings(BaseSettings):
    """Everything an operator can tune. Field docs become ``--help`` texts."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="ignore", use_attribute_docstrings=True
    )

    hub_kubeconfig: Path | None = None
    """Kubeconfig of the hub (default: in-cluster config, else $KUBECONFIG or ~/.kube/config)."""
    hub_context: str | None = None
    """Context of the hub kubeconfig to use (default: its current context)."""
    service_account_dir: Path = SERVICE_ACCOUNT_DIR
    """In a pod: where the service-account token and CA are mounted (re-read as the
    kubelet rotates them)."""
    namespace: str = Field(
        "propagator-system", min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
    )
    """Namespace of the controller, where the member kubeconfig Secrets live."""
    allow_exec_kubeconfigs: bool = False
    """Accept member kubeconfigs that run a command (exec); off: they come from Secrets."""
    member_connect_timeout_s: float = Field(5.0, gt=0, le=60)
    """Seconds to connect to a member API server."""
    member_read_timeout_s: float = Field(30.0, gt=0, le=600)
    """Seconds to wait for a member API server's answer."""
    probe_interval_s: float = Field(10.0, ge=0.5, le=600)
    """Seconds between two probes of a member (/readyz, or an HTTP/2 PING: see
    probe_readyz_interval_s)."""
    probe_readyz_interval_s: float = Field(30.0, ge=0, le=3600)
    """Seconds between two /readyz calls to a Ready member; the probes between are
    HTTP/2 PINGs on its connection, and any failed probe brings /readyz back on every
    probe until the member is Ready again (0: /readyz on every probe)."""
    probe_timeout_s: float = Field(5.0, gt=0, le=60)
    """Seconds a member has to answer a probe."""
    probe_failure_threshold: int = Field(3, ge=1, le=100)
    """Consecutive failed probes before a member is NotReady and tainted not-ready."""
    probe_success_threshold: int = Field(2, ge=1, le=100)
    """Consecutive good probes before a NotReady member is Ready again."""
    capacity_status_interval_s: float = Field(10.0, ge=0, le=600)
    """Seconds between two writes of a MemberCluster's status when only its capacity
    (nodes, resources: every pod started or gone changes it) changed, and so how old the
    capacity scheduling reads may be; readiness and discovery are written at once, with
    the capacity of the moment (0: every change at once)."""
    unreachable_after_s: float = Field(40.0, ge=0, le=3600)
    """Seconds NotReady before a member is also tainted unreachable."""
    max_concurrency: int = Field(10, ge=1, le=MAX_CONCURRENCY_CEILING)
    """Member syncs (one application on one cluster) running at once, across all
    applications; also the member probes running at once among members that answered
    their last probe, and as many among the others."""
    workers: int = Field(4, ge=1, le=64)
    """Applications planned (resolved, scheduled, rendered) at once."""
    member_workers: int = Field(4, ge=1, le=64)
    """Applications synced at once on one member cluster (each member has its own, so a
    slow member holds only these)."""
    retry_attempts: int = Field(DEFAULT_RETRY_ATTEMPTS, ge=0, le=MAX_RETRY_ATTEMPTS)
    """Retries of a retryable failure on one cluster, for applications that leave
    spec.rollout.retry.attempts unset."""
    retry_backoff_s: float = Field(DEFAULT_RETRY_BACKOFF_S, gt=0, le=600)
    """Seconds before the first retry (doubling, with jitter), where the application leaves
    spec.rollout.retry.backoff unset."""
    retry_max_backoff_s: float = Field(DEFAULT_RETRY_MAX_BACKOFF_S, gt=0, le=3600)
    """Longest wait between two retries, where spec.rollout.retry.maxBackoff is unset."""
    cluster_timeout_s: float = Field(30.0, gt=0, le=3600)
    """Seconds one cluster's apply may take per attempt, where spec.rollout.timeoutSeconds
    is unset."""
    circuit_failure_threshold: int = Field(5, ge=1, le=100)
    """Consecutive failed calls to a member before its circuit opens (calls stop)."""
    circuit_cool_down_s: float = Field(30.0, gt=0, le=3600)
    """Seconds an open circuit waits before one trial call."""
    render_timeout_s: float = Field(5.0, gt=0, le=60)
    """Seconds an application's templates may take to render for all its clusters."""
    render_max_bytes: int = Field(4 << 20, ge=1024, le=64 << 20)
    """Bytes (as JSON) the rendered objects of one application may take, all clusters."""
    chart_sources: str = Field("", max_length=8192)
    """Where Helm charts may come from (comma-separated address prefixes such as
    oci://registry.example.com/charts or https://charts.example.com; an ``http://`` prefix
    allows plain HTTP there; empty: none, and every chart is refused saying so): the
    controller fetches what tenants name, so only from these."""
    chart_ca_file: str = Field("", max_length=4096)
    """A PEM file of the certificate authorities chart sources are verified with (empty:
    the system's)."""
    chart_max_bytes: int = Field(4 << 20, ge=1024, le=64 << 20)
    """Bytes one chart archive may have (as fetched, compressed)."""
    chart_cache_bytes: int = Field(256 << 20, ge=1 << 20, le=8 << 30)
    """Bytes of chart archives kept in memory (the least recently used go first)."""
    chart_fetch_timeout_s: float = Field(30.0, gt=0, le=600)
    """Seconds finding or fetching one chart may take before it is stopped (retried)."""
    chart_resolve_interval_s: float = Field(60.0, ge=1, le=86400)
    """Seconds a chart's version (range) and tag stay resolved before the registry is asked
    again: an application with charts is planned again this often, and follows a moved tag
    or a new version in its range then."""
    chart_renderer: str = Field("chartrender", min_length=1, max_length=4096)
    """The program that renders charts as ``helm template`` does (``chartrender``, built
    from hack/chartrender with Helm's packages; a path, or a name on PATH)."""
    rule_time_limit_s: float = Field(0.05, ge=0.001, le=1)
    """Processor seconds one object's interpreter rules (health, status) may take; a kind
    whose rules take longer reads Unknown and is not evaluated for ``rule_pause_s``."""
    rule_pause_s: float = Field(60.0, ge=1, le=3600)
    """Seconds a kind whose rules went over ``rule_time_limit_s`` is not evaluated."""
    resync_period_s: float = Field(300.0, ge=10, le=86400)
    """Every application is reconciled at least this often, and what is applied on the
    members is read back and compared (drift is corrected)."""
    requeue_max_delay_s: float = Field(300.0, ge=1, le=3600)
    """Longest wait before a failed reconcile is retried (it doubles from 0.5s)."""
    trace_exporter: Literal["none", "console", "otlp"] = "none"
    """OpenTelemetry span exporter: none, console (spans as JSON on stderr) or otlp
    (OTLP/HTTP to PROPAGATOR_OTLP_ENDPOINT)."""
    otlp_endpoint: str = Field("", max_length=2048)
    """OTLP/HTTP collector, e.g. https://otel-collector.monitoring:4318 (/v1/traces is added
    to a bare address); empty: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT
    or http://localhost:4318."""
    otlp_headers: SecretStr = Field(SecretStr(""))
    """Headers sent with every span export, name=value pairs separated by commas (as in
    OTEL_EXPORTER_OTLP_HEADERS); often a credential, so never logged; empty: the
    OTEL_EXPORTER_OTLP_HEADERS variables."""
    otlp_insecure: bool = False
    """Allow a plain http:// OTLP endpoint (spans and headers travel unencrypted)."""
    scheduler_plugins: str = Field(DEFAULT_PLUGINS, min_length=1)
    """Scheduler plugins: filters in order, then scores as Name=weight (entry point group
    propagator.scheduler.plugins)."""
    snapshot_stale_after_s: float = Field(30.0, gt=0, le=3600)
    """A fleet snapshot older than this makes the scheduler scan every cluster."""
    snapshot_fresh_for_s: float = Field(10.0, ge=0, le=3600)
    """Seconds of fresh snapshots before the scheduler trusts its indexes again."""
    leader_elect: bool = True
    """Elect one active controller through a Lease in the controller namespace (when
    ``sharding`` is off)."""
    sharding: bool = False
    """Divide the work among every replica running (applications by tenant or name,
    member probes by member), through Leases in the controller namespace, instead of
    one leader doing it all. Uses the leader_* timings."""
    replica_name: str = Field("", max_length=63)
    """This replica's name among the shards (default: the host's; the chart sets the
    pod's); its Lease is propagator-replica-<name>. Lower-case letters, digits and
    '-'."""
    leader_lease_duration_s: float = Field(15.0, gt=0, le=600)
    """How long a leader's Lease holds without renewal before another may take it."""
    leader_renew_deadline_s: float = Field(10.0, gt=0, le=600)
    """A leader that cannot renew for this long stops (less than the lease duration)."""
    leader_retry_period_s: float = Field(2.0, gt=0, le=60)
    """Seconds between two attempts to take or renew the Lease."""
    bind_address: str = "0.0.0.0"
    """Address the metrics and health servers listen on."""
    metrics_port: int = Field(8080, ge=0, le=65535)
    """Port of /metrics (0: off)."""
    health_port: int = Field(8081, ge=0, le=65535)
    """Port of /healthz and /readyz (0: off)."""
    liveness_stall_s: float = Field(30.0, ge=1, le=600)
    """/healthz fails when the controller's event loop has not run for this long."""
    hub_lost_after_s: float = Field(120.0, ge=5, le=3600)
    """/healthz fails when the hub has not answered for this long."""
    event_loop: EventLoop = DEFAULT_EVENT_LOOP
    """Event loop of the controller: uvloop (transports and TLS in C: about a third less
    CPU at rest, no 256 KiB buffer per member connection) or asyncio (Python's own)."""
    log_format: Literal["json", "text"] = "text"
    """Log format: json or text."""
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    """Log level."""
    platform_namespaces: str = Field("propagator-system", max_length=4096)
    """Hub namespaces (comma-separated) whose applications may propagate anything, the
    denied kinds and namespaces included."""
    denied_kinds: str = Field(",".join(DEFAULT_DENIED_KINDS), max_length=8192)
    """Kinds (comma-separated group/Kind, core/Kind, group/* for a whole group) that only
    platform namespaces may propagate."""
    denied_namespaces: str = Field(",".join(DEFAULT_DENIED_NAMESPACES), max_length=4096)
    """Member namespaces (comma-separated, * and ? patterns) only platform namespaces may
    write."""
    platform_owned_kinds: str = Field(",".join(DEFAULT_PLATFORM_OWNED_KINDS), max_length=8192)
    """Kinds inside tenant namespaces (comma-separated group/Kind, core/Kind, group/*) that
    only platform namespaces may propagate: a TenantQuota's quota and namespace defaults
    stand in for them."""
    pod_security_default: PodSecurityLevel = "baseline"
    """Pod Security level (privileged, baseline, restricted) of tenants whose TenantQuota
    states none, and of applications that belong to no tenant."""
    pod_security_privileged: bool = False
    """Whether a TenantQuota may give its tenant the privileged Pod Security level
    (otherwise such a tenant gets the default)."""

    analysis_addresses: str = Field("", max_length=8192)
    """Prometheus servers canary metric checks may query (comma-separated address
    prefixes such as http://prometheus.monitoring:9090; empty: none, and every metric
    check fails saying so): the controller makes these requests, so tenants must not
    point it anywhere else."""

    @model_validator(mode="after")
    def _listeners(self) -> Settings:
        if not _is_host(self.bind_address):
            raise ValueError(
                f"PROPAGATOR_BIND_ADDRESS: {self.bind_address[:100]!r} is not an IP address "
                "or a host name (such as 0.0.0.0, ::, 127.0.0.1 or localhost)"
            )
        if self.metrics_port and self.metrics_port == self.health_port:
            raise ValueError(
                f"PROPAGATOR_METRICS_PORT and PROPAGATOR_HEALTH_PORT are both {self.health_port}: "
                "the metrics and health servers need a port each (0 turns one off)"
            )
        return self

    @model_validator(mode="after")
    def _plugins(self) -> Settings:
        build_profile(self.scheduler_plugins)  # raises naming the setting and the plugin
        return self

    @model_validator(mode="after")
    def _chart_sources(self) -> Settings:
        parse_sources(self.chart_sources)  # raises naming the setting and the bad entry
        if self.chart_ca_file and not Path(self.chart_ca_file).is_file():
            raise ValueError(
                f"PROPAGATOR_CHART_CA_FILE: {self.chart_ca_file[:200]!r} is not a readable file"
            )
        return self

    def chart_fetcher(self) -> ChartFetcher:
        """Fetches charts from the allowed sources, within the settings' bounds."""
        return ChartFetcher(
            Allowed(parse_sources(self.chart_sources)),
            timeout_s=self.chart_fetch_timeout_s,
            max_bytes=self.chart_max_bytes,
            ca_file=self.chart_ca_file or None,
        )

    @model_validator(mode="after")
    def _analysis_addresses(self) -> Settings:
        self.analysis_address_list()  # raises naming the setting and the bad entry
        return self

    def analysis_address_list(self) -> list[str]:
        """The allowed Prometheus address prefixes."""
        out = []
        for entry in _entries(self.analysis_addresses):
            if not ANALYSIS_ADDRESS.fullmatch(entry):
                raise ValueError(
                    f"PROPAGATOR_ANALYSIS_ADDRESSES: {entry!r} is not an http(s) address "
                    "without credentials, such as http://prometheus.monitoring:9090"
                )
            out.append(entry)
        return out

    @model_validator(mode="after")
    def _otlp(self) -> Settings:
        if self.trace_exporter == "otlp":
            self.otlp_target()  # raises naming the setting or variable at fault
        return self

    def otlp_target(self) -> OtlpTarget:
        """Where the otlp exporter sends spans (the settings over ``OTEL_*``)."""
        return otlp_target(
            self.otlp_endpoint,
            self.otlp_headers.get_secret_value(),
            self.otlp_insecure,
            os.environ,
        )

    @model_validator(mode="after")
    def _retry_backoff(self) -> Settings:
        if self.retry_backoff_s > self.retry_max_backoff_s:
            raise ValueError(
                f"PROPAGATOR_RETRY_BACKOFF_S ({self.retry_backoff_s:g}) must not exceed "
                f"PROPAGATOR_RETRY_MAX_BACKOFF_S ({self.retry_max_backoff_s:g})"
            )
        return self

    @model_validator(mode="after")
    def _leader_timing(self) -> Settings:
        if (
            not self.leader_retry_period_s
            < self.leader_renew_deadline_s
            < (self.leader_lease_duration_s)
        ):
            raise ValueError(
                "leader election needs PROPAGATOR_LEADER_RETRY_PERIOD_S "
                f"({self.leader_retry_period_s:g}) < PROPAGATOR_LEADER_RENEW_DEADLINE_S "
                f"({self.leader_renew_deadline_s:g}) < PROPAGATOR_LEADER_LEASE_DURATION_S "
                f"({self.leader_lease_duration_s:g})"
            )
        return self

    @model_validator(mode="after")
    def _replica_name(self) -> Settings:
        if self.replica_name and not REPLICA_NAME.match(self.replica_name):
            raise ValueError(
                f"PROPAGATOR_REPLICA_NAME: {self.replica_name!r}; 1 to 63 lower-case "
                "letters, digits and '-', starting and ending with a letter or digit"
            )
        return self

    def replica(self) -> str:
        """This replica's name among the shards: ``replica_name``, or the host's."""
        if self.replica_name:
            return self.replica_name
        host = socket.gethostname().lower().split(".", 1)[0][:63].strip("-")
        if not REPLICA_NAME.match(host):
            raise SettingsError(
                f"PROPAGATOR_REPLICA_NAME is not set and the host name {host!r} cannot name "
                "a replica (lower-case letters, digits and '-'): set it"
            )
        return host

    @model_validator(mode="after")
    def _platform_rules(self) -> Settings:
        self.platform()  # raises naming the setting and the bad entry
        return self

    def sync_defaults(self) -> SyncPolicy:
        """The member sync knobs of an application that leaves its rollout's unset, and the
        cap on its concurrency."""
        return SyncPolicy(
            attempts=self.retry_attempts,
            backoff_s=self.retry_backoff_s,
            max_backoff_s=self.retry_max_backoff_s,
            timeout_s=self.cluster_timeout_s,
            max_concurrency=self.max_concurrency,
        )

    def platform(self) -> Platform:
        """The rules only platform namespaces are above."""
        namespaces = _entries(self.platform_namespaces)
        for name in namespaces:
            if not DNS_LABEL.fullmatch(name):
                raise ValueError(
                    f"PROPAGATOR_PLATFORM_NAMESPACES: {name!r} is not a namespace name "
                    "(a DNS label: lower-case letters, digits and '-')"
                )
        return Platform(
            namespaces=frozenset(namespaces),
            denied_kinds=_group_kinds("PROPAGATOR_DENIED_KINDS", self.denied_kinds),
            denied_namespaces=tuple(_entries(self.denied_namespaces)),
            owned_kinds=_group_kinds("PROPAGATOR_PLATFORM_OWNED_KINDS", self.platform_owned_kinds),
            pod_security_default=self.pod_security_default,
            privileged_allowed=self.pod_security_privileged,
        )

    def member_connection(self) -> ConnectionOptions:
        return ConnectionOptions(
            connect_timeout_s=self.member_connect_timeout_s,
            read_timeout_s=self.member_read_timeout_s,
        )


_HOST_NAME = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)


def _is_host(text: str) -> bool:
    """An IP address (v4 or v6) or a host name (RFC 1123)."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return bool(_HOST_NAME.fullmatch(text))
    return True


def _entries(text: str) -> list[str]:
    return [e.strip() for e in text.split(",") if e.strip()]


def _group_kinds(setting: str, text: str) -> frozenset[GroupKind]:
    """The group/Kind entries of a setting; raises naming the setting and the bad entry."""
    kinds = set()
    for entry in _entries(text):
        try:
            kinds.add(parse_group_kind(entry))
        except ValueError as exc:
            raise ValueError(f"{setting}: {exc}") from None
    return frozenset(kinds)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_setting_flags(
    parser: argparse.ArgumentParser,
    names: list[str] | None = None,
    settings: type[Settings] = Settings,
) -> None:
    """Add a flag per setting of ``settings`` (all, or ``names``); unset flags leave
    env/defaults alone."""
    group = parser.add_argument_group("settings (flags override PROPAGATOR_* variables)")
    for name, info in settings.model_fields.items():
        if names is not None and name not in names:
            continue
        env = ENV_PREFIX + name.upper()
        help_text = f"{info.description} [{env}, default: {info.default}]"
        if info.annotation is bool:
            group.add_argument(
                _flag(name),
                dest=f"setting_{name}",
                action="store_true",
                default=None,
                help=help_text,
            )
        else:
            group.add_argument(
                _flag(name),
                dest=f"setting_{name}",
                default=None,
                metavar=name.upper(),
                help=help_text,
            )


def load_settings(
    args: argparse.Namespace | None = None, settings: type[Settings] = Settings
) -> Settings:
    """Settings (of class ``settings``) from the environment with flags on top; raises
    SettingsError naming each bad setting (variable and flag), its value and what is
    allowed."""
    overrides: dict[str, Any] = {}
    if args is not None:
        for name in settings.model_fields:
            value = getattr(args, f"setting_{name}", None)
            if value is not None:
                overrides[name] = value
    try:
        return settings(**overrides)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            if not error["loc"]:  # a rule across settings: its message names them
                problems.append(str(error["msg"]).removeprefix("Value error, "))
                continue
            name = str(error["loc"][0])
            value = "(hidden)" if name in SECRET_SETTINGS else repr(error["input"])
            problems.append(f"{ENV_PREFIX}{name.upper()} / {_flag(name)} = {value}: {error['msg']}")
        raise SettingsError("invalid settings: " + "; ".join(problems)) from exc
