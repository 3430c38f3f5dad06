"""Rendering an application's manifests for one member cluster.

Order: template values from the matching overrides, then Jinja2 (sandboxed, strict: an
undefined name is an error), then the overrides' JSON patches (their values rendered the
same way, so a name or namespace, which the hub checks as written in a manifest, can be set
per cluster), then the replica count the scheduler assigned. The template context is only
the cluster (name, labels, layer, region, zone), the application (name, namespace) and the
override values: nothing of the controller's process, environment or files.

A string that is exactly one expression (``"{{ values.replicas }}"``) becomes the value
of that expression — a number stays a number, a string stays a string (``NO``, ``017`` or
``12:30:00`` are not re-read as YAML 1.1), lists and maps stay lists and maps — so
templated fields keep the type the author meant. Rendering is pure and unbounded in time
here; the controller runs it in a bounded worker (:mod:`propagator.render.worker`).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import jsonpatch
import yaml
from jinja2 import TemplateSyntaxError

from api.application import Override
from api.charts import TEMPLATE_ANNOTATION, is_chart_release
from api.common import DNS_LABEL
from api.selectors import selects
from propagator.interpreter.pointer import write_pointer
from propagator.render.sandbox import ENVIRONMENT, NOT_JSON, json_value, whole_expression


class ClusterFacts(Protocol):
    """What rendering reads of a cluster (a ``ClusterInfo`` or a ``RenderTarget``)."""

    @property
    def name(self) -> str: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def layer(self) -> str: ...
    @property
    def region(self) -> str | None: ...
    @property
    def zone(self) -> str | None: ...
    @property
    def provider(self) -> str | None: ...


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
    return ENVIRONMENT.from_string(source)


@functools.lru_cache(maxsize=4096)
def _compile_expression(expression: str) -> Any:
    return ENVIRONMENT.compile_expression(expression, undefined_to_none=False)


def is_template(value: str) -> bool:
    """Whether ``value`` is rendered as a Jinja2 template."""
    return "{{" in value or "{%" in value


def _line_of(obj: Mapping[str, Any], source: str) -> int:
    """The line of ``source`` in the manifest written as YAML (what the user wrote)."""
    text = yaml.safe_dump(obj, sort_keys=False, width=10_000)
    for number, line in enumerate(text.splitlines(), start=1):
        if source in line or repr(source)[1:-1] in line:
            return number
    return 1


def _render_string(source: str, context: Mapping[str, Any]) -> Any:
    expression = whole_expression(source)
    if expression is not None:
        value = json_value(_compile_expression(expression)(**context))
        if value is not NOT_JSON:
            return value
    return _compile(source).render(context)


def _walk(value: Any, context: Mapping[str, Any]) -> Any:
    if isinstance(value, str):
        return _render_string(value, context) if is_template(value) else value
    if isinstance(value, list):
        return [_walk(v, context) for v in value]
    if isinstance(value, dict):
        return {k: _walk(v, context) for k, v in value.items()}
    return value


def _first_template_error(obj: Any, context: Mapping[str, Any]) -> tuple[str, Exception] | None:
    """Find which string of ``obj`` fails, to point at its line."""
    if isinstance(obj, str) and is_template(obj):
        try:
            _render_string(obj, context)
        except Exception as exc:  # anything a template raises is the template's problem
            return obj, exc
        return None
    children = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, list) else []
    for child in children:
        if found := _first_template_error(child, context):
            return found
    return None


def matching_overrides(overrides: Iterable[Override], cluster: ClusterFacts) -> list[Override]:
    """The overrides that apply to ``cluster``, in the order they are written."""
    return [
        o
        for o in overrides
        if cluster.name in o.cluster_names or selects(o.cluster_selector, cluster.labels)
    ]


def template_context(
    cluster: ClusterFacts, app: ApplicationRef, overrides: Iterable[Override]
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
    """What an object lacks to be applied (apiVersion, kind, metadata.name, a valid
    metadata.namespace), if anything."""
    for field in ("apiVersion", "kind"):
        if not isinstance(obj.get(field), str) or not obj.get(field):
            return f"{field} is required (a non-empty string), got {obj.get(field)!r}"
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return f"metadata.name is required (a non-empty string), got {name!r}"
    # The hub checks the namespace a manifest is written with; a patch may set another.
    # Empty is unset, as in Kubernetes: the application's namespace.
    namespace = meta.get("namespace")
    if namespace not in (None, "") and not (
        isinstance(namespace, str) and DNS_LABEL.fullmatch(namespace)
    ):
        return (
            f"metadata.namespace must be a lowercase RFC 1123 label of at most 63 characters "
            f"(a-z, 0-9 and '-', starting and ending with a letter or digit), got {namespace!r}"
        )
    return None


def _patches(
    override: Override, number: int, context: Mapping[str, Any], cluster: str
) -> list[dict[str, Any]]:
    """``override``'s patches as JSON patch operations, their values rendered like the
    manifests' strings (a templated name or namespace, which the hub would refuse in a
    manifest, is set per cluster this way)."""
    ops = []
    for index, patch in enumerate(override.patches):
        op = patch.model_dump(by_alias=True, exclude_none=True)
        if patch.op in ("add", "replace", "test"):
            try:
                op["value"] = _walk(op.get("value"), context)
            except Exception as exc:  # anything a template raises is the template's problem
                found = _first_template_error(op.get("value"), context)
                error = found[1] if found else exc
                raise RenderError(
                    f"cluster {cluster}: override {number + 1}, patch {index + 1} "
                    f"({patch.op} {patch.path}): {type(error).__name__}: {error}"
                ) from exc
        ops.append(op)
    return ops


def render_for_cluster(
    manifests: Iterable[Mapping[str, Any]],
    overrides: Iterable[Override],
    cluster: ClusterFacts,
    app: ApplicationRef,
    replicas: int | None = None,
    replica_fields: Iterable[tuple[str, str, str]] = (),
    charts: Charts | None = None,
) -> list[dict[str, Any]]:
    """Every manifest as it goes to ``cluster`` (a chart release: the objects its chart
    renders there, by ``charts``), with ``replicas`` (when given) written at the pointer
    ``replica_fields`` names for its apiVersion and kind; raises RenderError at the first
    problem."""
    fields = {(a, k): pointer for a, k, pointer in replica_fields}
    applying = matching_overrides(overrides, cluster)
    context = template_context(cluster, app, applying)
    patches = [_patches(o, n, context, cluster.name) for n, o in enumerate(applying)]
    rendered = []
    for index, manifest in enumerate(manifests):
        where = f"cluster {cluster.name}: {_describe(index, manifest)}"
        if is_chart_release(manifest):
            objects = _chart_objects(manifest, context, cluster.name, where, charts)
        else:
            objects = [_rendered(manifest, context, where)]
        for obj in objects:
            if is_chart_release(manifest):
                where = f"cluster {cluster.name}: {_chart_object(manifest, obj)}"
            for number, (override, ops) in enumerate(zip(applying, patches, strict=True)):
                if not ops or not _targets(override, obj):
                    continue
                try:
                    # A copy each time: an added value must not be shared between objects.
                    obj = jsonpatch.apply_patch(obj, copy.deepcopy(ops))
                except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                    raise RenderError(
                        f"{where}: override {number + 1} does not apply: {exc}"
                    ) from exc
            if problem := _identity_problem(obj):
                raise RenderError(f"{where}: {problem}")
            field = fields.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
            if (
                replicas is not None
                and field is not None
                and not write_pointer(obj, field, replicas)
            ):
                raise RenderError(
                    f"{where}: {field} cannot hold the replicas (a parent is not an object)"
                )
            rendered.append(obj)
    return rendered


def _rendered(manifest: Mapping[str, Any], context: Mapping[str, Any], where: str) -> Any:
    """``manifest`` with its templates rendered; RenderError naming the line that fails."""
    try:
        return _walk(manifest, context)
    except Exception as exc:  # anything a template raises is the template's problem
        found = _first_template_error(manifest, context)
        source, error = found if found else ("", exc)
        line = (
            error.lineno
            if isinstance(error, TemplateSyntaxError) and not source
            else (_line_of(manifest, source))
        )
        raise RenderError(f"{where}, line {line}: {type(error).__name__}: {error}") from exc


class ChartRenderError(ValueError):
    """A chart that could not be rendered for a cluster; says why (the template and line
    when it can)."""


@dataclass(frozen=True)
class Charts:
    """How charts are rendered for one cluster."""

    expand: Callable[[Mapping[str, Any], str], list[dict[str, Any]]]
    """A chart release (with its archive) and its values as rendered for the cluster ->
    the chart's objects there; raises ChartRenderError."""


def _chart_objects(
    release: Mapping[str, Any],
    context: Mapping[str, Any],
    cluster: str,
    where: str,
    charts: Charts | None,
) -> list[dict[str, Any]]:
    """The objects ``release``'s chart renders for the cluster; RenderError saying why not."""
    chart = release.get("chart") or {}
    label = f"cluster {cluster}: chart {chart.get('name', '?')} {chart.get('version', '?')}"
    if charts is None:
        raise RenderError(f"{label}: charts are not rendered here")
    source = release.get("values") or ""
    if not isinstance(source, str):
        raise RenderError(f"{label}: values must be YAML text, got {type(source).__name__}")
    try:
        values = _render_string(source, context) if is_template(source) else source
    except Exception as exc:  # anything a template raises is the template's problem
        raise RenderError(f"{label}: values: {type(exc).__name__}: {exc}") from exc
    try:
        return charts.expand(release, str(values))
    except ChartRenderError as exc:
        raise RenderError(f"{label}: {exc}") from exc


def _chart_object(release: Mapping[str, Any], obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    template = (meta.get("annotations") or {}).get(TEMPLATE_ANNOTATION, "?")
    chart = (release.get("chart") or {}).get("name", "?")
    return f"chart {chart}, {template} ({obj.get('kind', '?')} {meta.get('name', '?')})"
