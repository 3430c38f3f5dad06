"""MemberCluster: one member cluster as the hub knows it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from api.common import Condition, DnsLabel, ObservedResources, SecretKeyRef, conditions_field
from api.model import KubeModel, Rule
from api.resource import AGE, CrdInfo, PrinterColumn, Resource
from api.taints import Taint

MAX_NAMESPACES = 64
"""Each listed namespace costs a watch per kind propagated to the member."""


MemberMode = Literal["Push", "Pull"]
"""How a member gets its work: written by the hub (Push), or fetched by its agent (Pull)."""


class MemberClusterSpec(KubeModel):
    """How to reach a member cluster and where it sits in the fleet."""

    mode: MemberMode = "Push"
    """Push: the hub writes to the member with the kubeconfig in ``secretRef``. Pull: an
    agent in the member reads its work from the hub (namespace
    ``propagator-cluster-<name>``) and writes it there itself; the hub holds no credential
    of the member (docs/pull-mode.md)."""
    secret_ref: SecretKeyRef | None = None
    """The Secret (on the hub) whose key holds this cluster's kubeconfig (Push only).
    Kubeconfigs that run a command (exec, auth-provider) are refused unless the operator
    allows them."""
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

    rules = (
        Rule(
            cel="(has(self.mode) && self.mode == 'Pull') != has(self.secretRef)",
            message="a Push member needs secretRef (its kubeconfig); a Pull member has none "
            "(its agent connects to the hub)",
            check=lambda s: (s.mode == "Pull") != (s.secret_ref is not None),
        ),
    )


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


class AgentReport(KubeModel):
    """What a Pull member's agent reports of its cluster (the agent writes this field
    only; the controller copies it into the rest of the status)."""

    agent_version: str | None = Field(default=None, max_length=64)
    """The agent's version."""
    kubernetes_version: str | None = Field(default=None, max_length=64)
    """Version reported by the member's API server."""
    api_enablements: list[ApiEnablement] = Field(default_factory=list, max_length=1000)
    """Group/versions and kinds the member serves."""
    resources: ClusterResources | None = None
    """Allocatable, allocated and available cpu, memory and pods."""
    nodes: NodeCounts | None = None
    """Node counts."""


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
    agent: AgentReport | None = None
    """A Pull member: what its agent last reported."""


class MemberCluster(Resource):
    """A member cluster: how to reach it and its layer, region, zone, provider and taints."""

    crd = CrdInfo(
        kind="MemberCluster",
        plural="memberclusters",
        short_names=("mc",),
        scope="Cluster",
        columns=(
            PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status'),
            PrinterColumn("Mode", ".spec.mode"),
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
