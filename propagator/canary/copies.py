"""What a cluster runs of an application with a canary: each workload a canary splits (a
Deployment, or any kind whose interpreter rules say ``canaryCopies``: :data:`SplitKinds`)
as a stable copy (its own name, pods labelled ``propagator.io/track: stable``) and, while
a canary runs there, a canary copy (``<name>-canary``, ``track: canary``, a selector of
its own); each Service beside two that select one track each (``<svc>-stable``,
``<svc>-canary``).

Both copies' pods match the application's own Services, whose selectors do not name the
track, so the replica split is the traffic split. Where a router splits traffic itself, its
weights follow the step exactly: an NGINX canary Ingress gets the step's
``canary-weight``, and a Gateway API HTTPRoute's reference to a Service becomes the two
track Services weighted ``100 - w`` and ``w``. Pure: objects in, objects out.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from api.rollout import TRACK_LABEL
from propagator.canary.split import split
from propagator.interpreter.pointer import read_pointer, write_pointer
from propagator.interpreter.registry import builtin_rules
from propagator.interpreter.rules import CanaryFields

ClusterMode = Literal["latest", "stable", "split", "folding"]
"""What a cluster runs: ``latest`` (the new revision, one copy), ``stable`` (the stable
revision's Deployments), ``split`` (stable and canary copies at the step's weight),
``folding`` (the stable copy already on the new revision at full size, the canary copy
kept until it is Available)."""

CANARY_SUFFIX = "-canary"
STABLE_SUFFIX = "-stable"
DEPLOYMENT = ("apps/v1", "Deployment")
SplitKinds = Mapping[tuple[str, str], CanaryFields]
"""(apiVersion, kind) of the workloads a canary runs as two copies, with where each keeps
its replicas, pod template and selector (from the interpreter rules)."""
_BUILT_IN = builtin_rules().canary_fields(*DEPLOYMENT)
assert _BUILT_IN is not None  # the built-in Deployment rules say canaryCopies
DEPLOYMENTS: SplitKinds = {DEPLOYMENT: _BUILT_IN}
"""What the built-in rules split (the default where no rules are given)."""
SERVICE = ("v1", "Service")
INGRESS = ("networking.k8s.io/v1", "Ingress")
GATEWAY_GROUP = "gateway.networking.k8s.io"
NGINX_CANARY = "nginx.ingress.kubernetes.io/canary"
NGINX_CANARY_WEIGHT = "nginx.ingress.kubernetes.io/canary-weight"
_MAX_SERVICE_NAME = 63


class CanaryError(ValueError):
    """The manifests cannot run as a canary (the message names the object and why)."""


def kind_key_of(obj: Mapping[str, Any]) -> tuple[str, str]:
    return str(obj.get("apiVersion")), str(obj.get("kind"))


def name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def replicas_of(workload: Mapping[str, Any], fields: CanaryFields) -> int:
    """A workload's replicas (1 when unset, as the API server defaults a Deployment's)."""
    replicas = read_pointer(workload, fields.replicas)
    return replicas if isinstance(replicas, int) and replicas >= 0 else 1


def _labels(workload: Mapping[str, Any], fields: CanaryFields) -> Mapping[str, Any]:
    labels = read_pointer(workload, fields.template + "/metadata/labels")
    return labels if isinstance(labels, Mapping) else {}


def is_canary_copy(obj: Mapping[str, Any], kinds: SplitKinds) -> bool:
    """Whether ``obj`` is a canary copy (a split workload whose pods are on the canary
    track)."""
    fields = kinds.get(kind_key_of(obj))
    return fields is not None and _labels(obj, fields).get(TRACK_LABEL) == "canary"


def template_of(workload: Mapping[str, Any], fields: CanaryFields) -> Any:
    """A workload's pod template, without the track label (what a canary compares)."""
    template = copy.deepcopy(read_pointer(workload, fields.template) or {})
    labels = (template.get("metadata") or {}).get("labels") if isinstance(template, dict) else None
    if isinstance(labels, dict):
        labels.pop(TRACK_LABEL, None)
    return template


def compose(
    new: Sequence[Mapping[str, Any]],
    stable: Mapping[str, Mapping[str, Any]],
    mode: ClusterMode,
    weight: int,
    kinds: SplitKinds = DEPLOYMENTS,
) -> list[dict[str, Any]]:
    """The objects a cluster runs: ``new`` (the latest revision rendered for it) with its
    split workloads (``kinds``) as ``mode`` says. ``stable``: the stable revision's
    workloads rendered for the cluster, by name (one the stable revision does not have
    goes out as it is now); ``weight``: the canary share for ``split`` and ``folding``.
    The replicas are the latest revision's. Raises CanaryError."""
    out: list[dict[str, Any]] = []
    services = {
        name_of(o)
        for o in new
        if kind_key_of(o) == SERVICE and (o.get("spec") or {}).get("selector")
    }
    routed = weight if mode in ("split", "folding") else None
    for obj in new:
        kind = kind_key_of(obj)
        if kind == SERVICE:
            out += [copy.deepcopy(dict(obj)), *_track_services(obj)]
            continue
        if kind == INGRESS:
            out.append(_nginx_canary(obj, routed or 0))
            continue
        if kind[1] == "HTTPRoute" and kind[0].startswith(GATEWAY_GROUP + "/"):
            out.append(_split_route(obj, services, routed))
            continue
        fields = kinds.get(kind)
        if fields is None:
            out.append(copy.deepcopy(dict(obj)))
            continue
        replicas, before = replicas_of(obj, fields), stable.get(name_of(obj))
        if mode == "latest" or before is None:
            out.append(_tracked(obj, "stable", replicas, fields))
        elif mode == "stable":
            out.append(_tracked(before, "stable", replicas, fields))
        elif mode == "split":
            stable_replicas, canary_replicas = split(replicas, weight)
            out += [
                _tracked(before, "stable", stable_replicas, fields),
                _canary_copy(obj, canary_replicas, fields),
            ]
        else:  # folding
            out += [
                _tracked(obj, "stable", replicas, fields),
                _canary_copy(obj, split(replicas, weight)[1], fields),
            ]
    return out


def _write(obj: dict[str, Any], pointer: str, value: Any) -> None:
    if not write_pointer(obj, pointer, value):
        raise CanaryError(
            f"{kind_key_of(obj)[1]} {name_of(obj)}: {pointer} is not an object's field"
        )


def _tracked(
    workload: Mapping[str, Any], track: str, replicas: int, fields: CanaryFields
) -> dict[str, Any]:
    out = copy.deepcopy(dict(workload))
    _write(out, fields.replicas, replicas)
    labels = read_pointer(out, fields.template + "/metadata/labels")
    if not isinstance(labels, dict):
        labels = {}
        _write(out, fields.template + "/metadata/labels", labels)
    labels[TRACK_LABEL] = track
    return out


def _canary_copy(
    workload: Mapping[str, Any], replicas: int, fields: CanaryFields
) -> dict[str, Any]:
    out = _tracked(workload, "canary", replicas, fields)
    out["metadata"]["name"] = name_of(workload) + CANARY_SUFFIX
    if fields.selector is not None:
        match = read_pointer(out, fields.selector + "/matchLabels")
        if not isinstance(match, dict):
            match = {}
            _write(out, fields.selector + "/matchLabels", match)
        match[TRACK_LABEL] = "canary"
    return out


def _nginx_canary(ingress: Mapping[str, Any], weight: int) -> dict[str, Any]:
    """An Ingress marked as an NGINX canary (``nginx.ingress.kubernetes.io/canary:
    "true"``) gets the step's weight (0 where no canary runs); any other as it is."""
    out = copy.deepcopy(dict(ingress))
    annotations = (out.get("metadata") or {}).get("annotations") or {}
    if str(annotations.get(NGINX_CANARY)).lower() == "true":
        annotations[NGINX_CANARY_WEIGHT] = str(weight)
    return out


def _split_route(
    route: Mapping[str, Any], services: set[str], weight: int | None
) -> dict[str, Any]:
    """A Gateway API HTTPRoute whose backendRefs name one of ``services``: while a canary
    runs (``weight`` not None), each such reference becomes ``<svc>-stable`` at
    ``100 - weight`` and ``<svc>-canary`` at ``weight``; otherwise as it is."""
    out = copy.deepcopy(dict(route))
    if weight is None:
        return out
    for rule in (out.get("spec") or {}).get("rules") or []:
        if not isinstance(rule, dict):
            continue
        refs = []
        for ref in rule.get("backendRefs") or []:
            if (
                isinstance(ref, dict)
                and ref.get("name") in services
                and ref.get("kind", "Service") == "Service"
                and ref.get("group", "") == ""
            ):
                refs += [
                    {**ref, "name": ref["name"] + STABLE_SUFFIX, "weight": 100 - weight},
                    {**ref, "name": ref["name"] + CANARY_SUFFIX, "weight": weight},
                ]
            else:
                refs.append(ref)
        if "backendRefs" in rule:
            rule["backendRefs"] = refs
    return out


def _track_services(service: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``<svc>-stable`` and ``<svc>-canary``: ClusterIP Services with the same ports,
    each selecting one track (none for a Service without a selector)."""
    name, spec = name_of(service), service.get("spec") or {}
    selector = spec.get("selector")
    if not selector:
        return []
    if TRACK_LABEL in selector:
        raise CanaryError(
            f"Service {name}: its selector names {TRACK_LABEL}, which the canary sets on "
            "the pods; select the application's pods without it"
        )
    out = []
    for suffix, track in ((STABLE_SUFFIX, "stable"), (CANARY_SUFFIX, "canary")):
        if len(name + suffix) > _MAX_SERVICE_NAME:
            raise CanaryError(
                f"Service {name}: {name + suffix} would be longer than "
                f"{_MAX_SERVICE_NAME} characters; use a shorter Service name"
            )
        ports = [
            {k: v for k, v in port.items() if k != "nodePort"}
            for port in spec.get("ports") or []
            if isinstance(port, dict)
        ]
        meta = {
            k: v for k, v in (service.get("metadata") or {}).items() if k in ("namespace", "labels")
        }
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {**copy.deepcopy(meta), "name": name + suffix},
                "spec": {
                    "type": "ClusterIP",
                    "selector": {**selector, TRACK_LABEL: track},
                    "ports": ports,
                },
            }
        )
    return out
