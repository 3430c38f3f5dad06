"""Synthetic MemberCluster objects for benchmarks: 3 layers, 5 regions, some taints,
varied capacity. Deterministic for a given seed."""

from __future__ import annotations

import random
from typing import Any

LAYERS = ("high-performance", "edge", "backup")
REGIONS = ("eu-west", "us-east", "us-west", "ap-south", "sa-east")
PROVIDERS = ("aws", "gcp", "on-prem")


def member_clusters(count: int, seed: int = 42) -> list[dict[str, Any]]:
    """``count`` MemberCluster objects as the hub would return them, with status."""
    rng = random.Random(seed)
    clusters = []
    for i in range(count):
        region = REGIONS[i % len(REGIONS)]
        cpu = rng.choice((8, 16, 32, 64, 128))
        used = rng.randint(0, cpu * 1000)
        taints = []
        if rng.random() < 0.05:
            taints.append({"key": "propagator.io/not-ready", "effect": "NoSchedule"})
        if rng.random() < 0.10:
            taints.append({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"})
        ready = not taints or taints[0]["key"] != "propagator.io/not-ready"
        clusters.append(
            {
                "apiVersion": "propagator.io/v1alpha1",
                "kind": "MemberCluster",
                "metadata": {
                    "name": f"cluster-{i:05d}",
                    "resourceVersion": str(i + 1),
                    "labels": {
                        "env": rng.choice(("prod", "staging", "dev")),
                        "tier": rng.choice(("gold", "silver", "bronze")),
                        "team": f"team-{rng.randint(1, 20)}",
                    },
                },
                "spec": {
                    "secretRef": {"namespace": "propagator-system", "name": f"c{i}-kubeconfig"},
                    "layer": LAYERS[rng.randrange(len(LAYERS))],
                    "region": region,
                    "zone": f"{region}-{'abc'[rng.randrange(3)]}",
                    "provider": rng.choice(PROVIDERS),
                    "taints": taints,
                },
                "status": {
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True" if ready else "False",
                            "reason": "ProbeSucceeded",
                            "message": "",
                            "lastTransitionTime": "2026-01-01T00:00:00Z",
                        }
                    ],
                    "kubernetesVersion": "v1.37.2",
                    "apiEnablements": [
                        {"groupVersion": "v1", "kinds": ["ConfigMap", "Secret", "Service"]},
                        {
                            "groupVersion": "apps/v1",
                            "kinds": ["DaemonSet", "Deployment", "StatefulSet"],
                        },
                        {"groupVersion": "batch/v1", "kinds": ["Job"]},
                    ],
                    "resources": {
                        "allocatable": {
                            "cpu": str(cpu),
                            "memory": f"{cpu * 4}Gi",
                            "pods": str(cpu * 10),
                        },
                        "available": {
                            "cpu": f"{cpu * 1000 - used}m",
                            "memory": f"{(cpu * 4096) - used}Mi",
                            "pods": str(cpu * 10 - used // 100),
                        },
                    },
                    "nodes": {"total": cpu // 8, "ready": cpu // 8},
                },
            }
        )
    return clusters
