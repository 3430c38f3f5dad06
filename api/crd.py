"""Generate the CustomResourceDefinitions from the pydantic models (the single source).

pydantic's JSON schema is turned into a structural OpenAPI v3 schema: references inlined,
optional unions collapsed, titles dropped, free-form objects marked to keep their fields,
and the models' rules carried over as ``x-kubernetes-validations``.
"""

from __future__ import annotations

from typing import Any

import yaml

from api.application import ApplicationPropagation
from api.common import GROUP, VERSION
from api.fleet import Fleet
from api.interpreter import ResourceInterpreter
from api.membercluster import MemberCluster
from api.resource import Resource
from api.tenantquota import TenantQuota
from api.work import Work

RESOURCES: tuple[type[Resource], ...] = (
    MemberCluster,
    Fleet,
    ApplicationPropagation,
    TenantQuota,
    ResourceInterpreter,
    Work,
)

_DROP = {"title", "additionalProperties", "$defs", "discriminator"}


def _clean_text(text: str) -> str:
    # Docstrings wrap lines; kubectl explain re-wraps, so keep one line per description.
    return " ".join(text.replace("``", "`").split())


def _structural(node: Any, defs: dict[str, Any]) -> Any:
    """Rewrite one pydantic JSON-schema node as a structural schema node."""
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[1]]
        extra = {k: v for k, v in node.items() if k != "$ref"}
        return _structural({**target, **extra}, defs)
    if "anyOf" in node:
        branches = [b for b in node["anyOf"] if b.get("type") != "null"]
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        if rest.get("default", "") is None:
            del rest["default"]
        if len(branches) == 1:
            merged = _structural(branches[0], defs)
            for key, value in rest.items():
                if key == "x-kubernetes-validations":
                    merged[key] = merged.get(key, []) + value
                else:
                    merged[key] = value
            return _structural(merged, defs)
        types = sorted({b.get("type") for b in branches})
        if types == ["integer", "string"]:  # int-or-string quantities
            return _structural(rest, defs)
        raise ValueError(f"cannot express anyOf {node['anyOf']!r} in a structural schema")
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP:
            continue
        if key == "properties":
            out[key] = {k: _structural(v, defs) for k, v in value.items()}
        elif key == "items":
            out[key] = _structural(value, defs)
        elif key == "description":
            out[key] = _clean_text(value)
        elif key == "const":
            out["enum"] = [value]
        else:
            out[key] = value
    additional = node.get("additionalProperties")
    if isinstance(additional, dict) and additional:
        out["additionalProperties"] = _structural(additional, defs)
    elif node.get("type") == "object" and "properties" not in node:
        out["x-kubernetes-preserve-unknown-fields"] = True
    if not out.get("type") and not out.get("x-kubernetes-int-or-string"):
        # Any: a free-form value (e.g. a JSON patch value).
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def schema_of(resource: type[Resource]) -> dict[str, Any]:
    """The openAPIV3Schema of a resource (spec and status from the models)."""
    raw = resource.model_json_schema(by_alias=True, mode="validation")
    defs = raw.get("$defs", {})
    props = raw["properties"]
    schema: dict[str, Any] = {
        "type": "object",
        "description": _clean_text(resource.__doc__ or ""),
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string", "description": "propagator.io/v1alpha1"},
            "kind": {"type": "string", "description": resource.crd.kind},
            "metadata": {"type": "object"},
            "spec": _structural(props["spec"], defs),
            "status": _structural(props["status"], defs),
        },
    }
    if resource.crd.rules:
        schema["x-kubernetes-validations"] = [r.as_cel() for r in resource.crd.rules]
    return schema


def crd_of(resource: type[Resource]) -> dict[str, Any]:
    """The CustomResourceDefinition of one resource."""
    info = resource.crd
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": info.name},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": info.kind,
                "listKind": f"{info.kind}List",
                "plural": info.plural,
                "singular": info.kind.lower(),
                "shortNames": list(info.short_names),
                "categories": list(info.categories),
            },
            "scope": info.scope,
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [c.as_crd() for c in info.columns],
                    "schema": {"openAPIV3Schema": schema_of(resource)},
                }
            ],
        },
    }


def crds() -> list[dict[str, Any]]:
    """Every CustomResourceDefinition of Propagator."""
    return [crd_of(r) for r in RESOURCES]


def crd_filename(resource: type[Resource]) -> str:
    """File name of a CRD in ``charts/propagator/crds/``."""
    return f"{resource.crd.name}.yaml"


class _PlainDumper(yaml.SafeDumper):
    """Writes shared sub-schemas out in full: anchors would only puzzle readers of the CRDs."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def to_yaml(docs: list[dict[str, Any]]) -> str:
    """YAML documents, stable across runs (what ``propagator crds`` prints)."""
    return yaml.dump_all(docs, Dumper=_PlainDumper, sort_keys=False, width=100)
