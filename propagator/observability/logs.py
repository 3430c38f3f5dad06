"""Structured logs (JSON or text). Credentials never reach them: nothing logs a kubeconfig,
a Secret's data or a token, connection errors name the server only, and every line goes
through the redaction layer (``kube.redact``) in case a member's answer or an exception
carries one."""

from __future__ import annotations

import json
import logging
import sys
from typing import Literal

from kube.redact import redact
from propagator.observability.tracing import current_trace_id


class TraceIdFilter(logging.Filter):
    """Adds ``trace_id`` to every record: the current span's, or empty outside spans."""

    def filter(self, record: logging.LogRecord) -> bool:
        trace_id = current_trace_id()
        record.trace_id = f" trace_id={trace_id}" if trace_id else ""
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message (and exception)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        if trace_id := current_trace_id():
            entry["trace_id"] = trace_id
        if record.exc_info:
            entry["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(entry)


class TextFormatter(logging.Formatter):
    """``time level logger trace_id: message``, redacted (the traceback too)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s%(trace_id)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def configure(fmt: Literal["json", "text"], level: str) -> None:
    """Send logs to stderr in ``fmt`` at ``level``."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.addFilter(TraceIdFilter())
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The HTTP client logs every request at INFO: thousands a second at fleet scale.
    for noisy in ("httpx", "httpcore", "hpack"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
