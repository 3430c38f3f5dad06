"""The CRDs are generated from the models; the committed files must match."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from api.crd import RESOURCES, crd_filename, crd_of, crds, to_yaml
from api.resource import Resource
from tests.root import ROOT

CRD_DIR = ROOT / "charts" / "propagator" / "crds"


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: r.crd.kind)
def test_committed_crd_matches_the_models(resource: type[Resource]) -> None:
    committed = (CRD_DIR / crd_filename(resource)).read_text()
    assert committed == to_yaml([crd_of(resource)]), (
        f"{crd_filename(resource)} is stale: run `make crds`"
    )


def test_no_stray_files_in_the_crd_directory() -> None:
    assert sorted(p.name for p in CRD_DIR.iterdir()) == sorted(crd_filename(r) for r in RESOURCES)


def _walk(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = []
    if isinstance(node, dict):
        found.append((path, node))
        for key, value in node.get("properties", {}).items():
            found += _walk(value, f"{path}.{key}")
        if "items" in node:
            found += _walk(node["items"], f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            found += _walk(node["additionalProperties"], f"{path}{{}}")
    return found


@pytest.mark.parametrize("crd", crds(), ids=lambda c: c["spec"]["names"]["kind"])
def test_schema_is_structural(crd: dict[str, Any]) -> None:
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in _walk(schema):
        free_form = node.get("x-kubernetes-preserve-unknown-fields") or node.get(
            "x-kubernetes-int-or-string"
        )
        assert "type" in node or free_form, f"{path} has no type"
        for forbidden in ("anyOf", "oneOf", "allOf", "$ref", "title"):
            assert forbidden not in node, f"{path} has {forbidden}"
        assert not ("properties" in node and "additionalProperties" in node), path


@pytest.mark.parametrize("crd", crds(), ids=lambda c: c["spec"]["names"]["kind"])
def test_every_spec_field_is_described(crd: dict[str, Any]) -> None:
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    undescribed = [p for p, node in _walk(spec) if p and not node.get("description")]
    # Items of lists and maps inherit the description of their field.
    assert [p for p in undescribed if not p.endswith(("[]", "{}"))] == []


def test_names_and_category() -> None:
    by_kind = {c["spec"]["names"]["kind"]: c for c in crds()}
    assert {k: c["spec"]["names"]["shortNames"] for k, c in by_kind.items()} == {
        "MemberCluster": ["mc"],
        "Fleet": ["fl"],
        "ApplicationPropagation": ["ap"],
        "TenantQuota": ["tq"],
        "ResourceInterpreter": ["ri"],
        "Work": ["pw"],
    }
    assert all(c["spec"]["names"]["categories"] == ["propagator"] for c in by_kind.values())
    assert by_kind["ApplicationPropagation"]["spec"]["scope"] == "Namespaced"
    assert all(c["spec"]["versions"][0]["subresources"] == {"status": {}} for c in by_kind.values())


def test_crds_command_output_is_applicable_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    from propagator.cli.main import main

    assert main(["crds"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["metadata"]["name"] for d in docs] == [r.crd.name for r in RESOURCES]
