"""OpenTelemetry traces: a span per reconcile with children for schedule, render and each
cluster's apply. Off by default; ``PROPAGATOR_TRACE_EXPORTER=console`` prints spans,
``otlp`` sends them over OTLP/HTTP to a collector (Jaeger, Tempo, an OpenTelemetry
Collector), honouring the standard ``OTEL_*`` variables for what the settings leave open."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

DEFAULT_OTLP_ENDPOINT = "http://localhost:4318"
TRACES_PATH = "/v1/traces"
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


@dataclass(frozen=True)
class OtlpTarget:
    """Where spans go over OTLP/HTTP, resolved from the settings and ``OTEL_*``."""

    endpoint: str
    """The full traces URL (``.../v1/traces``)."""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Sent with every export; may hold a credential, so never printed."""


def otlp_target(
    endpoint: str, headers: str, insecure: bool, environ: Mapping[str, str]
) -> OtlpTarget:
    """Resolve the OTLP traces URL: ``endpoint`` (a bare address gets ``/v1/traces``), else
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (used as is), else ``OTEL_EXPORTER_OTLP_ENDPOINT``
    plus ``/v1/traces``, else http://localhost:4318/v1/traces; and the headers (``headers``,
    else the ``OTEL_EXPORTER_OTLP_*HEADERS`` variables). Raises ValueError naming the source
    when the URL is not http(s), carries credentials, or is plain http without ``insecure``;
    a header's value is never quoted."""
    if endpoint:
        source, url = "PROPAGATOR_OTLP_ENDPOINT", _with_traces_path(endpoint)
    elif value := environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        source, url = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", value
    elif value := environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        source, url = "OTEL_EXPORTER_OTLP_ENDPOINT", value.rstrip("/") + TRACES_PATH
    else:
        source, url = "the default OTLP endpoint", DEFAULT_OTLP_ENDPOINT + TRACES_PATH
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise ValueError(f"{source}: {url!r} is not a URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"{source}: {parts.scheme or 'no scheme'}://… is not allowed; an OTLP/HTTP "
            "endpoint is http(s)://host[:port][/path]"
        )
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            f"{source}: the URL holds credentials; put them in PROPAGATOR_OTLP_HEADERS "
            "(an Authorization header, say), which is never logged"
        )
    if parts.scheme == "http" and not insecure:
        raise ValueError(
            f"{source}: {url!r} is plain http (spans and headers unencrypted); use https or "
            "set PROPAGATOR_OTLP_INSECURE=true"
        )
    if headers:
        parsed = parse_headers(headers, "PROPAGATOR_OTLP_HEADERS")
    else:
        parsed = {}
        for name in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"):
            parsed.update(parse_headers(environ.get(name, ""), name))
    return OtlpTarget(url, parsed)


def parse_headers(text: str, source: str) -> dict[str, str]:
    """``key=value,key2=value2`` (values percent-decoded, as the OTLP spec says) as a dict;
    raises ValueError naming ``source`` and the entry's position, never its value."""
    out: dict[str, str] = {}
    for position, entry in enumerate(text.split(","), start=1):
        if not entry.strip():
            continue
        name, sep, value = entry.partition("=")
        name = name.strip()
        if not sep or not _HEADER_NAME.fullmatch(name) or "\n" in value or "\r" in value:
            raise ValueError(
                f"{source}: entry {position} is not name=value with a header name of "
                "letters, digits and -_.!#$%&'*+^`|~ (its text is not shown: it may be a "
                "credential)"
            )
        out[name] = unquote(value.strip())
    return out


def _with_traces_path(url: str) -> str:
    parts = urlsplit(url)
    return url.rstrip("/") + TRACES_PATH if parts.path in ("", "/") else url


def configure_tracing(exporter: str, otlp: OtlpTarget | None = None) -> None:
    """Install the span exporter named in the settings (``none``: spans are not recorded).
    ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_TRACES_SAMPLER`` apply."""
    if exporter == "none":
        return
    span_exporter: SpanExporter
    if exporter == "otlp":
        if otlp is None:
            raise ValueError("the otlp exporter needs its target")
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        span_exporter = OTLPSpanExporter(endpoint=otlp.endpoint, headers=dict(otlp.headers))
    else:
        span_exporter = ConsoleSpanExporter(out=sys.stderr)
    provider = TracerProvider(resource=service_resource())
    provider.add_span_processor(BatchSpanProcessor(span_exporter))
    trace.set_tracer_provider(provider)


def service_resource() -> Resource:
    """Who sends the spans: OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME as set, with
    service.name ``propagator`` when neither names it."""
    resource = Resource.create()  # reads the variables
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "propagator"}))
    return resource


def shutdown_tracing() -> None:
    """Send the spans still buffered (at exit: a short run's spans are not lost)."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider):
        provider.shutdown()


def current_trace_id() -> str | None:
    """The trace id of the span in progress (32 hex digits), if one is being recorded."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


def current_span_context() -> trace.SpanContext | None:
    """The span in progress, to parent work done later in another task (a member sync
    joins the trace of the reconcile that asked for it)."""
    context = trace.get_current_span().get_span_context()
    return context if context.is_valid else None


def parented(parent: trace.SpanContext | None) -> otel_context.Context | None:
    """A context whose current span is ``parent`` (None: a new trace)."""
    if parent is None:
        return None
    return trace.set_span_in_context(trace.NonRecordingSpan(parent))
