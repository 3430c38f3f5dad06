"""Objects a user can get wrong, with where the error must point and what it must say.

The same table runs against pydantic (tests/api/test_validation.py) and against the real hub
API server (tests/e2e/install/test_crd_validation.py), so the two validators cannot drift apart.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

NAMESPACE = "validation"


def _merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _spec(base: dict[str, Any], spec: dict[str, Any], drop: tuple[str, ...]) -> dict[str, Any]:
    merged = _merge(base, spec)
    for key in drop:
        merged.pop(key)
    return merged


def ap(spec: dict[str, Any], *, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    base_spec = {
        "fleet": "prod",
        "resources": {
            "manifests": [
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}}
            ]
        },
    }
    return {
        "apiVersion": "propagator.io/v1alpha1",
        "kind": "ApplicationPropagation",
        "metadata": {"name": "bad", "namespace": NAMESPACE},
        "spec": _spec(base_spec, spec, drop),
    }


def mc(spec: dict[str, Any], *, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    base = {"secretRef": {"namespace": "propagator-system", "name": "s"}}
    return {
        "apiVersion": "propagator.io/v1alpha1",
        "kind": "MemberCluster",
        "metadata": {"name": "bad"},
        "spec": _spec(base, spec, drop),
    }


def tq(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "propagator.io/v1alpha1",
        "kind": "TenantQuota",
        "metadata": {"name": "bad"},
        "spec": _merge({"namespaces": ["shop"]}, spec),
    }


def fl(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "propagator.io/v1alpha1",
        "kind": "Fleet",
        "metadata": {"name": "bad"},
        "spec": spec,
    }


def ri(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "propagator.io/v1alpha1",
        "kind": "ResourceInterpreter",
        "metadata": {"name": "widget.example.com"},
        "spec": {"target": {"group": "example.com", "kind": "Widget"}, **spec},
    }


def _check_of(**fields: Any) -> dict[str, Any]:
    return {"health": {"checks": [{"when": "true", "health": "Healthy", **fields}]}}


@dataclass(frozen=True)
class BadObject:
    """An object that must be rejected: ``field`` must be named, ``says`` must be said."""

    id: str
    obj: dict[str, Any]
    field: str
    says: str


def _check(fields: dict[str, Any]) -> dict[str, Any]:
    check = {"name": "errors", "address": "http://prometheus:9090", "query": "up", **fields}
    return {"canary": {"steps": [{"weight": 10}], "analysis": {"metrics": [check]}}}


def _weights(static: list[dict[str, Any]]) -> dict[str, Any]:
    return {"placement": {"replicas": {"mode": "Divided", "weights": {"static": static}}}}


def _steps(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"canary": {"steps": list(steps)}}


BAD_OBJECTS = [
    BadObject(
        "ap-chart-credentials-in-url",
        ap(
            {
                "resources": {
                    "charts": [{"repository": "https://u:pw@charts.example.com", "name": "web"}]
                }
            }
        ),
        "spec.resources.charts[0].repository",
        "should match",
    ),
    BadObject(
        "ap-chart-digest",
        ap(
            {
                "resources": {
                    "charts": [
                        {"repository": "oci://r.example.com/c", "name": "web", "digest": "md5:00"}
                    ]
                }
            }
        ),
        "spec.resources.charts[0].digest",
        "should match",
    ),
    BadObject(
        "ap-chart-values-from-kind",
        ap(
            {
                "resources": {
                    "charts": [
                        {
                            "repository": "oci://r.example.com/c",
                            "name": "web",
                            "valuesFrom": [{"kind": "Pod", "name": "x"}],
                        }
                    ]
                }
            }
        ),
        "spec.resources.charts[0].valuesFrom[0].kind",
        "Unsupported value",
    ),
    BadObject("ap-no-resources", ap({}, drop=("resources",)), "spec.resources", "Required"),
    BadObject(
        "ap-empty-resources",
        ap({"resources": {"manifests": []}}),
        "spec.resources",
        "list at least one manifest, selector or chart",
    ),
    BadObject(
        "ap-unknown-replica-mode",
        ap({"placement": {"replicas": {"mode": "Spread"}}}),
        "spec.placement.replicas.mode",
        "Duplicated",
    ),
    BadObject(
        "ap-min-above-max",
        ap({"placement": {"minClusters": 5, "maxClusters": 2}}),
        "spec.placement",
        "minClusters must not exceed maxClusters",
    ),
    BadObject(
        "ap-zero-weight",
        ap(_weights([{"cluster": "a", "weight": 0}])),
        "spec.placement.replicas.weights.static[0].weight",
        "1",
    ),
    BadObject(
        "ap-negative-weight",
        ap(_weights([{"cluster": "a", "weight": -3}])),
        "spec.placement.replicas.weights.static[0].weight",
        "1",
    ),
    BadObject(
        "ap-duplicate-weight-cluster",
        ap(_weights([{"cluster": "a", "weight": 1}, {"cluster": "a", "weight": 2}])),
        "spec.placement.replicas.weights.static",
        "a cluster may appear in at most one static weight",
    ),
    BadObject(
        "ap-weight-without-target",
        ap(_weights([{"weight": 2}])),
        "spec.placement.replicas.weights.static[0]",
        "each weight names exactly one of cluster or selector",
    ),
    BadObject(
        "ap-weights-with-duplicated",
        ap({"placement": {"replicas": {"weights": {"dynamic": "AvailableCapacity"}}}}),
        "spec.placement.replicas",
        "weights apply only to mode Divided",
    ),
    BadObject(
        "ap-unknown-field", ap({"placment": {"maxClusters": 2}}), "spec.placment", "unknown field"
    ),
    BadObject(
        "ap-unknown-nested-field",
        ap({"rollout": {"maxConcurency": 2}}),
        "spec.rollout.maxConcurency",
        "unknown field",
    ),
    BadObject(
        "ap-canary-steps-not-increasing",
        ap(_steps({"weight": 50}, {"weight": 20})),
        "spec.canary.steps",
        "step weights must be strictly increasing",
    ),
    BadObject(
        "ap-canary-steps-repeated",
        ap(_steps({"weight": 20}, {"weight": 20})),
        "spec.canary.steps",
        "step weights must be strictly increasing",
    ),
    BadObject(
        "ap-canary-weight-over-100",
        ap(_steps({"weight": 10}, {"weight": 150})),
        "spec.canary.steps[1].weight",
        "100",
    ),
    BadObject(
        "ap-canary-pause-not-duration",
        ap(_steps({"weight": 10, "pause": "five minutes"})),
        "spec.canary.steps[0].pause",
        "must be a duration such as 30s, 5m, 1h30m or 500ms",
    ),
    BadObject(
        "ap-max-concurrency-zero",
        ap({"rollout": {"maxConcurrency": 0}}),
        "spec.rollout.maxConcurrency",
        "1",
    ),
    BadObject(
        "ap-max-concurrency-above-ceiling",
        ap({"rollout": {"maxConcurrency": 501}}),
        "spec.rollout.maxConcurrency",
        "500",
    ),
    BadObject(
        "ap-negative-retry-attempts",
        ap({"rollout": {"retry": {"attempts": -1}}}),
        "spec.rollout.retry.attempts",
        "0",
    ),
    BadObject(
        "ap-selector-unknown-operator",
        ap(
            {
                "placement": {
                    "clusterSelector": {
                        "matchExpressions": [{"key": "env", "operator": "Has", "values": ["x"]}]
                    }
                }
            }
        ),
        "spec.placement.clusterSelector.matchExpressions[0].operator",
        "NotIn",
    ),
    BadObject(
        "ap-selector-in-without-values",
        ap(
            {
                "placement": {
                    "clusterSelector": {"matchExpressions": [{"key": "env", "operator": "In"}]}
                }
            }
        ),
        "spec.placement.clusterSelector.matchExpressions[0]",
        "values must be non-empty for operators In and NotIn",
    ),
    BadObject(
        "mc-no-secret-ref",
        mc({"layer": "edge"}, drop=("secretRef",)),
        "spec",
        "a Push member needs secretRef",
    ),
    BadObject("mc-pull-with-secret-ref", mc({"mode": "Pull"}), "spec", "a Pull member has none"),
    BadObject(
        "mc-taint-unknown-effect",
        mc({"taints": [{"key": "gpu", "effect": "Sometimes"}]}),
        "spec.taints[0].effect",
        "NoSchedule",
    ),
    BadObject(
        "mc-layer-not-dns-label",
        mc({"layer": "High_Performance"}),
        "spec.layer",
        "must be a DNS label",
    ),
    BadObject(  # (it becomes part of a path on the member)
        "mc-namespace-not-dns-label",
        mc({"namespaces": ["shop", "../kube-system"]}),
        "spec.namespaces[1]",
        "must be a DNS label",
    ),
    BadObject(  # each costs a watch per kind propagated there
        "mc-too-many-namespaces",
        mc({"namespaces": [f"team-{i}" for i in range(65)]}),
        "spec.namespaces",
        "at most 64 items",
    ),
    BadObject(
        "tq-unparsable-quantity",
        tq({"hard": {"cpu": "two cores"}}),
        "spec.hard[cpu]",
        "must be a non-negative quantity such as 500m, 2Gi or 10",
    ),
    BadObject(
        "tq-negative-limit",
        tq({"hard": {"memory": "-1Gi"}}),
        "spec.hard[memory]",
        "must be a non-negative quantity such as 500m, 2Gi or 10",
    ),
    BadObject(
        "tq-negative-integer-limit",
        tq({"hard": {"pods": -5}}),
        "spec.hard[pods]",
        "must be a non-negative quantity such as 500m, 2Gi or 10",
    ),
    BadObject(
        "fl-selector-notin-without-values",
        fl({"clusterSelector": {"matchExpressions": [{"key": "env", "operator": "NotIn"}]}}),
        "spec.clusterSelector.matchExpressions[0]",
        "values must be non-empty for operators In and NotIn",
    ),
    BadObject(
        "fl-selector-value-with-comma",
        fl({"clusterSelector": {"matchLabels": {"env": "a,b"}}}),
        "spec.clusterSelector.matchLabels",
        "a,b",
    ),
    BadObject(
        "fl-selector-key-not-a-label-key",
        fl({"clusterSelector": {"matchLabels": {"-env": "prod"}}}),
        "spec.clusterSelector.matchLabels",
        "an optional DNS-subdomain prefix of at most 253 characters",
    ),
    BadObject(
        "ap-selector-key-too-long",
        ap(
            {
                "placement": {
                    "clusterSelector": {
                        "matchExpressions": [{"key": "k" * 64, "operator": "Exists"}]
                    }
                }
            }
        ),
        "spec.placement.clusterSelector.matchExpressions[0].key",
        "k" * 64,
    ),
    BadObject(
        "ap-selector-value-with-space",
        ap(
            {
                "placement": {
                    "clusterSelector": {
                        "matchExpressions": [{"key": "env", "operator": "In", "values": ["a b"]}]
                    }
                }
            }
        ),
        "spec.placement.clusterSelector.matchExpressions[0].values[0]",
        "a b",
    ),
    BadObject(
        "ap-selector-gt-not-an-integer",
        ap(
            {
                "placement": {
                    "clusterSelector": {
                        "matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["many"]}]
                    }
                }
            }
        ),
        "spec.placement.clusterSelector.matchExpressions[0]",
        "one 64-bit integer for Gt and Lt",
    ),
    BadObject(
        "ap-toleration-lt-leading-zero",
        ap({"placement": {"tolerations": [{"key": "ms", "operator": "Lt", "value": "050"}]}}),
        "spec.placement.tolerations[0]",
        "value must be a 64-bit integer",
    ),
    BadObject(
        "mc-taint-value-with-space",
        mc({"taints": [{"key": "gpu", "value": "a b", "effect": "NoSchedule"}]}),
        "spec.taints[0].value",
        "a b",
    ),
    BadObject(
        "tq-quantity-with-space",
        tq({"hard": {"cpu": " 1"}}),
        "spec.hard[cpu]",
        "must be a non-negative quantity such as 500m, 2Gi or 10",
    ),
    BadObject(
        "tq-destination-not-a-namespace",
        tq({"destinations": ["Shop_Team"]}),
        "spec.destinations[0]",
        "must be a DNS label",
    ),
    BadObject(
        "tq-pod-security-level-unknown",
        tq({"podSecurity": {"level": "root"}}),
        "spec.podSecurity.level",
        "restricted",
    ),
    BadObject(
        "tq-service-type-unknown",
        tq({"services": {"types": ["ClusterIP", "HostNetwork"]}}),
        "spec.services.types[1]",
        "LoadBalancer",
    ),
    BadObject(
        "tq-ingress-class-not-a-name",
        tq({"services": {"ingressClasses": ["Public Internet"]}}),
        "spec.services.ingressClasses[0]",
        "should match",
    ),
    BadObject(
        "tq-limit-range-type-unknown",
        tq({"namespaceDefaults": {"limits": [{"type": "Node"}]}}),
        "spec.namespaceDefaults.limits[0].type",
        "Container",
    ),
    BadObject(
        "tq-limit-range-default-unparsable",
        tq({"namespaceDefaults": {"limits": [{"type": "Container", "default": {"cpu": "a lot"}}]}}),
        "spec.namespaceDefaults.limits[0].default[cpu]",
        "must be a non-negative quantity such as 500m, 2Gi or 10",
    ),
    BadObject(
        "tq-network-policy-ingress-unknown",
        tq({"namespaceDefaults": {"networkPolicy": {"ingressFrom": "Anywhere"}}}),
        "spec.namespaceDefaults.networkPolicy.ingressFrom",
        "SameTenant",
    ),
    BadObject(
        "tq-cluster-scoped-kind-lower-case",
        tq({"clusterScopedKinds": [{"group": "storage.k8s.io", "kind": "storageclass"}]}),
        "spec.clusterScopedKinds[0].kind",
        "should match",
    ),
    BadObject(
        "ap-retry-backoff-too-long",
        ap({"rollout": {"retry": {"backoff": "48h"}}}),
        "spec.rollout.retry.backoff",
        "backoff must be at most 10m",
    ),
    BadObject(
        "ap-retry-backoff-above-max-backoff",
        ap({"rollout": {"retry": {"backoff": "1m", "maxBackoff": "30s"}}}),
        "spec.rollout.retry",
        "backoff must not exceed maxBackoff",
    ),
    BadObject(
        "ap-canary-pause-too-long",
        ap(_steps({"weight": 10, "pause": "9999h"})),
        "spec.canary.steps[0].pause",
        "pause must be at most 24h",
    ),
    BadObject(
        "ap-canary-progress-deadline-zero",
        ap({"canary": {"steps": [{"weight": 10}], "analysis": {"progressDeadlineSeconds": 0}}}),
        "spec.canary.analysis.progressDeadlineSeconds",
        "greater than or equal to 1",
    ),
    BadObject(
        "ap-canary-check-without-bounds",
        ap(_check({})),
        "spec.canary.analysis.metrics[0]",
        "a metric check needs max, min or both",
    ),
    BadObject(
        "ap-canary-check-min-above-max",
        ap(_check({"min": 5, "max": 1})),
        "spec.canary.analysis.metrics[0]",
        "min must not exceed max",
    ),
    BadObject(
        "ap-canary-check-credentials-in-address",
        ap(_check({"max": 1, "address": "http://admin:secret@prometheus:9090"})),
        "spec.canary.analysis.metrics[0].address",
        "should match",
    ),
    BadObject(
        "ap-canary-check-interval-too-short",
        ap(_check({"max": 1, "interval": "1s"})),
        "spec.canary.analysis.metrics[0].interval",
        "interval must be between 5s and 1h",
    ),
    BadObject(
        "tq-boolean-is-not-a-quantity",
        tq({"hard": {"cpu": True}}),
        "spec.hard",
        "boolean",
    ),
    BadObject(
        "tq-quantity-too-long",
        tq({"hard": {"cpu": "9" * 100}}),
        "spec.hard",
        "64",
    ),
    BadObject(
        "ap-cluster-name-twice",
        ap({"placement": {"clusterNames": ["a", "b", "a"]}}),
        "spec.placement.clusterNames",
        "Duplicate value",
    ),
    BadObject(
        "ap-layer-twice",
        ap({"placement": {"layers": ["edge", "edge"]}}),
        "spec.placement.layers",
        "Duplicate value",
    ),
    BadObject(
        "fl-cluster-twice",
        fl({"clusters": ["m1", "m1"]}),
        "spec.clusters",
        "Duplicate value",
    ),
    BadObject(
        "tq-namespace-twice",
        tq({"namespaces": ["shop", "shop"]}),
        "spec.namespaces",
        "Duplicate value",
    ),
    BadObject(
        "mc-taint-twice",
        mc(
            {
                "taints": [
                    {"key": "gpu", "value": "a", "effect": "NoSchedule"},
                    {"key": "gpu", "value": "b", "effect": "NoSchedule"},
                ]
            }
        ),
        "spec.taints",
        "Duplicate value",
    ),
    BadObject(
        "ap-failover-toleration-zero",
        ap({"failover": {"clusterUnreachableAfter": "0s"}}),
        "spec.failover.clusterUnreachableAfter",
        "clusterUnreachableAfter must be between 1s and 24h",
    ),
    BadObject(
        "ap-failover-grace-period-too-long",
        ap({"failover": {"gracePeriod": "25h"}}),
        "spec.failover.gracePeriod",
        "gracePeriod must be between 1s and 24h",
    ),
    BadObject(
        "ap-application-failover-unhealthy-after-zero",
        ap({"failover": {"application": {"unhealthyAfter": "0s"}}}),
        "spec.failover.application.unhealthyAfter",
        "unhealthyAfter must be between 1s and 24h",
    ),
    BadObject(
        "ap-unknown-purge-mode",
        ap({"failover": {"application": {"purgeMode": "Never"}}}),
        "spec.failover.application.purgeMode",
        "Graciously",
    ),
    BadObject(
        "ri-unknown-health",
        ri(_check_of(health="Fine")),
        "spec.health.checks[0].health",
        "Progressing",
    ),
    BadObject(
        "ri-expression-too-long",
        ri(_check_of(when="true && " * 300 + "true")),
        "spec.health.checks[0].when",
        "2048",
    ),
    BadObject(
        "ri-no-checks",
        ri({"health": {"checks": []}}),
        "spec.health.checks",
        "1",
    ),
    BadObject(
        "ri-replicas-into-metadata",
        ri({"replicas": {"count": "1", "field": "/metadata/labels/size"}}),
        "spec.replicas.field",
        "field must not point into metadata, apiVersion or kind",
    ),
    BadObject(
        "ri-canary-copies-without-field",
        ri({"replicas": {"count": "self.spec.size", "canaryCopies": True}}),
        "spec.replicas",
        "canaryCopies needs field and podTemplate",
    ),
]
