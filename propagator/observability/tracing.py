"""OpenTelemetry traces: a span per reconcile with children for schedule, render and each
cluster's apply. Off by default; ``PROPAGATOR_TRACE_EXPORTER=console`` prints spans."""

from __future__ import annotations

import sys

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter


def configure_tracing(exporter: str) -> None:
    """Install the span exporter named in the settings (``none``: spans are not recorded)."""
    if exporter == "none":
        return
    provider = TracerProvider(resource=Resource.create({"service.name": "propagator"}))
    provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
    trace.set_tracer_provider(provider)


def current_trace_id() -> str | None:
    """The trace id of the span in progress (32 hex digits), if one is being recorded."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None
