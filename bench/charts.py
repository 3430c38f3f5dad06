"""Helm charts as a source: a chart of 30 objects (10 Deployments, 10 Services, 10
ConfigMaps) in a real OCI registry (hack/registry.sh) rendered for 100 clusters by the
chart renderer (Helm's packages: hack/chartrender) in the render worker, as the controller
renders it:

- pull: resolving the version range and fetching the archive (a fresh store), once;
- per cluster, uncached: one cluster's render (its own values: one renderer run) at a time,
  p50/p99 over the 100 clusters;
- 100 clusters in one render (as a plan renders them: a few renderer runs at once, each
  rendering many clusters),
  each with values of its own, then again with the same inputs (kept in the worker);
- the baseline in the same run: the same 30 objects as inline manifests, templated per
  cluster (Jinja2 in the same worker), 100 clusters in one render;
- with ``--fleet``: create → Applied on a local hub and three members, the chart against
  the same objects inline (the hub polled every 10 ms).

    python -m bench.charts [--quick] [--fleet] [--json]
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from kubernetes import client as k8s

from api.charts import ChartSource
from bench.report import arguments, emit, percentile
from propagator.charts.allowed import Allowed, parse_sources
from propagator.charts.fetch import ChartFetcher
from propagator.charts.releases import ChartReleases
from propagator.charts.store import ChartStore
from propagator.render.helm import ChartRenderer
from propagator.render.manifests import ApplicationRef
from propagator.render.worker import RenderTarget, render_bounded, warm_up
from tests.e2e.charts.registry import Helm, Registry, registry, web_chart
from tests.e2e.tools import built

CLUSTERS = 100
TRIPLES = 9
"""Deployment, Service and ConfigMap sets the chart adds to web_chart's own three."""
MORE = (
    """
{{- range $i := until TRIPLES }}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: "{{ $.Release.Name }}-{{ $i }}"}
spec:
  replicas: {{ $.Values.replicaCount }}
  selector: {matchLabels: {app: "{{ $.Release.Name }}-{{ $i }}"}}
  template:
    metadata: {labels: {app: "{{ $.Release.Name }}-{{ $i }}"}}
    spec:
      containers:
        - name: web
          image: {{ $.Values.image }}
          env: [{name: CLUSTER, value: {{ $.Values.cluster | quote }}}]
          resources: {requests: {cpu: 10m, memory: 16Mi}}
---
apiVersion: v1
kind: Service
metadata: {name: "{{ $.Release.Name }}-{{ $i }}"}
spec:
  selector: {app: "{{ $.Release.Name }}-{{ $i }}"}
  ports: [{port: 80}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: "{{ $.Release.Name }}-{{ $i }}-config"}
data: {cluster: {{ $.Values.cluster | quote }}, index: "{{ $i }}"}
{{- end }}
"""
).replace("TRIPLES", str(TRIPLES))
REF = ApplicationRef("web", "bench")
VALUES = "cluster: '{{ cluster.name }}'\nreplicaCount: 1\n"


def _targets(round_: int) -> list[RenderTarget]:
    return [
        RenderTarget(f"member-{round_}-{i}", kubernetes_version="v1.34.1") for i in range(CLUSTERS)
    ]


async def _timed_render(
    objects: list[Any], targets: list[RenderTarget], renderer: ChartRenderer
) -> float:
    start = time.perf_counter()
    await render_bounded(
        objects, [], targets, REF, timeout_s=60, max_bytes=64 << 20, renderer=renderer
    )
    return time.perf_counter() - start


async def _pull(public: Registry) -> tuple[list[Any], float]:
    """The chart release, materialized (its version resolved, its archive fetched and
    checked by a fresh store), and how long that took."""
    source = ChartSource(repository=public.charts, name="bench", version="^1.0", values=VALUES)
    fetcher = ChartFetcher(Allowed(parse_sources(public.allowed)))
    charts = ChartReleases(ChartStore(fetcher))
    start = time.perf_counter()
    # No valuesFrom nor credentials: nothing is read from a hub.
    releases, _ = await charts.releases([source], "web", "bench", None)  # type: ignore[arg-type]
    materialized = await charts.materialize(releases, "bench", None)  # type: ignore[arg-type]
    took = time.perf_counter() - start
    await fetcher.aclose()
    return list(materialized), took


async def _inline(objects: list[Any], renderer: ChartRenderer) -> list[dict[str, Any]]:
    """The chart's objects as inline manifests templated per cluster as the chart is (its
    render for one cluster, the cluster's name made a template again)."""
    target = RenderTarget("member-x")
    rendered = await render_bounded(
        objects, [], [target], REF, timeout_s=60, max_bytes=64 << 20, renderer=renderer
    )
    out = []
    for obj in rendered["member-x"]:
        obj["metadata"].pop("annotations", None)
        out.append(_templated(obj))
    return out


def _templated(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("member-x", "{{ cluster.name }}")
    if isinstance(value, dict):
        return {k: _templated(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_templated(v) for v in value]
    return value


async def render_figures(
    public: Registry, renderer: ChartRenderer, quick: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The render rows, and the chart's objects as inline manifests."""
    await warm_up()
    objects, pull_s = await _pull(public)
    count = CLUSTERS // 4 if quick else CLUSTERS
    per_cluster = [await _timed_render(objects, [t], renderer) for t in _targets(1)[:count]]
    together = await _timed_render(objects, _targets(2), renderer)
    kept = await _timed_render(objects, _targets(2), renderer)
    inline = await _inline(objects, renderer)
    baseline = await _timed_render(inline, _targets(4), renderer)
    objects_per_cluster = len(inline)
    ms = sorted(s * 1000 for s in per_cluster)
    rows = [
        {
            "what": "pull: resolve ^1.0, fetch and check the archive",
            "samples": 1,
            "p50_ms": round(pull_s * 1000, 1),
            "p99_ms": round(pull_s * 1000, 1),
            "per_cluster_ms": None,
            "ratio": None,
        },
        {
            "what": f"one cluster at a time, uncached ({objects_per_cluster} objects)",
            "samples": len(ms),
            "p50_ms": round(percentile(ms, 50), 1),
            "p99_ms": round(percentile(ms, 99), 1),
            "per_cluster_ms": round(statistics.mean(ms), 1),
            "ratio": None,
        },
        _once(f"{CLUSTERS} clusters in one render, each its own values", together, baseline),
        _once(f"{CLUSTERS} clusters again, same inputs (kept in the worker)", kept, baseline),
        _once(
            f"baseline: the same objects inline (Jinja2), {CLUSTERS} clusters", baseline, baseline
        ),
    ]
    return rows, inline


def _once(what: str, seconds: float, baseline: float) -> dict[str, Any]:
    """A row of one render of all the clusters, against the baseline's."""
    return {
        "what": what,
        "samples": 1,
        "p50_ms": round(seconds * 1000, 1),
        "p99_ms": round(seconds * 1000, 1),
        "per_cluster_ms": round(seconds * 1000 / CLUSTERS, 2),
        "ratio": round(seconds / baseline, 1),
    }


def applied_figures(public: Registry, renderer: str, count: int, inline: list[Any]) -> list[Any]:
    """Create → Applied on a local hub and three members: the chart against inline."""
    from bench.propagation import Controller, _setup, _wait
    from fleet import local
    from fleet.local import cluster as local_cluster
    from tests.e2e.manifests import GROUP, PLURAL, VERSION, application

    def applied(api: Any, namespace: str, name: str) -> bool:
        found: Any = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        conditions = (found.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Applied" and c["status"] == "True" for c in conditions)

    times: dict[str, list[float]] = {"chart": [], "inline": []}
    with tempfile.TemporaryDirectory(prefix="bench-charts-") as tmp:
        state = anyio.run(local.up, Path(tmp), local.testbin_dir(), local.FleetOptions(members=3))
        hub = local_cluster.api_client(state.hub)
        controller = Controller(state.hub.kubeconfig, Path(tmp) / "controller.log")
        controller.env.update(
            {"PROPAGATOR_CHART_SOURCES": public.allowed, "PROPAGATOR_CHART_RENDERER": renderer}
        )
        try:
            _setup(state, hub)
            controller.start()
            api = k8s.CustomObjectsApi(hub)
            namespace = "bench"
            k8s.CoreV1Api(hub).create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]
            for i in range(count):
                for kind in ("chart", "inline"):
                    name = f"{kind}-{i}"
                    app = application(name, namespace, inline, "bench")
                    if kind == "chart":
                        app["spec"]["resources"] = {
                            "charts": [
                                {
                                    "repository": public.charts,
                                    "name": "bench",
                                    "values": VALUES,
                                    "releaseName": name,
                                }
                            ]
                        }
                    else:
                        app["spec"]["resources"]["manifests"] = _renamed(inline, name)
                    start = time.perf_counter()
                    api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, app)
                    _wait(lambda n=name: applied(api, namespace, n), f"{name} Applied")
                    times[kind].append(time.perf_counter() - start)
        finally:
            controller.stop()
            hub.close()
            local.down(state)
    base = sorted(s * 1000 for s in times["inline"])
    rows = []
    for kind in ("chart", "inline"):
        ms = sorted(s * 1000 for s in times[kind])
        rows.append(
            {
                "what": f"create -> Applied on 3 members, {kind}",
                "samples": len(ms),
                "p50_ms": round(percentile(ms, 50), 1),
                "p99_ms": round(percentile(ms, 99), 1),
                "per_cluster_ms": None,
                "ratio": round(percentile(ms, 50) / percentile(base, 50), 2),
            }
        )
    return rows


def _renamed(value: Any, name: str) -> Any:
    """``value`` with the release name ``web`` in its names made ``name``."""
    if isinstance(value, str):
        return value.replace("web", name)
    if isinstance(value, dict):
        return {k: _renamed(v, name) for k, v in value.items()}
    if isinstance(value, list):
        return [_renamed(v, name) for v in value]
    return value


def main() -> None:
    def more(parser: Any) -> None:
        parser.add_argument(
            "--fleet", action="store_true", help="also create -> Applied on a local fleet"
        )

    args = arguments(__doc__, "25 clusters one at a time, 2 applications on the fleet", more)
    with (
        tempfile.TemporaryDirectory(prefix="bench-charts-") as tmp,
        registry(Path(tmp), tls=False) as public,
    ):
        helm = Helm(Path(tmp))
        chart = web_chart(Path(tmp), "bench", "1.0.0", "nginx:1.27", **{"more.yaml": MORE})
        helm.push(chart, public)
        program = str(built("chartrender.sh") / "chartrender")
        run = ChartRenderer(program, 4 << 20)
        rows, inline = anyio.run(render_figures, public, run, args.quick)
        if args.fleet:
            rows += applied_figures(public, program, 2 if args.quick else 10, inline)
    emit(
        rows,
        [
            ("what", "what"),
            ("samples", "samples"),
            ("p50_ms", "p50 ms"),
            ("p99_ms", "p99 ms"),
            ("per_cluster_ms", "per cluster ms"),
            ("ratio", "ratio to the baseline"),
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
