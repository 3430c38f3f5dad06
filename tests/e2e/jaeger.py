"""A real Jaeger (v2, built from the module pinned in hack/jaeger by hack/jaeger.sh) for the
tracing tests: it accepts OTLP/HTTP and answers trace queries, keeping traces in memory."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.controller import free_port
from tests.e2e.tools import built, terminate
from tests.e2e.waiting import eventually


class Jaeger:
    """A started Jaeger on loopback: OTLP/HTTP on ``otlp_address``, queries on
    ``query_address``."""

    def __init__(self, data: Path) -> None:
        otlp, query, query_grpc, health = (free_port() for _ in range(4))
        self.otlp_address = f"http://127.0.0.1:{otlp}"
        self.query_address = f"http://127.0.0.1:{query}"
        config = {
            "service": {
                "extensions": ["jaeger_storage", "jaeger_query", "healthcheckv2"],
                "pipelines": {
                    "traces": {
                        "receivers": ["otlp"],
                        "processors": ["batch"],
                        "exporters": ["jaeger_storage_exporter"],
                    }
                },
                # Its own metrics would listen on a fixed port (8888).
                "telemetry": {"metrics": {"level": "none"}, "logs": {"level": "info"}},
            },
            "extensions": {
                "jaeger_storage": {"backends": {"memory": {"memory": {"max_traces": 10000}}}},
                "jaeger_query": {
                    "storage": {"traces": "memory"},
                    "http": {"endpoint": f"127.0.0.1:{query}"},
                    "grpc": {"endpoint": f"127.0.0.1:{query_grpc}"},
                },
                "healthcheckv2": {"use_v2": True, "http": {"endpoint": f"127.0.0.1:{health}"}},
            },
            "receivers": {"otlp": {"protocols": {"http": {"endpoint": f"127.0.0.1:{otlp}"}}}},
            "processors": {"batch": {"timeout": "200ms"}},
            "exporters": {"jaeger_storage_exporter": {"trace_storage": "memory"}},
        }
        path = data / "jaeger.yaml"
        path.write_text(yaml.safe_dump(config))
        self.log = (data / "jaeger.log").open("w")
        self.proc = subprocess.Popen(
            [str(built("jaeger.sh") / "jaeger"), f"--config=file:{path}"],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        eventually(lambda: self._get("/api/services") is not None, "Jaeger answering queries")

    def _get(self, path: str) -> Any:
        try:
            with urllib.request.urlopen(f"{self.query_address}{path}", timeout=5) as answer:
                return json.load(answer)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def spans(self, trace_id: str) -> list[dict[str, Any]]:
        """The spans Jaeger holds of one trace (empty until they arrive), each with its
        ``service`` name and its ``tags`` as a dict."""
        answer = self._get(f"/api/traces/{trace_id}")
        if not answer or not answer.get("data"):
            return []
        (found,) = answer["data"]
        processes = found["processes"]
        return [
            {
                **span,
                "service": processes[span["processID"]]["serviceName"],
                "tags": {t["key"]: t["value"] for t in span.get("tags", [])},
            }
            for span in found["spans"]
        ]

    def stop(self) -> None:
        terminate(self.proc)
        self.log.close()
