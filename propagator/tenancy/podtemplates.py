"""Where a workload keeps the pods it makes: the pod templates the hub checks against the
tenant's Pod Security level before anything is written.

Pure. Core kinds are known here; any other kind is known by its interpreter rules'
``replicas.podTemplate`` (a custom workload a platform wrote rules for is checked like a
Deployment). A custom kind without such a rule is left to the member's own Pod Security
Admission, which the tenant's namespace labels turn on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from propagator.interpreter.pointer import tokens
from propagator.interpreter.registry import Interpreters
from propagator.tenancy.podsecurity import Level, Violation, violations

TEMPLATE_PATHS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "Pod"): (),
    ("", "PodTemplate"): ("template",),
    ("", "ReplicationController"): ("spec", "template"),
    ("apps", "Deployment"): ("spec", "template"),
    ("apps", "ReplicaSet"): ("spec", "template"),
    ("apps", "StatefulSet"): ("spec", "template"),
    ("apps", "DaemonSet"): ("spec", "template"),
    ("batch", "Job"): ("spec", "template"),
    ("batch", "CronJob"): ("spec", "jobTemplate", "spec", "template"),
}
"""(group, kind) -> the path to its pod (or pod template: metadata and spec)."""


@dataclass(frozen=True)
class PodTemplate:
    """One pod an object makes: where it is (``spec.template``; ``""`` for a Pod), its
    metadata and its spec."""

    path: str
    metadata: Mapping[str, Any]
    spec: Mapping[str, Any]


def pod_template(
    obj: Mapping[str, Any], interpreters: Interpreters | None = None
) -> PodTemplate | None:
    """The pod ``obj`` makes, if it is a core workload kind or its kind's interpreter
    rules say where its pod template is."""
    group = str(obj.get("apiVersion")).rpartition("/")[0]
    path = TEMPLATE_PATHS.get((group, str(obj.get("kind"))))
    if path is None and interpreters is not None:
        rules = interpreters.rules_for(str(obj.get("apiVersion")), str(obj.get("kind")))
        pointer = rules.spec.replicas.pod_template if rules and rules.spec.replicas else None
        if pointer is not None:
            path = tuple(tokens(pointer))
    if path is None:
        return None
    node: Any = obj
    for step in path:
        node = node.get(step) if isinstance(node, Mapping) else None
    node = node if isinstance(node, Mapping) else {}
    metadata, spec = node.get("metadata"), node.get("spec")
    return PodTemplate(
        ".".join(path),
        metadata if isinstance(metadata, Mapping) else {},
        spec if isinstance(spec, Mapping) else {},
    )


def pod_security_problem(
    obj: Mapping[str, Any], level: Level, interpreters: Interpreters | None = None
) -> str | None:
    """Why the pod ``obj`` makes breaks ``level`` (every failed check: reason, container
    and field), or None."""
    template = pod_template(obj, interpreters)
    if template is None:
        return None
    found: list[Violation] = violations(level, template.metadata, template.spec)
    if not found:
        return None
    where = f"{template.path} " if template.path else ""
    shown = _bounded("; ".join(_bounded(str(v), 300) for v in found), 1200)
    return f"{where}breaks Pod Security level {level}: {shown}"


def _bounded(text: str, limit: int) -> str:
    """Names come from the tenant: what a status shows of them is bounded."""
    return text if len(text) <= limit else text[:limit] + "…"
