"""Per-cluster rendering: sandboxed strict templates, overrides, replicas, clear errors."""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Any

import pytest

from api.application import Override
from fleet.snapshot import ClusterInfo
from propagator.render.manifests import ApplicationRef, Charts, RenderError, render_for_cluster

APP = ApplicationRef("web", "shop")
EDGE = ClusterInfo(
    name="edge-1",
    labels=MappingProxyType({"tier": "edge"}),
    layer="edge",
    region="eu-west",
    zone="eu-west-a",
)


def deployment(**env: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "replicas": 6,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": "nginx:1.27",
                            "env": [{"name": k, "value": v} for k, v in env.items()],
                        }
                    ]
                }
            },
        },
    }


def override(**spec: Any) -> Override:
    return Override.model_validate(spec)


def env_of(obj: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e["value"] for e in obj["spec"]["template"]["spec"]["containers"][0]["env"]}


def test_templates_see_the_cluster_the_app_and_values() -> None:
    manifest = deployment(
        REGION="{{ cluster.region }}",
        WHO="{{ app.namespace }}/{{ app.name }}",
        GREETING="{{ values.greeting | default('hello') }}",
        TIER="{{ cluster.labels.tier }}",
    )
    [out] = render_for_cluster([manifest], [], EDGE, APP)
    assert env_of(out) == {
        "REGION": "eu-west",
        "WHO": "shop/web",
        "GREETING": "hello",
        "TIER": "edge",
    }
    values = override(clusterNames=["edge-1"], values={"greeting": "howdy"})
    [out] = render_for_cluster([manifest], [values], EDGE, APP)
    assert env_of(out)["GREETING"] == "howdy"
    assert manifest["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] == (
        "{{ cluster.region }}"
    )  # the input is left as it was


def test_a_whole_expression_keeps_its_type() -> None:
    manifest = deployment()
    manifest["spec"]["replicas"] = "{{ values.replicas }}"
    [out] = render_for_cluster(
        [manifest],
        [override(clusterSelector={"matchLabels": {"tier": "edge"}}, values={"replicas": 3})],
        EDGE,
        APP,
    )
    assert out["spec"]["replicas"] == 3


def test_an_undefined_name_names_cluster_manifest_and_line() -> None:
    manifest = deployment(REGION="{{ cluster.regoin }}")
    with pytest.raises(RenderError) as failed:
        render_for_cluster(
            [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, manifest],
            [],
            EDGE,
            APP,
        )
    message = str(failed.value)
    assert message.startswith("cluster edge-1: manifest 2 (Deployment web), line 15: ")
    assert "UndefinedError" in message
    assert "regoin" in message


def test_syntax_errors_are_reported_too() -> None:
    with pytest.raises(
        RenderError,
        match=r"manifest 1 \(Deployment web\), line \d+: "
        "TemplateSyntaxError",
    ):
        render_for_cluster([deployment(X="{{ cluster.name ")], [], EDGE, APP)


@pytest.mark.parametrize(
    "template",
    [
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ cluster.__class__.__init__.__globals__ }}",
        "{{ self._TemplateReference__context.environ }}",
    ],
)
def test_the_sandbox_refuses_to_reach_the_process(template: str) -> None:
    with pytest.raises(RenderError):
        render_for_cluster([deployment(X=template)], [], EDGE, APP)


def test_nothing_of_the_controllers_environment_is_visible() -> None:
    for name in ("environ", "os", "config", "request"):
        with pytest.raises(RenderError, match="UndefinedError"):
            render_for_cluster([deployment(X="{{ " + name + " }}")], [], EDGE, APP)


def test_patches_apply_to_targeted_manifests_of_matching_clusters() -> None:
    patch = override(
        clusterNames=["edge-1"],
        target={"kind": "Deployment"},
        patches=[
            {
                "op": "replace",
                "path": "/spec/template/spec/containers/0/image",
                "value": "nginx:1.27-alpine",
            },
            {"op": "add", "path": "/metadata/labels", "value": {"edge": "yes"}},
        ],
    )
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    out = render_for_cluster([deployment(), config], [patch], EDGE, APP)
    assert out[0]["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27-alpine"
    assert out[0]["metadata"]["labels"] == {"edge": "yes"}
    assert out[1] == config
    other = ClusterInfo(name="core-1", labels=MappingProxyType({}), layer="core")
    assert render_for_cluster([deployment()], [patch], other, APP)[0] == deployment()


def test_a_patch_that_does_not_apply_is_a_clear_error() -> None:
    patch = override(clusterNames=["edge-1"], patches=[{"op": "remove", "path": "/spec/nothing"}])
    with pytest.raises(
        RenderError,
        match="cluster edge-1: manifest 1 \\(Deployment web\\): override 1 does not apply",
    ):
        render_for_cluster([deployment()], [patch], EDGE, APP)


def test_patch_values_are_rendered_per_cluster() -> None:
    """A name or namespace cannot be templated in a manifest (the hub checks them as
    written): an override's patch value can, with the same context."""
    per_cluster = override(
        clusterSelector={"matchLabels": {"tier": "edge"}},
        values={"scale": 3},
        patches=[
            {"op": "replace", "path": "/metadata/namespace", "value": "shop-{{ cluster.name }}"},
            {"op": "replace", "path": "/spec/replicas", "value": "{{ values.scale * 3 }}"},
            {"op": "add", "path": "/metadata/labels", "value": {"region": "{{ cluster.region }}"}},
        ],
    )
    out = render_for_cluster([deployment()], [per_cluster], EDGE, APP)[0]
    assert out["metadata"]["namespace"] == "shop-edge-1"
    assert out["spec"]["replicas"] == 9  # a whole expression keeps its type
    assert out["metadata"]["labels"] == {"region": "eu-west"}


def test_an_added_patch_value_is_not_shared_between_objects() -> None:
    labels = override(
        clusterNames=["edge-1"], patches=[{"op": "add", "path": "/metadata/labels", "value": {}}]
    )
    first, second = render_for_cluster([deployment(), deployment()], [labels], EDGE, APP)
    first["metadata"]["labels"]["changed"] = "here"
    assert second["metadata"]["labels"] == {}


def test_a_failing_patch_value_names_the_cluster_the_override_and_the_patch() -> None:
    broken = override(
        clusterNames=["edge-1"],
        patches=[
            {"op": "add", "path": "/metadata/labels", "value": {}},
            {"op": "replace", "path": "/metadata/namespace", "value": "{{ cluster.nothing.x }}"},
        ],
    )
    with pytest.raises(
        RenderError,
        match=r"cluster edge-1: override 1, patch 2 \(replace /metadata/namespace\): Undefined",
    ):
        render_for_cluster([deployment()], [broken], EDGE, APP)


@pytest.mark.parametrize("namespace", ["Shop_EU", "-shop", "x" * 64, 7])
def test_a_rendered_namespace_that_is_no_label_is_refused_with_its_value(namespace: Any) -> None:
    moved = override(
        clusterNames=["edge-1"],
        patches=[{"op": "replace", "path": "/metadata/namespace", "value": namespace}],
    )
    with pytest.raises(
        RenderError,
        match=rf"\(Deployment web\): metadata.namespace must be a lowercase RFC 1123 label.*"
        f"got {re.escape(repr(namespace))}",
    ):
        render_for_cluster([deployment()], [moved], EDGE, APP)


def test_assigned_replicas_go_into_workloads_only() -> None:
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    fields = [("apps/v1", "Deployment", "/spec/replicas"), ("v1", "ConfigMap", "/x")]
    out = render_for_cluster([deployment(), config], [], EDGE, APP, 2, fields[:1])
    assert out[0]["spec"]["replicas"] == 2
    assert "spec" not in out[1]
    # wherever the kind's replicas rule says, for any kind
    out = render_for_cluster([config], [], EDGE, APP, 2, fields[1:])
    assert out[0]["x"] == 2
    config["data"] = {"a": "b"}
    with pytest.raises(RenderError, match="/data/a/n cannot hold the replicas"):
        render_for_cluster([config], [], EDGE, APP, 2, [("v1", "ConfigMap", "/data/a/n")])


def test_an_object_without_identity_is_refused_with_its_field() -> None:
    nameless = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}
    with pytest.raises(RenderError, match=r"\(ConfigMap \?\): metadata.name is required"):
        render_for_cluster([nameless], [], EDGE, APP)
    kindless = {"apiVersion": "v1", "metadata": {"name": "x"}}
    with pytest.raises(RenderError, match="kind is required"):
        render_for_cluster([kindless], [], EDGE, APP)


CHART_RELEASE = {
    "apiVersion": "propagator.io/v1alpha1",
    "kind": "ChartRelease",
    "metadata": {"name": "web"},
    "chart": {"name": "shop", "version": "1.4.2"},
    "values": "region: '{{ cluster.region }}'\n",
    "archive": "c2hvcA==",
}


def chart_objects(release: Any, values: str) -> list[dict[str, Any]]:
    """What a chart renders (helm's part, faked): its Deployment, and the values seen."""
    made = deployment()
    made["metadata"]["annotations"] = {"propagator.io/chart-template": "shop/templates/d.yaml"}
    seen = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "seen"}}
    return [made, {**seen, "data": {"values": values}}]


def test_a_chart_release_becomes_its_objects_patched_and_sized_like_manifests() -> None:
    patch = Override.model_validate(
        {
            "clusterNames": ["edge-1"],
            "target": {"kind": "Deployment", "name": "web"},
            "patches": [
                {
                    "op": "replace",
                    "path": "/spec/template/spec/containers/0/image",
                    "value": "nginx:edge",
                }
            ],
        }
    )
    objects = render_for_cluster(
        [CHART_RELEASE],
        [patch],
        EDGE,
        APP,
        replicas=2,
        replica_fields=(("apps/v1", "Deployment", "/spec/replicas"),),
        charts=Charts(chart_objects),
    )
    made, seen = objects
    assert seen["data"]["values"] == "region: 'eu-west'"  # its values rendered per cluster
    assert made["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:edge"
    assert made["spec"]["replicas"] == 2


def test_a_chart_object_that_cannot_be_applied_is_named_with_its_template() -> None:
    def nameless(release: Any, values: str) -> list[dict[str, Any]]:
        made = chart_objects(release, values)[0]
        del made["metadata"]["name"]
        return [made]

    where = r"cluster edge-1: chart shop, shop/templates/d.yaml \(Deployment \?\)"
    with pytest.raises(RenderError, match=where + ": metadata.name is required"):
        render_for_cluster([CHART_RELEASE], [], EDGE, APP, charts=Charts(nameless))
    with pytest.raises(RenderError, match=r"chart shop 1\.4\.2: charts are not rendered here"):
        render_for_cluster([CHART_RELEASE], [], EDGE, APP)
    broken = {**CHART_RELEASE, "values": "a: {{ cluster.nope.x }}"}
    with pytest.raises(RenderError, match=r"chart shop 1\.4\.2: values: UndefinedError"):
        render_for_cluster([broken], [], EDGE, APP, charts=Charts(chart_objects))
