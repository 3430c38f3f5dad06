"""Structured logs (JSON or text). Credentials never reach them: nothing logs a kubeconfig,
a Secret's data or a token, and connection errors name the server only."""

from __future__ import annotations

import json
import logging
import sys
from typing import Literal

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
            "message": record.getMessage(),
        }
        if trace_id := current_trace_id():
            entry["trace_id"] = trace_id
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure(fmt: Literal["json", "text"], level: str) -> None:
    """Send logs to stderr in ``fmt`` at ``level``."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.addFilter(TraceIdFilter())
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(name)s%(trace_id)s: %(message)s")
        )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The HTTP client logs every request at INFO: thousands a second at fleet scale.
    for noisy in ("httpx", "httpcore", "hpack"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
