"""The rules Propagator ships for core kinds, written as a platform would write them.

A ResourceInterpreter on the hub for one of these kinds replaces the parts it gives
(health, replicas, status, dependencies) and keeps the others; ``propagator interpreter
defaults`` prints these as ResourceInterpreters to start from.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from api.interpreter import ResourceInterpreter, canonical_name
from api.tenantquota import GroupKind

# Kubernetes' own notion of "the controller has seen the latest spec".
_OBSERVED = (
    "self.?metadata.?generation.orValue(0) <= "
    "self.?status.?observedGeneration.orValue(self.?metadata.?generation.orValue(0))"
)


def _status(field: str, default: str = "0") -> str:
    return f"self.?status.?{field}.orValue({default})"


def _condition(type_: str, status: str) -> str:
    return (
        f"self.?status.?conditions.orValue([]).exists(c, c.type == '{type_}' && "
        f"c.?status.orValue('') == '{status}')"
    )


def _condition_message(type_: str) -> str:
    return (
        f"self.status.conditions.filter(c, c.type == '{type_}')"
        f".map(c, c.?reason.orValue('') + ': ' + c.?message.orValue(''))[0]"
    )


def _named(items: str, field: str, kind: str, name: str = "name") -> str:
    """CEL: a ``{apiVersion: v1, kind, name}`` for each of ``items`` that has ``field``
    (its ``field.name``, or ``field.<name>``)."""
    return (
        f"{items}.filter(x, has(x.{field})).map(x, "
        f"{{'apiVersion': 'v1', 'kind': '{kind}', 'name': x.{field}.{name}}})"
    )


def _pod_dependencies(spec: str) -> str:
    """What pods of the pod spec at ``spec`` (a CEL path) use: ConfigMaps, Secrets and
    claims they mount (projected volumes too) or read (``env`` and ``envFrom``, of init
    containers too), their ServiceAccount and image pull Secrets."""
    volumes, containers = "p.?volumes.orValue([])", "cs"
    # Lists of lists (each container's env): flattened by the interpreter.
    per_container = [
        _named("c.?envFrom.orValue([])", "configMapRef", "ConfigMap"),
        _named("c.?envFrom.orValue([])", "secretRef", "Secret"),
        _named(
            "c.?env.orValue([]).filter(e, has(e.valueFrom)).map(e, e.valueFrom)",
            "configMapKeyRef",
            "ConfigMap",
        ),
        _named(
            "c.?env.orValue([]).filter(e, has(e.valueFrom)).map(e, e.valueFrom)",
            "secretKeyRef",
            "Secret",
        ),
    ]
    sources = "v.projected.?sources.orValue([])"
    projected = f"dyn({volumes}.filter(v, has(v.projected)).map(v, %s))"
    parts = [
        _named(volumes, "configMap", "ConfigMap"),
        _named(volumes, "secret", "Secret", "secretName"),
        _named(volumes, "persistentVolumeClaim", "PersistentVolumeClaim", "claimName"),
        projected % _named(sources, "configMap", "ConfigMap"),
        projected % _named(sources, "secret", "Secret"),
        "p.?imagePullSecrets.orValue([]).map(s, "
        "{'apiVersion': 'v1', 'kind': 'Secret', 'name': s.name})",
        "(p.?serviceAccountName.orValue('default') != 'default' ? "
        "[{'apiVersion': 'v1', 'kind': 'ServiceAccount', 'name': p.serviceAccountName}] : [])",
        *(f"dyn({containers}.map(c, {part}))" for part in per_container),
    ]
    return (
        f"cel.bind(p, {spec}, cel.bind(cs, p.?containers.orValue([]) + "
        f"p.?initContainers.orValue([]), {' + '.join(parts)}))"
    )


def _rolled_out(want: str, ready: str, updated: str) -> dict[str, Any]:
    """Healthy once the controller saw the spec and ``ready`` and ``updated`` reach
    ``want``."""
    return {
        "checks": [
            {
                "when": f"{_OBSERVED} && {_status(ready)} >= {want} && "
                f"{_status(updated, want)} >= {want}",
                "health": "Healthy",
            },
            {
                "when": "true",
                "health": "Progressing",
                "message": f"string({_status(ready)}) + '/' + string({want}) + ' {ready}'",
            },
        ]
    }


_REPLICAS = "self.?spec.?replicas.orValue(1)"


def _workload(template: str, count: str = _REPLICAS, divided: bool = True) -> dict[str, Any]:
    return {
        "count": count,
        "podTemplate": template,
        **({"field": "/spec/replicas"} if divided else {}),
    }


# A Deployment runs as a stable and a canary copy side by side, the copy selecting its own
# pods. StatefulSets (pods with identities and volumes), ReplicaSets (their Deployment's
# business) and DaemonSets (a pod per node) roll out at once.
_SPLIT = {"canaryCopies": True, "selector": "/spec/selector"}


_DEPLOYMENT = {
    "health": {
        "checks": [
            {
                "when": "self.?status.?conditions.orValue([]).exists(c, c.type == 'Progressing'"
                " && c.?reason.orValue('') == 'ProgressDeadlineExceeded')",
                "health": "Degraded",
                "message": _condition_message("Progressing"),
            },
            {
                "when": f"{_OBSERVED} && {_status('updatedReplicas')} >= {_REPLICAS} && "
                f"{_status('availableReplicas')} >= {_REPLICAS} && "
                f"{_status('replicas')} <= {_REPLICAS}",
                "health": "Healthy",
            },
            {
                "when": "true",
                "health": "Progressing",
                "message": f"string({_status('availableReplicas')}) + '/' + "
                f"string({_REPLICAS}) + ' available, ' + "
                f"string({_status('updatedReplicas')}) + ' updated'",
            },
        ]
    },
    "replicas": {**_workload("/spec/template"), **_SPLIT},
    "dependencies": {"objects": _pod_dependencies("self.?spec.?template.?spec.orValue({})")},
}

_POD_SPEC = "self.?spec.?template.?spec.orValue({})"

_SPECS: dict[tuple[str, str], dict[str, Any]] = {
    ("apps", "Deployment"): _DEPLOYMENT,
    ("apps", "StatefulSet"): {
        "health": _rolled_out(_REPLICAS, "readyReplicas", "updatedReplicas"),
        "replicas": _workload("/spec/template"),
        "dependencies": {"objects": _pod_dependencies(_POD_SPEC)},
    },
    ("apps", "ReplicaSet"): {
        "health": _rolled_out(_REPLICAS, "readyReplicas", "fullyLabeledReplicas"),
        "replicas": _workload("/spec/template"),
        "dependencies": {"objects": _pod_dependencies(_POD_SPEC)},
    },
    ("apps", "DaemonSet"): {
        "health": _rolled_out(
            _status("desiredNumberScheduled"), "numberReady", "updatedNumberScheduled"
        ),
        "replicas": {"podTemplate": "/spec/template", "perNode": True},
        "dependencies": {"objects": _pod_dependencies(_POD_SPEC)},
    },
    ("batch", "Job"): {
        "health": {
            "checks": [
                {
                    "when": _condition("Failed", "True"),
                    "health": "Degraded",
                    "message": _condition_message("Failed"),
                },
                {"when": _condition("Complete", "True"), "health": "Healthy"},
            ]
        },
        "replicas": _workload(
            "/spec/template", "self.?spec.?parallelism.orValue(1)", divided=False
        ),
        "dependencies": {"objects": _pod_dependencies(_POD_SPEC)},
    },
    ("batch", "CronJob"): {
        "health": {
            "checks": [
                {
                    "when": "self.?spec.?suspend.orValue(false)",
                    "health": "Healthy",
                    "message": "'suspended'",
                },
                {
                    # The last run ended (nothing active) without succeeding.
                    "when": "has(self.status) && has(self.status.lastScheduleTime) && "
                    "size(self.status.?active.orValue([])) == 0 && "
                    "(!has(self.status.lastSuccessfulTime) || "
                    "timestamp(self.status.lastSuccessfulTime) < "
                    "timestamp(self.status.lastScheduleTime))",
                    "health": "Degraded",
                    "message": "'the run scheduled at ' + self.status.lastScheduleTime + "
                    "' did not succeed'",
                },
            ],
            "otherwise": "Healthy",
        },
        "replicas": _workload(
            "/spec/jobTemplate/spec/template",
            "self.?spec.?jobTemplate.?spec.?parallelism.orValue(1)",
            divided=False,
        ),
        "dependencies": {
            "objects": _pod_dependencies(
                "self.?spec.?jobTemplate.?spec.?template.?spec.orValue({})"
            )
        },
    },
    ("", "Pod"): {
        "health": {
            "checks": [
                {"when": _status("phase", "''") + " == 'Succeeded'", "health": "Healthy"},
                {
                    "when": _status("phase", "''") + " == 'Failed'",
                    "health": "Degraded",
                    "message": "'failed: ' + " + _status("reason", "'unknown'"),
                },
                {
                    "when": "self.?status.?containerStatuses.orValue([]).exists(c, "
                    "c.?state.?waiting.?reason.orValue('') in ['CrashLoopBackOff', "
                    "'ImagePullBackOff', 'ErrImagePull', 'CreateContainerConfigError', "
                    "'InvalidImageName'])",
                    "health": "Degraded",
                    "message": "self.status.containerStatuses.filter(c, "
                    "has(c.state.waiting)).map(c, c.name + ': ' + "
                    "c.state.waiting.reason)[0]",
                },
                {
                    "when": _status("phase", "''")
                    + " == 'Running' && "
                    + _condition("Ready", "True"),
                    "health": "Healthy",
                },
                {
                    "when": "true",
                    "health": "Progressing",
                    "message": _status("phase", "'Pending'"),
                },
            ]
        },
        "replicas": {"count": "1", "podTemplate": ""},
        "dependencies": {"objects": _pod_dependencies("self.?spec.orValue({})")},
    },
    ("", "PersistentVolumeClaim"): {
        "health": {
            "checks": [
                {"when": _status("phase", "''") + " == 'Bound'", "health": "Healthy"},
                {
                    "when": _status("phase", "''") + " == 'Lost'",
                    "health": "Degraded",
                    "message": "'its volume is lost'",
                },
                {
                    "when": "true",
                    "health": "Progressing",
                    "message": _status("phase", "'Pending'") + " + ', not bound yet'",
                },
            ]
        }
    },
    ("", "Service"): {
        "health": {
            "checks": [
                {
                    "when": "self.?spec.?type.orValue('') == 'LoadBalancer' && "
                    "size(self.?status.?loadBalancer.?ingress.orValue([])) == 0",
                    "health": "Progressing",
                    "message": "'waiting for a load balancer address'",
                }
            ],
            "otherwise": "Healthy",
        }
    },
    ("networking.k8s.io", "Ingress"): {
        # Healthy either way: many ingress controllers never publish an address, and an
        # Ingress that waited for one would hold every application with one Progressing.
        "health": {
            "checks": [
                {
                    "when": "size(self.?status.?loadBalancer.?ingress.orValue([])) == 0",
                    "health": "Healthy",
                    "message": "'no address published'",
                }
            ],
            "otherwise": "Healthy",
        },
        "dependencies": {
            "objects": "self.?spec.?tls.orValue([]).filter(t, has(t.secretName)).map(t, "
            "{'apiVersion': 'v1', 'kind': 'Secret', 'name': t.secretName}) + "
            "dyn(self.?spec.?rules.orValue([]).map(r, r.?http.?paths.orValue([])"
            ".filter(p, has(p.backend.service)).map(p, {'apiVersion': 'v1', "
            "'kind': 'Service', 'name': p.backend.service.name})))"
        },
    },
    ("autoscaling", "HorizontalPodAutoscaler"): {
        "health": {
            "checks": [
                {
                    "when": _condition("AbleToScale", "False"),
                    "health": "Degraded",
                    "message": _condition_message("AbleToScale"),
                },
                {
                    "when": "self.?status.?conditions.orValue([]).exists(c, "
                    "c.type == 'ScalingActive' && c.?status.orValue('') == 'False' && "
                    "c.?reason.orValue('').startsWith('Failed'))",
                    "health": "Degraded",
                    "message": _condition_message("ScalingActive"),
                },
                {
                    "when": "size(self.?status.?conditions.orValue([])) == 0",
                    "health": "Progressing",
                    "message": "'not evaluated yet'",
                },
            ],
            "otherwise": "Healthy",
        },
        "dependencies": {
            "objects": "[{'apiVersion': self.spec.scaleTargetRef.?apiVersion.orValue('apps/v1'), "
            "'kind': self.spec.scaleTargetRef.kind, 'name': self.spec.scaleTargetRef.name}]"
        },
    },
    ("policy", "PodDisruptionBudget"): {
        "health": {
            "checks": [
                {
                    "when": f"{_OBSERVED} && {_status('currentHealthy')} >= "
                    f"{_status('desiredHealthy')}",
                    "health": "Healthy",
                },
                {
                    "when": "true",
                    "health": "Progressing",
                    "message": f"string({_status('currentHealthy')}) + '/' + "
                    f"string({_status('desiredHealthy')}) + ' healthy pods'",
                },
            ]
        }
    },
}


@cache
def builtin_interpreters() -> tuple[ResourceInterpreter, ...]:
    """The shipped rules, one ResourceInterpreter per kind."""
    out = []
    for (group, kind), spec in _SPECS.items():
        target = GroupKind(group=group, kind=kind)
        out.append(
            ResourceInterpreter.model_validate(
                {
                    "metadata": {"name": canonical_name(target)},
                    "spec": {"target": {"group": group, "kind": kind}, **spec},
                }
            )
        )
    return tuple(out)
