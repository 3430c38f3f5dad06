"""MemberCluster: one member cluster as the hub knows it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from api.common import Condition, DnsLabel, ObservedResources, SecretKeyRef, conditions_field
from api.model import KubeModel
from api.resource import AGE, CrdInfo, PrinterColumn, Resource
from api.taints import Taint

MAX_NAMESPACES = 64
"""Each listed namespace costs a watch per kind propagated to the member."""


class MemberClusterSpec(KubeModel):
    """How to reach a member cluster and where it sits in the fleet."""

    secret_ref: SecretKeyRef
    """The Secret (on the hub) whose key holds this cluster's kubeconfig. Kubeconfigs that
    run a command (exec, auth-provider) are refused unless the operator allows them."""
    layer: DnsLabel = "default"
    """Scheduling layer (tier) such as high-performance, edge or backup."""
    region: str | None = Field(default=None, max_length=63)
    """Region of the cluster, e.g. eu-west."""
    zone: str | None = Field(default=None, max_length=63)
    """Zone of the cluster, e.g. eu-west-1a."""
    provider: str | None = Field(default=None, max_length=63)
    """Infrastructure provider, e.g. aws, gcp, on-prem."""
    taints: list[Taint] = Field(
        default_factory=list,
        max_length=32,
        # Keyed, so the controller's server-side apply owns only the taints it adds.
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["key", "effect"],
        },
    )
    """Taints keep applications away unless they tolerate them. The controller adds
    propagator.io/not-ready and propagator.io/unreachable itself."""
    namespaces: list[DnsLabel] = Field(
        default_factory=list,
        max_length=MAX_NAMESPACES,
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    """The only namespaces Propagator may use there (empty: the whole cluster), as when the
    kubeconfig's credentials reach only these (a tenant's share of a cluster). They must
    exist: none is created. The controller's caches watch each of them, not the whole
    cluster; an object in any other namespace, or a cluster-scoped one, is refused for
    this member before anything is written there."""


class ApiEnablement(KubeModel):
    """Kinds served by one group/version of the member."""

    group_version: str
    """e.g. apps/v1."""
    kinds: list[str] = Field(default_factory=list)
    """Kinds served in that group/version."""


class ClusterResources(KubeModel):
    """Capacity of the member summed over its nodes (cpu, memory, pods)."""

    allocatable: ObservedResources = Field(default_factory=dict)
    """What the nodes offer."""
    allocated: ObservedResources = Field(default_factory=dict)
    """Requests of the pods that are not terminated."""
    available: ObservedResources = Field(default_factory=dict)
    """allocatable minus allocated."""


class NodeCounts(KubeModel):
    """Nodes of the member."""

    total: int = Field(default=0, ge=0)
    """All nodes."""
    ready: int = Field(default=0, ge=0)
    """Nodes whose Ready condition is True."""


class MemberClusterStatus(KubeModel):
    """What the controller last observed on the member."""

    conditions: list[Condition] = conditions_field()
    """Ready: the member answers its probes."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The .metadata.generation this status reflects."""
    kubernetes_version: str | None = None
    """Version reported by the member's API server."""
    api_enablements: list[ApiEnablement] = Field(default_factory=list)
    """Group/versions and kinds the member serves."""
    resources: ClusterResources | None = None
    """Allocatable, allocated and available cpu, memory and pods."""
    nodes: NodeCounts | None = None
    """Node counts."""
    last_probe_time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    """When the member was last probed."""


class MemberCluster(Resource):
    """A member cluster: how to reach it and its layer, region, zone, provider and taints."""

    crd = CrdInfo(
        kind="MemberCluster",
        plural="memberclusters",
        short_names=("mc",),
        scope="Cluster",
        columns=(
            PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status'),
            PrinterColumn("Layer", ".spec.layer"),
            PrinterColumn("Region", ".spec.region"),
            PrinterColumn("Version", ".status.kubernetesVersion"),
            PrinterColumn("CPU-Available", ".status.resources.available.cpu"),
            AGE,
            PrinterColumn("Zone", ".spec.zone", priority=1),
            PrinterColumn("Provider", ".spec.provider", priority=1),
            PrinterColumn("Nodes", ".status.nodes.ready", "integer", priority=1),
        ),
    )
    kind: Literal["MemberCluster"] = "MemberCluster"
    spec: MemberClusterSpec
    status: MemberClusterStatus | None = None
