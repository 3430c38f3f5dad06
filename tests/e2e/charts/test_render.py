"""A chart rendered by the chart renderer (Helm's packages) in the bounded render worker
(no cluster needed): per cluster, and every bound a hostile chart could break ends in a
RenderError that says which."""

from __future__ import annotations

import base64
import io
import tarfile
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from propagator.render.helm import ChartRenderer
from propagator.render.manifests import ApplicationRef, RenderError
from propagator.render.worker import RenderTarget, render_bounded
from tests.e2e.charts.registry import web_chart
from tests.e2e.tools import built

APP = ApplicationRef("web", "shop")


def release(chart: Path, values: str = "") -> dict[str, Any]:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        tar.add(chart, arcname=chart.name.rsplit("-", 1)[0])
    return {
        "apiVersion": "propagator.io/v1alpha1",
        "kind": "ChartRelease",
        "metadata": {"name": "web"},
        "chart": {"name": chart.name.rsplit("-", 1)[0], "version": "1.0.0"},
        "namespace": "shop",
        "values": values,
        "valuesFiles": ["replicaCount: 2\n"],
        "archive": base64.b64encode(raw.getvalue()).decode(),
    }


def render(objects: list[dict[str, Any]], targets: list[RenderTarget], **bounds: Any) -> Any:
    renderer = ChartRenderer(str(built("chartrender.sh") / "chartrender"), 1 << 20)
    options = {"timeout_s": 30.0, "max_bytes": 4 << 20, **bounds}
    return anyio.run(
        lambda: render_bounded(objects, [], targets, APP, renderer=renderer, **options)
    )


def test_each_cluster_gets_its_values_version_and_apis(tmp_path: Path) -> None:
    chart = web_chart(tmp_path, "site", "1.0.0", "nginx:1.27")
    values = "cluster: '{{ cluster.name }}'\n"
    widgets = ("example.com/v1", "example.com/v1/Widget")
    rendered = render(
        [release(chart, values)],
        [
            RenderTarget("east", kubernetes_version="v1.33.2", api_versions=widgets),
            RenderTarget("west", kubernetes_version="v1.34.0+k3s1"),
        ],
    )
    infos = {
        cluster: next(o for o in objects if o["kind"] == "ConfigMap")["data"]
        for cluster, objects in rendered.items()
    }
    assert infos["east"] == {
        "cluster": "east",
        "kube": "v1.33.2",
        "widgets": "true",
        "chart": "1.0.0",
        "namespace": "shop",
    }
    assert (infos["west"]["cluster"], infos["west"]["kube"], infos["west"]["widgets"]) == (
        "west",
        "v1.34.0",
        "false",
    )
    deployment = next(o for o in rendered["east"] if o["kind"] == "Deployment")
    assert deployment["spec"]["replicas"] == 2  # the values file, then the values
    # the chart's test hook is left out
    assert sorted(o["kind"] for o in rendered["east"]) == ["ConfigMap", "Deployment", "Service"]


def template(tmp_path: Path, name: str, text: str) -> Path:
    return web_chart(tmp_path, name, "1.0.0", "nginx:1.27", **{"x.yaml": textwrap.dedent(text)})


def test_a_template_error_names_the_template_and_line(tmp_path: Path) -> None:
    chart = template(tmp_path, "broken", "a: b\nc: {{ .Values.no.such }}\n")
    with pytest.raises(
        RenderError, match=r"cluster east: chart broken 1.0.0: broken/templates/x.yaml:2"
    ):
        render([release(chart)], [RenderTarget("east")])


def test_a_template_that_loops_is_stopped_at_the_deadline(tmp_path: Path) -> None:
    chart = template(
        tmp_path, "loop", "{{- range until 100000 }}{{- range until 100000 }}{{- end }}{{- end }}\n"
    )
    with pytest.raises(RenderError, match="took longer than 2s"):
        render([release(chart)], [RenderTarget("east")], timeout_s=2.0)


def test_a_template_that_prints_without_end_is_cut_at_the_output_bound(tmp_path: Path) -> None:
    chart = template(
        tmp_path,
        "loud",
        "metadata: {name: x}\ndata:\n{{- range until 200000 }}\n  k{{ . }}: v{{ end }}\n",
    )
    with pytest.raises(RenderError, match="printed more than 1048576 bytes"):
        render([release(chart)], [RenderTarget("east")])


def test_a_template_that_grows_without_end_is_stopped_at_the_memory_bound(tmp_path: Path) -> None:
    doubling = '{{- $s := "x" }}{{- range until 40 }}{{- $s = printf "%s%s" $s $s }}{{- end }}\n'
    chart = template(tmp_path, "hungry", doubling)
    with pytest.raises(RenderError, match="needed more than the 512 MiB it may use"):
        render([release(chart)], [RenderTarget("east")])


def test_a_rendered_object_with_yaml_aliases_is_refused(tmp_path: Path) -> None:
    chart = template(tmp_path, "laughs", "metadata: {name: x}\na: &a [1, 2]\nb: [*a, *a]\n")
    with pytest.raises(RenderError, match=r"laughs/templates/x.yaml: .*aliases"):
        render([release(chart)], [RenderTarget("east")])


def test_clusters_with_values_of_their_own_each_get_their_own_render(tmp_path: Path) -> None:
    # several helm runs at once (render_ahead), each kept for its own cluster
    chart = web_chart(tmp_path, "many", "1.0.0", "nginx:1.27")
    names = [f"c{i}" for i in range(7)]
    rendered = render(
        [release(chart, "cluster: '{{ cluster.name }}'\n")], [RenderTarget(n) for n in names]
    )
    for name in names:
        info = next(o for o in rendered[name] if o["kind"] == "ConfigMap")
        assert info["data"]["cluster"] == name
