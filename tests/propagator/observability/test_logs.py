"""Log lines carry the trace id of the span in progress (and nothing outside spans)."""

from __future__ import annotations

import json
import logging

from opentelemetry.sdk.trace import TracerProvider

from propagator.observability import logs
from propagator.observability.logs import JsonFormatter, TraceIdFilter


def _record() -> logging.LogRecord:
    return logging.LogRecord("propagator", logging.INFO, __file__, 1, "applied", None, None)


def test_log_lines_carry_the_trace_id_inside_a_span() -> None:
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("reconcile") as span:
        trace_id = format(span.get_span_context().trace_id, "032x")
        record = _record()
        TraceIdFilter().filter(record)
        assert record.trace_id == f" trace_id={trace_id}"  # type: ignore[attr-defined]
        assert json.loads(JsonFormatter().format(_record()))["trace_id"] == trace_id
    record = _record()
    TraceIdFilter().filter(record)
    assert record.trace_id == ""  # type: ignore[attr-defined]
    assert "trace_id" not in json.loads(JsonFormatter().format(_record()))


def test_the_http_client_does_not_log_every_request() -> None:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        logs.configure("text", "debug")
        assert not logging.getLogger("httpx").isEnabledFor(logging.INFO)
        assert logging.getLogger("propagator").isEnabledFor(logging.DEBUG)
    finally:
        root.handlers[:], root.level = handlers, level
