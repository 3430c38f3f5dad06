"""``propagator schedule --fleet-file``: a tenant found by the labels of the namespace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from propagator.cli.main import main
from tests.root import ROOT


def _member(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "propagator.io/v1alpha1",
        "kind": "MemberCluster",
        "metadata": {"name": name, "labels": {"env": "test"}},
        "spec": {"secretRef": {"namespace": "propagator-system", "name": name}},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "apiEnablements": [{"groupVersion": "v1", "kinds": ["ConfigMap"]}],
            "resources": {"available": {"cpu": "8", "memory": "32Gi", "pods": "100"}},
        },
    }


def _fleet_file(tmp_path: Path, team: str) -> Path:
    objects = [
        _member("m1"),
        _member("m2"),
        {
            "apiVersion": "propagator.io/v1alpha1",
            "kind": "Fleet",
            "metadata": {"name": "f"},
            "spec": {"clusters": ["m1", "m2"]},
        },
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "shop", "labels": {"team": team}},
        },
        {
            "apiVersion": "propagator.io/v1alpha1",
            "kind": "TenantQuota",
            "metadata": {"name": "capped"},
            "spec": {
                "namespaceSelector": {"matchLabels": {"team": "capped"}},
                "hard": {"pods": 10},
                "clusters": [{"clusterNames": ["m2"], "hard": {"pods": 0}}],
            },
        },
    ]
    path = tmp_path / f"fleet-{team}.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}))
    return path


def test_the_namespace_labels_decide_the_tenant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = tmp_path / "app.yaml"
    app.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "propagator.io/v1alpha1",
                "kind": "ApplicationPropagation",
                "metadata": {"name": "web", "namespace": "shop"},
                "spec": {
                    "fleet": "f",
                    "resources": {
                        "manifests": [
                            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
                        ]
                    },
                },
            }
        )
    )
    placed = {}
    for team in ("capped", "free"):
        code = main(
            ["schedule", "-f", str(app), "--fleet-file", str(_fleet_file(tmp_path, team)), "--json"]
        )
        assert code == 0
        placed[team] = [p["cluster"] for p in json.loads(capsys.readouterr().out)["placement"]]
    assert placed == {"capped": ["m1"], "free": ["m1", "m2"]}


def test_explain_shows_where_it_runs_and_what_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workload = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 6,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}
                    ]
                },
            },
        },
    }
    app = tmp_path / "app.yaml"  # as `kubectl get ap web -o yaml` gives it: with its status
    app.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "propagator.io/v1alpha1",
                "kind": "ApplicationPropagation",
                "metadata": {"name": "web", "namespace": "shop", "uid": "u-1"},
                "spec": {
                    "fleet": "f",
                    "resources": {"manifests": [workload]},
                    "placement": {"replicas": {"mode": "Divided"}},
                },
                "status": {
                    "placement": [
                        {"cluster": "m1", "replicas": 2},
                        {"cluster": "m2", "replicas": 2},
                    ]
                },
            }
        )
    )
    fleet = _fleet_file(tmp_path, "free")
    text = yaml.safe_load(fleet.read_text())
    for item in text["items"]:
        if item["kind"] == "MemberCluster":
            item["status"]["apiEnablements"] = [
                {"groupVersion": "apps/v1", "kinds": ["Deployment"]}
            ]
    fleet.write_text(yaml.safe_dump(text))
    assert main(["schedule", "-f", str(app), "--fleet-file", str(fleet), "--explain"]) == 0
    out = capsys.readouterr().out
    # scaled 4 -> 6: each keeps its 2, the new ones shared
    assert "current: m1=2 m2=2" in out
    assert "change: m1 2 -> 3" in out
    assert "change: m2 2 -> 3" in out
    assert main(["schedule", "-f", str(app), "--fleet-file", str(fleet), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["current"] == {"m1": 2, "m2": 2}


def test_a_custom_workload_is_divided_by_the_rules_on_the_hub(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet_file = _fleet_file(tmp_path, "free")
    listing = yaml.safe_load(fleet_file.read_text())
    for item in listing["items"]:
        if item["kind"] == "MemberCluster":
            item["status"]["apiEnablements"].append(
                {"groupVersion": "apps.example.com/v1", "kinds": ["WorkerPool"]}
            )
    rules = ROOT / "docs" / "examples" / "resource-interpreter.yaml"
    pool = {
        "apiVersion": "apps.example.com/v1",
        "kind": "WorkerPool",
        "metadata": {"name": "pool", "namespace": "shop"},
        "spec": {"workers": 6, "template": {"spec": {"containers": [{"name": "w"}]}}},
    }
    app = tmp_path / "pool.yaml"
    app.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "propagator.io/v1alpha1",
                "kind": "ApplicationPropagation",
                "metadata": {"name": "pool", "namespace": "shop"},
                "spec": {
                    "fleet": "f",
                    "resources": {"manifests": [pool]},
                    "placement": {"replicas": {"mode": "Divided"}},
                },
            }
        )
    )

    def placed() -> dict[str, int]:
        fleet_file.write_text(yaml.safe_dump(listing))
        assert main(["schedule", "-f", str(app), "--fleet-file", str(fleet_file), "--json"]) == 0
        decision = json.loads(capsys.readouterr().out)
        return {p["cluster"]: p.get("replicas") for p in decision["placement"]}

    # without rules for WorkerPools nothing says it runs 6 replicas: it counts as one
    assert sum(placed().values()) == 1
    listing["items"].append(yaml.safe_load(rules.read_text()))
    assert placed() == {"m1": 3, "m2": 3}
