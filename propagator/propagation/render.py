"""Rendering an application's manifests for one member cluster.

Order: template values from the matching overrides, then Jinja2 (sandboxed, strict: an
undefined name is an error), then the overrides' JSON patches, then the replica count the
scheduler assigned. The template context is only the cluster (name, labels, layer, region,
zone), the application (name, namespace) and the override values: nothing of the
controller's process, environment or files.

A string that is exactly one expression (``"{{ values.replicas }}"``) becomes a number or
a boolean when it renders to one, so templated fields keep their types.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import jsonpatch
import yaml
from jinja2 import StrictUndefined, TemplateError, TemplateSyntaxError
from jinja2.sandbox import SandboxedEnvironment

from api.application import Override
from api.selectors import selects
from fleet.snapshot import ClusterInfo
from propagator.scheduler.demand import REPLICATED_KINDS

_ENV = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False)


class RenderError(ValueError):
    """A manifest that cannot be rendered for a cluster: names the cluster, the manifest and
    (for templates) the line."""


@dataclass(frozen=True)
class ApplicationRef:
    name: str
    namespace: str


def _describe(index: int, obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"manifest {index + 1} ({obj.get('kind', '?')} {meta.get('name', '?')})"


@functools.lru_cache(maxsize=4096)
def _compile(source: str) -> Any:
    return _ENV.from_string(source)


def _is_template(value: str) -> bool:
    return "{{" in value or "{%" in value


def _line_of(obj: Mapping[str, Any], source: str) -> int:
    """The line of ``source`` in the manifest written as YAML (what the user wrote)."""
    text = yaml.safe_dump(obj, sort_keys=False, width=10_000)
    for number, line in enumerate(text.splitlines(), start=1):
        if source in line or repr(source)[1:-1] in line:
            return number
    return 1


def _render_string(source: str, context: Mapping[str, Any]) -> Any:
    result = _compile(source).render(context)
    stripped = source.strip()
    whole_expression = (
        stripped.startswith("{{") and stripped.endswith("}}") and stripped.count("{{") == 1
    )
    if whole_expression:
        try:
            typed = yaml.safe_load(result)
        except yaml.YAMLError:
            return result
        if isinstance(typed, bool | int | float):
            return typed
    return result


def _walk(value: Any, context: Mapping[str, Any]) -> Any:
    if isinstance(value, str):
        return _render_string(value, context) if _is_template(value) else value
    if isinstance(value, list):
        return [_walk(v, context) for v in value]
    if isinstance(value, dict):
        return {k: _walk(v, context) for k, v in value.items()}
    return value


def _first_template_error(obj: Any, context: Mapping[str, Any]) -> tuple[str, Exception] | None:
    """Find which string of ``obj`` fails, to point at its line."""
    if isinstance(obj, str) and _is_template(obj):
        try:
            _render_string(obj, context)
        except (TemplateError, TypeError, ValueError) as exc:
            return obj, exc
        return None
    children = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, list) else []
    for child in children:
        if found := _first_template_error(child, context):
            return found
    return None


def matching_overrides(overrides: Iterable[Override], cluster: ClusterInfo) -> list[Override]:
    """The overrides that apply to ``cluster``, in the order they are written."""
    return [
        o
        for o in overrides
        if cluster.name in o.cluster_names or selects(o.cluster_selector, cluster.labels)
    ]


def template_context(
    cluster: ClusterInfo, app: ApplicationRef, overrides: Iterable[Override]
) -> dict[str, Any]:
    """What templates can read: cluster, app and values (later overrides win)."""
    values: dict[str, Any] = {}
    for override in overrides:
        values.update(copy.deepcopy(override.values))
    return {
        "cluster": {
            "name": cluster.name,
            "labels": dict(cluster.labels),
            "layer": cluster.layer,
            "region": cluster.region,
            "zone": cluster.zone,
            "provider": cluster.provider,
        },
        "app": {"name": app.name, "namespace": app.namespace},
        "values": values,
    }


def _targets(override: Override, obj: Mapping[str, Any]) -> bool:
    target = override.target
    if target is None:
        return True
    meta = obj.get("metadata") or {}
    return (
        (target.api_version is None or target.api_version == obj.get("apiVersion"))
        and (target.kind is None or target.kind == obj.get("kind"))
        and (target.name is None or target.name == meta.get("name"))
    )


def _identity_problem(obj: Mapping[str, Any]) -> str | None:
    """What an object lacks to be applied (apiVersion, kind, metadata.name), if anything."""
    for field in ("apiVersion", "kind"):
        if not isinstance(obj.get(field), str) or not obj.get(field):
            return f"{field} is required (a non-empty string), got {obj.get(field)!r}"
    name = (obj.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        return f"metadata.name is required (a non-empty string), got {name!r}"
    return None


def render_for_cluster(
    manifests: Iterable[Mapping[str, Any]],
    overrides: Iterable[Override],
    cluster: ClusterInfo,
    app: ApplicationRef,
    replicas: int | None = None,
) -> list[dict[str, Any]]:
    """Every manifest as it goes to ``cluster``; raises RenderError at the first problem."""
    applying = matching_overrides(overrides, cluster)
    context = template_context(cluster, app, applying)
    rendered = []
    for index, manifest in enumerate(manifests):
        where = f"cluster {cluster.name}: {_describe(index, manifest)}"
        try:
            obj = _walk(manifest, context)
        except (TemplateError, TypeError, ValueError) as exc:
            found = _first_template_error(manifest, context)
            source, error = found if found else ("", exc)
            line = (
                error.lineno
                if isinstance(error, TemplateSyntaxError) and not source
                else (_line_of(manifest, source))
            )
            raise RenderError(f"{where}, line {line}: {type(error).__name__}: {error}") from exc
        for number, override in enumerate(applying):
            if not override.patches or not _targets(override, obj):
                continue
            ops = [p.model_dump(by_alias=True, exclude_none=True) for p in override.patches]
            for op, patch in zip(ops, override.patches, strict=True):
                if patch.op in ("add", "replace", "test") and "value" not in op:
                    op["value"] = None
            try:
                obj = jsonpatch.apply_patch(obj, ops)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                raise RenderError(f"{where}: override {number + 1} does not apply: {exc}") from exc
        if problem := _identity_problem(obj):
            raise RenderError(f"{where}: {problem}")
        if replicas is not None and (obj.get("apiVersion"), obj.get("kind")) in REPLICATED_KINDS:
            obj.setdefault("spec", {})["replicas"] = replicas
        rendered.append(obj)
    return rendered
