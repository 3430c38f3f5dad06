"""The hub API server itself rejects bad objects with messages that name the field, and
accepts every example; kubectl shows useful columns and descriptions."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from api.crd import RESOURCES
from api.interpreter import canonical_name
from api.tenantquota import GroupKind
from fleet.local import HUB
from tests.api.cases import BAD_OBJECTS, NAMESPACE, BadObject
from tests.e2e.conftest import Fleet
from tests.root import ROOT

EXAMPLES = ROOT / "docs" / "examples"
PLURALS = {r.crd.kind: r.crd.plural for r in RESOURCES}


def _create(api: Any, obj: dict[str, Any], *, dry_run: bool = True) -> Any:
    custom = k8s.CustomObjectsApi(api)
    group, version = obj["apiVersion"].split("/")
    plural = PLURALS[obj["kind"]]
    dry = "All" if dry_run else None
    if namespace := obj["metadata"].get("namespace"):
        return custom.create_namespaced_custom_object(
            group, version, namespace, plural, obj, dry_run=dry, field_validation="Strict"
        )
    return custom.create_cluster_custom_object(
        group, version, plural, obj, dry_run=dry, field_validation="Strict"
    )


@pytest.mark.parametrize("case", BAD_OBJECTS, ids=lambda c: c.id)
def test_hub_rejects_bad_object_naming_the_field(
    case: BadObject, fleet: Fleet, hub_crds: list[str]
) -> None:
    fleet.ensure_namespace(NAMESPACE)
    with pytest.raises(k8s.ApiException) as rejected:
        _create(fleet.api(HUB), case.obj)
    assert rejected.value.status in (400, 422), rejected.value.body
    message = json.loads(rejected.value.body or "{}")["message"]
    assert case.field in message, message
    assert case.says in message, message


def _example_docs() -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{p.name}:{d['kind']}/{d['metadata']['name']}", d)
        for p in sorted(EXAMPLES.glob("*.yaml"))
        for d in yaml.safe_load_all(p.read_text())
    ]


@pytest.mark.parametrize(("name", "doc"), _example_docs(), ids=[n for n, _ in _example_docs()])
def test_hub_accepts_every_example(
    name: str, doc: dict[str, Any], fleet: Fleet, hub_crds: list[str]
) -> None:
    if doc["kind"] == "Namespace":
        fleet.ensure_namespace(doc["metadata"]["name"])
        return
    if namespace := doc["metadata"].get("namespace"):  # (the Work's: a Pull member's)
        fleet.ensure_namespace(namespace)
    # A name of its own: other tests may hold objects named like the examples.
    doc = {**doc, "metadata": {**doc["metadata"], "name": f"example-{doc['metadata']['name']}"}}
    if doc["kind"] == "ResourceInterpreter":  # its name is its kind's: a kind of its own
        target = {**doc["spec"]["target"], "kind": "Example" + doc["spec"]["target"]["kind"]}
        doc["spec"] = {**doc["spec"], "target": target}
        doc["metadata"]["name"] = canonical_name(GroupKind.model_validate(target))
    created = _create(fleet.api(HUB), doc)
    assert created["spec"]  # defaults applied, nothing pruned away
    for key in doc["spec"]:
        assert key in created["spec"], f"{name}: spec.{key} was dropped"


def _kubectl(
    fleet: Fleet, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(fleet.binaries / "kubectl"), "--kubeconfig", str(fleet.kubeconfig(HUB)), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )


def _renamed_example(tmp_path: Path) -> str:
    """docs/examples/fleet.yaml with every name prefixed ``example-``: the members the
    other tests join (member-1...) and their fleet are left alone, whatever ran first."""
    docs = list(yaml.safe_load_all((EXAMPLES / "fleet.yaml").read_text()))
    for doc in docs:
        doc["metadata"]["name"] = "example-" + doc["metadata"]["name"]
        if doc["kind"] == "Fleet":
            doc["spec"]["clusterSelector"] = {"matchLabels": {"example": "fleet"}}
        else:
            doc["metadata"]["labels"] = {**doc["metadata"].get("labels", {}), "example": "fleet"}
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def test_kubectl_shows_columns_and_descriptions(
    fleet: Fleet, hub_crds: list[str], tmp_path: Path
) -> None:
    example = _renamed_example(tmp_path)
    applied = _kubectl(fleet, "apply", "-f", example)
    assert applied.returncode == 0, applied.stderr
    try:
        listed = _kubectl(fleet, "get", "propagator")
        assert listed.returncode == 0, listed.stderr
        assert "membercluster.propagator.io/example-member-1" in listed.stdout
        assert "fleet.propagator.io/example-prod" in listed.stdout

        header = _kubectl(fleet, "get", "mc").stdout.splitlines()[0].split()
        assert header == [
            "NAME",
            "READY",
            "MODE",
            "LAYER",
            "REGION",
            "VERSION",
            "CPU-AVAILABLE",
            "AGE",
        ]
        wide = _kubectl(fleet, "get", "mc", "-o", "wide").stdout.splitlines()[0].split()
        assert wide[-3:] == ["ZONE", "PROVIDER", "NODES"]

        explained = _kubectl(fleet, "explain", "ap.spec.placement")
        assert explained.returncode == 0, explained.stderr
        assert "Layers to try in order" in explained.stdout
        assert "minClusters" in explained.stdout
    finally:
        deleted = _kubectl(fleet, "delete", "-f", example, "--wait")
        assert deleted.returncode == 0, deleted.stderr


def test_ap_columns(fleet: Fleet, hub_crds: list[str]) -> None:
    fleet.ensure_namespace(NAMESPACE)
    _create(
        fleet.api(HUB),
        {
            "apiVersion": "propagator.io/v1alpha1",
            "kind": "ApplicationPropagation",
            "metadata": {"name": "columns", "namespace": NAMESPACE},
            "spec": {
                "fleet": "prod",
                "resources": {
                    "manifests": [
                        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
                    ]
                },
            },
        },
        dry_run=False,
    )
    try:
        wide = _kubectl(fleet, "get", "ap", "-n", NAMESPACE, "-o", "wide")
        assert wide.returncode == 0, wide.stderr
        header, row = wide.stdout.splitlines()[:2]
        assert header.split() == [
            "NAME",
            "FLEET",
            "CLUSTERS",
            "READY",
            "CANARY",
            "ROLLOUT",
            "AGE",
            "SCHEDULED",
            "APPLIED",
            "AVAILABLE",
        ]
        assert row.split()[:2] == ["columns", "prod"]
    finally:
        _kubectl(fleet, "delete", "ap", "columns", "-n", NAMESPACE)


def test_kubectl_apply_refuses_a_typo_instead_of_dropping_it(
    fleet: Fleet, hub_crds: list[str]
) -> None:
    fleet.ensure_namespace(NAMESPACE)
    typo = {
        "apiVersion": "propagator.io/v1alpha1",
        "kind": "ApplicationPropagation",
        "metadata": {"name": "typo", "namespace": NAMESPACE},
        "spec": {
            "fleet": "prod",
            "resources": {
                "manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}]
            },
            "placment": {"maxClusters": 2},
        },
    }
    applied = _kubectl(fleet, "apply", "-f", "-", stdin=yaml.safe_dump(typo))
    assert applied.returncode != 0
    assert 'unknown field "spec.placment"' in applied.stderr
    missing = _kubectl(fleet, "get", "ap", "typo", "-n", NAMESPACE)
    assert missing.returncode != 0
