"""A real Prometheus server for the e2e tests (built from the module pinned in
hack/prometheus by hack/prometheus.sh), and a small exporter whose values a test sets."""

from __future__ import annotations

import contextlib
import http.server
import json
import re
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from propagator.observability.dashboards import Dashboard
from tests.e2e.controller import free_port
from tests.e2e.tools import built, terminate
from tests.e2e.waiting import eventually


def prometheus_dir() -> Path:
    """Where prometheus and promtool are (built on first use)."""
    return built("prometheus.sh")


class Exporter:
    """Serves ``/metrics`` with the samples a test sets (name{labels} -> value)."""

    def __init__(self) -> None:
        self.samples: dict[str, float] = {}
        samples = self.samples

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = "".join(f"{k} {v}\n" for k, v in sorted(samples.items())).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Prometheus:
    """A started Prometheus scraping ``targets`` every second and evaluating the alerting
    rules of ``rule_files`` every second."""

    def __init__(
        self, binaries: Path, data: Path, targets: list[str], rule_files: Sequence[Path] = ()
    ) -> None:
        self.port = free_port()
        self.address = f"http://127.0.0.1:{self.port}"
        config = data / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            f"rule_files: {[str(f) for f in rule_files]!r}\n"
            "scrape_configs:\n"
            f"- job_name: test\n  static_configs:\n  - targets: {targets!r}\n"
        )
        self.log = (data / "prometheus.log").open("w")
        self.proc = subprocess.Popen(
            [
                str(binaries / "prometheus"),
                f"--config.file={config}",
                f"--storage.tsdb.path={data / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        eventually(self._ready, "Prometheus ready")

    def _ready(self) -> bool:
        with urllib.request.urlopen(f"{self.address}/-/ready", timeout=2) as answer:
            return bool(answer.status == 200)

    def query(self, promql: str) -> Any:
        url = f"{self.address}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return json.load(answer)
        except urllib.error.HTTPError as exc:
            if exc.code == 400:  # the query is wrong: say which, and why
                raise AssertionError(f"{promql}: {exc.read().decode()}") from None
            raise

    def series(self, promql: str) -> list[dict[str, Any]]:
        """The result of an instant query (a vector: one entry per series)."""
        answer = self.query(promql)
        assert answer["status"] == "success", (promql, answer)
        return list(answer["data"]["result"])

    def label_values(self, selector: str, label: str) -> list[str]:
        """What Grafana's ``label_values(selector, label)`` lists."""
        params = urllib.parse.urlencode({"match[]": selector})
        url = f"{self.address}/api/v1/label/{label}/values?{params}"
        with urllib.request.urlopen(url, timeout=5) as answer:
            return list(json.load(answer)["data"])

    def stop(self) -> None:
        terminate(self.proc)
        self.log.close()


@contextlib.contextmanager
def running(data: Path) -> Iterator[tuple[Prometheus, Exporter]]:
    """A Prometheus scraping a fresh exporter; stopped at the end."""
    exporter = Exporter()
    prometheus = Prometheus(prometheus_dir(), data, [f"127.0.0.1:{exporter.port}"])
    try:
        yield prometheus, exporter
    finally:
        prometheus.stop()
        exporter.close()


def scraped(prometheus: Prometheus, series: str, value: float) -> bool:
    """Whether ``series`` has been scraped with ``value``."""
    result = prometheus.query(series)["data"]["result"]
    return bool(result) and float(result[0]["value"][1]) == value


LABEL_VALUES = re.compile(r"label_values\((?P<selector>.+),\s*(?P<label>\w+)\)")


def substituted(prometheus: Prometheus, dashboard: Dashboard) -> tuple[dict[str, str], list[str]]:
    """Each variable's "All" value as Grafana writes a multi-value regex — ``(a|b)`` — and
    the variables that list nothing."""
    values: dict[str, str] = {}
    empty = []
    for variable in dashboard.variables:
        query = variable.query
        for name, value in values.items():
            query = query.replace(f"${name}", value)
        match = LABEL_VALUES.fullmatch(query)
        assert match is not None, (dashboard.title, variable.query)
        listed = prometheus.label_values(match["selector"], match["label"])
        if not listed:
            empty.append(f"{dashboard.title}: variable ${variable.name}")
        # regex-escaped, then escaped again for PromQL's double-quoted string
        values[variable.name] = "(" + "|".join(promql_regex(v) for v in listed) + ")"
    return values, empty


def promql_regex(value: str) -> str:
    return re.escape(value).replace("\\", "\\\\")


def with_values(expr: str, values: dict[str, str]) -> str:
    """``expr`` with each ``$variable`` replaced by its value."""
    for name, value in values.items():
        expr = expr.replace(f"${name}", value)
    return expr
