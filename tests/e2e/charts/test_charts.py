"""Helm charts as a source, on the real hub and three members, from real OCI registries
(go-containerregistry's, one over TLS behind a password, one over plain HTTP), charts
pushed with the real helm: rendered per cluster with that cluster's values and
``.Capabilities``; a new chart version rolled out as a canary; a private registry's
credentials; a registry that stops answering; a template error; a tenant's chart that
renders cluster RBAC; and hostile charts and references."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml
from kubernetes import client as k8s

from fleet.local import HUB
from tests.e2e.charts.registry import Helm, Registry, bomb, registry, web_chart
from tests.e2e.conftest import Fleet
from tests.e2e.controller import Controller, kubectl_propagator, propagator, running
from tests.e2e.propagation.test_propagation import (
    ENV,
    MEMBERS,
    ap_gone,
    application,
    cluster_entry,
    condition,
    create,
    delete_ap,
    member_object,
    ready_everywhere,
    update_spec,
    wait_ap,
)
from tests.e2e.tools import built
from tests.e2e.waiting import eventually

PASSWORD = "s3cret-registry-password"
CANARY_CLUSTER = "member-1"
WIDGETS_CLUSTER = "member-2"
NAMESPACES = (
    "charts-values",
    "charts-canary",
    "charts-private",
    "charts-outage",
    "charts-broken",
    "charts-tenant",
    "charts-hostile",
)
WIDGET_CRD: Any = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object"}},
            }
        ],
    },
}


@pytest.fixture(scope="module")
def registries(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Registry, Registry]]:
    """A public registry (plain HTTP, allowed so by the platform) and a private one (TLS,
    a password)."""
    public_dir = tmp_path_factory.mktemp("public-registry")
    private_dir = tmp_path_factory.mktemp("private-registry")
    with (
        registry(public_dir, tls=False) as public,
        registry(private_dir, tls=True, user=("robot", PASSWORD)) as private,
    ):
        yield public, private


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(tmp_path_factory.mktemp("helm"))


@pytest.fixture(scope="module")
def controller(
    fleet: Fleet,
    joined: list[str],
    registries: tuple[Registry, Registry],
    helm: Helm,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Controller]:
    ext = k8s.ApiextensionsV1Api(fleet.api(WIDGETS_CLUSTER))
    ext.create_custom_resource_definition(WIDGET_CRD)  # before the members' discovery is read
    members = k8s.CustomObjectsApi(fleet.api(HUB))
    label = {"metadata": {"labels": {"canary": "yes"}}}
    members.patch_cluster_custom_object(
        "propagator.io", "v1alpha1", "memberclusters", CANARY_CLUSTER, label
    )
    env = {**ENV, **controller_env(registries, helm)}
    try:
        with running(fleet, tmp_path_factory.mktemp("charts"), env) as controller:
            yield controller
            for namespace in NAMESPACES:
                for name in ("web", "other"):
                    if not ap_gone(fleet, namespace, name):
                        delete_ap(fleet, namespace, name)
                        eventually(
                            lambda ns=namespace, n=name: ap_gone(fleet, ns, n) or None,  # type: ignore[misc]
                            "ap gone",
                        )
    finally:
        ext.delete_custom_resource_definition(WIDGET_CRD["metadata"]["name"])
        unlabel = {"metadata": {"labels": {"canary": None}}}
        members.patch_cluster_custom_object(
            "propagator.io", "v1alpha1", "memberclusters", CANARY_CLUSTER, unlabel
        )


def controller_env(registries: tuple[Registry, Registry], helm: Helm) -> dict[str, str]:
    """The settings that let the controller (and the CLI) use the test's registries."""
    public, private = registries
    return {
        "PROPAGATOR_CHART_SOURCES": f"{public.allowed},{private.allowed}",
        "PROPAGATOR_CHART_CA_FILE": str(private.ca),
        "PROPAGATOR_CHART_RENDERER": str(built("chartrender.sh") / "chartrender"),
        "PROPAGATOR_CHART_RESOLVE_INTERVAL_S": "1",
        "PROPAGATOR_CHART_FETCH_TIMEOUT_S": "3",
    }


def _chart_app(namespace: str, registry: Registry, chart: str, **source: Any) -> dict[str, Any]:
    app = application("web", namespace, [])
    app["spec"]["resources"] = {
        "charts": [{"repository": registry.charts, "name": chart, **source}]
    }
    return app


def _stopped(fleet: Fleet, namespace: str, reason: str) -> dict[str, Any]:
    """The application ``web`` once its Applied condition has ``reason``."""
    return wait_ap(
        fleet,
        namespace,
        "web",
        reason,
        lambda a: condition(a, "Applied").get("reason") == reason,
    )


def _info(fleet: Fleet, cluster: str, namespace: str, name: str = "web-info") -> dict[str, str]:
    found = member_object(fleet, cluster, "ConfigMap", namespace, name)
    return dict(found.data or {}) if found is not None else {}


def _image(fleet: Fleet, cluster: str, namespace: str, name: str = "web") -> str | None:
    found = member_object(fleet, cluster, "Deployment", namespace, name)
    return found.spec.template.spec.containers[0].image if found is not None else None


def _versions(fleet: Fleet, namespace: str) -> dict[tuple[str, str], str]:
    """resourceVersion of every ConfigMap and Deployment of ``namespace`` on each member."""
    out = {}
    for cluster in MEMBERS:
        for cm in fleet.core(cluster).list_namespaced_config_map(namespace).items:
            out[cluster, f"cm/{cm.metadata.name}"] = cm.metadata.resource_version
        for d in fleet.apps(cluster).list_namespaced_deployment(namespace).items:
            out[cluster, f"deploy/{d.metadata.name}"] = d.metadata.resource_version
    return out


def test_a_chart_is_rendered_for_each_cluster_with_its_values_and_capabilities(
    fleet: Fleet,
    controller: Controller,
    registries: tuple[Registry, Registry],
    helm: Helm,
    tmp_path: Path,
) -> None:
    public, _ = registries
    digest = helm.push(web_chart(tmp_path, "site", "1.0.0", "nginx:1.27"), public)
    ns = "charts-values"
    values = "cluster: '{{ cluster.name }}'\nreplicaCount: 2\n"
    create(fleet, _chart_app(ns, public, "site", version="^1.0", values=values))
    app = wait_ap(fleet, ns, "web", "ready everywhere", ready_everywhere)

    for cluster in MEMBERS:
        info = _info(fleet, cluster, ns)
        assert info["cluster"] == cluster  # the values were templated for this cluster
        version = k8s.VersionApi(fleet.api(cluster)).get_code().git_version
        assert info["kube"] == version.split("+")[0]  # .Capabilities.KubeVersion
        # .Capabilities.APIVersions: only the member that serves widgets says so
        assert info["widgets"] == ("true" if cluster == WIDGETS_CLUSTER else "false")
        assert info["namespace"] == ns
        deployment = member_object(fleet, cluster, "Deployment", ns, "web")
        assert deployment.spec.replicas == 2
        annotations = deployment.metadata.annotations or {}
        assert annotations.get("propagator.io/chart-template") == "site/templates/deployment.yaml"
        # the chart's test hook is not run, and not applied
        assert (
            fleet.core(cluster)
            .list_namespaced_pod(ns, field_selector="metadata.name=web-test")
            .items
            == []
        )
        assert cluster_entry(app, cluster)["charts"] == ["web: site 1.0.0"]

    # what one cluster gets, shown before anything is applied: the live application
    # (kubectl), and an application file (propagator schedule), rendered as the controller does
    said = kubectl_propagator(
        fleet,
        "explain",
        "web",
        "-n",
        ns,
        "--render",
        WIDGETS_CLUSTER,
        env=controller_env(registries, helm),
    )
    assert said.returncode == 0, said.stderr
    shown = {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(said.stdout)}
    assert shown["ConfigMap", "web-info"]["data"]["cluster"] == WIDGETS_CLUSTER
    assert shown["ConfigMap", "web-info"]["data"]["widgets"] == "true"
    assert shown["Deployment", "web"]["spec"]["replicas"] == 2
    file = tmp_path / "app.yaml"
    file.write_text(yaml.safe_dump(_chart_app(ns, public, "site", values=values)))
    said = propagator(
        "schedule",
        "-f",
        str(file),
        "--render",
        MEMBERS[0],
        "--hub-kubeconfig",
        str(fleet.kubeconfig(HUB)),
        env=controller_env(registries, helm),
    )
    assert said.returncode == 0, said.stderr
    shown = {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(said.stdout)}
    assert shown["ConfigMap", "web-info"]["data"]["widgets"] == "false"
    said = propagator(
        "schedule",
        "-f",
        str(file),
        "--render",
        "nowhere",
        "--hub-kubeconfig",
        str(fleet.kubeconfig(HUB)),
        env=controller_env(registries, helm),
    )
    assert said.returncode == 1
    assert "--render nowhere: no MemberCluster of that name" in said.stderr

    [chart] = app["status"]["charts"]
    assert chart["version"] == "1.0.0"
    assert chart["digest"] == digest
    assert chart["appVersion"] == "nginx:1.27"
    resolved = condition(app, "ChartsResolved")
    assert resolved["reason"] == "Resolved"
    assert (
        "its hooks are not run, left out: site/templates/tests/test-connection.yaml"
        in resolved["message"]
    )


def test_a_new_chart_version_rolls_out_as_a_canary(
    fleet: Fleet,
    controller: Controller,
    registries: tuple[Registry, Registry],
    helm: Helm,
    tmp_path: Path,
) -> None:
    public, _ = registries
    helm.push(web_chart(tmp_path, "shop", "1.0.0", "nginx:1.27"), public)
    ns = "charts-canary"
    app = _chart_app(ns, public, "shop", version="1.x", values="replicaCount: 4\n")
    app["spec"]["canary"] = {
        "clusterSelector": {"matchLabels": {"canary": "yes"}},
        "steps": [{"weight": 50, "manual": True}, {"weight": 100}],
    }
    create(fleet, app)
    wait_ap(
        fleet,
        ns,
        "web",
        "first release",
        lambda a: (
            ready_everywhere(a) and ((a["status"].get("canary") or {}).get("phase") == "Succeeded")
        ),
    )

    # a new version in range is pushed: the controller follows it, the canary goes first
    helm.push(web_chart(tmp_path, "shop", "1.1.0", "nginx:1.28"), public)
    gated = wait_ap(
        fleet,
        ns,
        "web",
        "canary at its manual step",
        lambda a: (a["status"].get("canary") or {}).get("phase") == "Paused",
    )
    assert gated["status"]["charts"][0]["version"] == "1.1.0"
    canary = member_object(fleet, CANARY_CLUSTER, "Deployment", ns, "web-canary")
    assert canary is not None
    assert canary.spec.template.spec.containers[0].image == "nginx:1.28"
    assert _image(fleet, CANARY_CLUSTER, ns) == "nginx:1.27"  # the stable copy
    for cluster in MEMBERS:  # the workload waits for the canary (other objects do not)
        if cluster != CANARY_CLUSTER:
            assert _image(fleet, cluster, ns) == "nginx:1.27"

    fleet_kubectl_annotate(fleet, ns, "propagator.io/canary-action=promote")
    wait_ap(
        fleet,
        ns,
        "web",
        "promoted everywhere",
        lambda a: (
            (a["status"].get("canary") or {}).get("phase") == "Succeeded" and ready_everywhere(a)
        ),
    )
    for cluster in MEMBERS:
        eventually(
            lambda c=cluster: _image(fleet, c, ns) == "nginx:1.28" or None,  # type: ignore[misc]
            f"{cluster} runs 1.1.0",
        )
        assert _info(fleet, cluster, ns)["chart"] == "1.1.0"


def fleet_kubectl_annotate(fleet: Fleet, namespace: str, annotation: str) -> None:
    key, value = annotation.split("=", 1)
    patch = {"metadata": {"annotations": {key: value}}}
    k8s.CustomObjectsApi(fleet.api(HUB)).patch_namespaced_custom_object(
        "propagator.io", "v1alpha1", namespace, "applicationpropagations", "web", patch
    )


def _secret(fleet: Fleet, namespace: str, name: str, password: str) -> None:
    fleet.ensure_namespace(namespace)
    body = k8s.V1Secret(
        metadata=k8s.V1ObjectMeta(name=name),
        type="kubernetes.io/basic-auth",
        string_data={"username": "robot", "password": password},
    )
    fleet.core(HUB).create_namespaced_secret(namespace, body)


def test_a_private_registry_is_reached_over_tls_with_the_applications_credentials(
    fleet: Fleet,
    controller: Controller,
    registries: tuple[Registry, Registry],
    helm: Helm,
    tmp_path: Path,
) -> None:
    _, private = registries
    helm.push(web_chart(tmp_path, "vault", "2.0.0", "nginx:1.27"), private)
    ns = "charts-private"

    # no credentials: refused, saying what is missing
    create(fleet, _chart_app(ns, private, "vault"))
    app = _stopped(fleet, ns, "ChartRefused")
    assert "needs credentials" in condition(app, "Applied")["message"]

    # wrong ones: refused by the registry
    _secret(fleet, ns, "wrong", "not-the-password")
    update_spec(
        fleet,
        ns,
        "web",
        lambda s: s["resources"]["charts"][0].update(credentials={"secretName": "wrong"}),
    )
    app = wait_ap(
        fleet,
        ns,
        "web",
        "refused by the registry",
        lambda a: "credentials refused" in condition(a, "Applied").get("message", ""),
    )

    # the right ones: rendered and applied
    _secret(fleet, ns, "robot", PASSWORD)
    update_spec(
        fleet,
        ns,
        "web",
        lambda s: s["resources"]["charts"][0].update(credentials={"secretName": "robot"}),
    )
    app = wait_ap(fleet, ns, "web", "ready everywhere", ready_everywhere)
    assert app["status"]["charts"][0]["version"] == "2.0.0"
    for cluster in MEMBERS:
        assert _info(fleet, cluster, ns)["chart"] == "2.0.0"

    # the password is nowhere: not in the status, the events or the controller's log
    events = fleet.core(HUB).list_namespaced_event(ns).items
    said = str(app) + " ".join(str(e.message) for e in events) + controller.log.read_text()
    assert PASSWORD not in said
    assert "not-the-password" not in said


def test_a_registry_that_stops_answering_changes_nothing_and_is_retried(
    fleet: Fleet,
    controller: Controller,
    registries: tuple[Registry, Registry],
    helm: Helm,
    tmp_path: Path,
) -> None:
    public, _ = registries
    helm.push(web_chart(tmp_path, "books", "1.0.0", "nginx:1.27"), public)
    helm.push(web_chart(tmp_path, "books", "1.1.0", "nginx:1.28"), public)
    ns = "charts-outage"
    create(fleet, _chart_app(ns, public, "books", version="1.0.0"))
    wait_ap(fleet, ns, "web", "ready everywhere", ready_everywhere)
    before = _versions(fleet, ns)

    public.pause()
    try:
        # what runs keeps running from the last resolution, said so
        app = wait_ap(
            fleet,
            ns,
            "web",
            "going on with the last resolution",
            lambda a: condition(a, "ChartsResolved").get("reason") == "LastResolved",
        )
        assert "took longer than 3s" in condition(app, "ChartsResolved")["message"]
        assert condition(app, "Applied")["status"] == "True"
        # a new version cannot be fetched: refused for now, retried, nothing written
        update_spec(fleet, ns, "web", lambda s: s["resources"]["charts"][0].update(version="1.1.0"))
        app = _stopped(fleet, ns, "ChartUnavailable")
        message = condition(app, "Applied")["message"]
        assert "took longer than 3s" in message
        assert message.endswith("nothing was applied")
        assert _versions(fleet, ns) == before
    finally:
        public.resume()
    wait_ap(
        fleet,
        ns,
        "web",
        "1.1.0 everywhere",
        lambda a: ready_everywhere(a) and a["status"]["charts"][0]["version"] == "1.1.0",
    )
    for cluster in MEMBERS:
        eventually(
            lambda c=cluster: _image(fleet, c, ns) == "nginx:1.28" or None,  # type: ignore[misc]
            f"{cluster} runs 1.1.0",
        )


def test_a_template_error_is_refused_naming_the_template_and_line(
    fleet: Fleet,
    controller: Controller,
    registries: tuple[Registry, Registry],
    helm: Helm,
    tmp_path: Path,
) -> None:
    public, _ = registries
    broken = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: broken\ndata:\n  a: b\n"
        "  x: {{ .Values.missing.field }}\n"  # line 7
    )
    helm.push(
        web_chart(tmp_path, "broken", "1.0.0", "nginx:1.27", **{"broken.yaml": broken}), public
    )
    ns = "charts-broken"
    create(fleet, _chart_app(ns, public, "broken"))
    app = _stopped(fleet, ns, "RenderFailed")
    message = condition(app, "Applied")["message"]
    assert "chart broken 1.0.0" in message
    assert "broken/templates/broken.yaml:7" in message
    assert message.endswith("nothing was applied")
    for cluster in MEMBERS:
        assert member_object(fleet, cluster, "Deployment", ns, "web") is None


def test_a_tenants_chart_that_renders_cluster_rbac_is_forbidden(
    fleet: Fleet,
    controller: Controller,
    registries: tuple[Registry, Registry],
    helm: Helm,
    tmp_path: Path,
) -> None:
    public, _ = registries
    binding = """
        apiVersion: rbac.authorization.k8s.io/v1
        kind: ClusterRoleBinding
        metadata:
          name: {{ .Release.Name }}-admin
        roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
        subjects: [{kind: ServiceAccount, name: default, namespace: {{ .Release.Namespace }}}]
        """
    helm.push(web_chart(tmp_path, "grab", "1.0.0", "nginx:1.27", **{"admin.yaml": binding}), public)
    ns = "charts-tenant"
    quota = {
        "apiVersion": "propagator.io/v1alpha1",
        "kind": "TenantQuota",
        "metadata": {"name": "charts-team"},
        "spec": {"namespaces": [ns]},
    }
    custom = k8s.CustomObjectsApi(fleet.api(HUB))
    custom.create_cluster_custom_object("propagator.io", "v1alpha1", "tenantquotas", quota)
    try:
        create(fleet, _chart_app(ns, public, "grab"))
        app = _stopped(fleet, ns, "Forbidden")
        message = condition(app, "Applied")["message"]
        assert "ClusterRoleBinding web-admin (chart template grab/templates/admin.yaml)" in message
        assert message.endswith("nothing was applied")
        rbac = k8s.RbacAuthorizationV1Api(fleet.api(MEMBERS[0]))
        names = {b.metadata.name for b in rbac.list_cluster_role_binding().items if b.metadata}
        assert "web-admin" not in names
        for cluster in MEMBERS:
            assert member_object(fleet, cluster, "Deployment", ns, "web") is None
    finally:
        delete_ap(fleet, ns, "web")
        eventually(lambda: ap_gone(fleet, ns, "web") or None, "ap gone")
        custom.delete_cluster_custom_object(
            "propagator.io", "v1alpha1", "tenantquotas", "charts-team"
        )


def test_hostile_charts_and_references_are_refused_and_others_go_on(
    fleet: Fleet,
    controller: Controller,
    registries: tuple[Registry, Registry],
    helm: Helm,
    tmp_path: Path,
) -> None:
    public, _ = registries
    ns = "charts-hostile"
    # another application, healthy all along
    helm.push(web_chart(tmp_path, "calm", "1.0.0", "nginx:1.27"), public)
    other = _chart_app(ns, public, "calm")
    other["metadata"]["name"] = "other"
    create(fleet, other)
    wait_ap(fleet, ns, "other", "ready everywhere", ready_everywhere)
    calm = _versions(fleet, ns)

    # a registry the platform did not allow (the controller never connects to it)
    app = _chart_app(ns, public, "calm")
    app["spec"]["resources"]["charts"][0]["repository"] = "oci://169.254.169.254/latest"
    create(fleet, app)
    refused = _stopped(fleet, ns, "ChartNotAllowed")
    message = condition(refused, "Applied")["message"]
    assert "oci://169.254.169.254/latest/calm is not among the chart sources" in message
    assert f"PROPAGATOR_CHART_SOURCES: {public.allowed}" in message

    # an archive that unpacks to 64 MiB (its gzip is 64 KiB)
    public.push_raw("bomb", "1.0.0", bomb("bomb", 64 << 20))
    update_spec(
        fleet,
        ns,
        "web",
        lambda s: s["resources"]["charts"][0].update(repository=public.charts, name="bomb"),
    )
    refused = _stopped(fleet, ns, "ChartRefused")
    assert "unpacks to more than 33554432 bytes" in condition(refused, "Applied")["message"]

    # a chart whose template loops: stopped at the render deadline
    loop = "{{- range until 100000 }}{{- range until 100000 }}{{- end }}{{- end }}\n"
    helm.push(web_chart(tmp_path, "loop", "1.0.0", "nginx:1.27", **{"loop.yaml": loop}), public)
    update_spec(fleet, ns, "web", lambda s: s["resources"]["charts"][0].update(name="loop"))
    refused = _stopped(fleet, ns, "RenderFailed")
    assert "took longer than" in condition(refused, "Applied")["message"]

    # values of 50 MiB: the hub itself refuses the application (it closes the request);
    # values past the field's bound are refused naming it
    huge = application("huge", ns, [])
    chart = {"repository": public.charts, "name": "calm", "values": "a: " + "x" * (50 << 20)}
    huge["spec"]["resources"] = {"charts": [chart]}
    with pytest.raises((k8s.ApiException, urllib3.exceptions.HTTPError)):
        create(fleet, huge)
    chart["values"] = "a: " + "x" * (300 << 10)
    with pytest.raises(k8s.ApiException) as refusal:
        create(fleet, huge)
    assert refusal.value.status == 422
    assert "spec.resources.charts[0].values: Too long" in str(refusal.value.body)

    # the other application was never touched, and is still ready
    assert _versions(fleet, ns) == calm
    assert ready_everywhere(wait_ap(fleet, ns, "other", "still ready", ready_everywhere))
