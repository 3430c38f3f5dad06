"""TenantQuota: a tenant's share of every member cluster."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from api.common import (
    Condition,
    DnsLabel,
    ObjectName,
    ObservedResources,
    ResourceList,
    conditions_field,
)
from api.model import KubeModel, Rule
from api.resource import AGE, CrdInfo, PrinterColumn, Resource
from api.selectors import LabelSelector


class GroupKind(KubeModel):
    """A kind by API group and name, as Argo CD's AppProject allow lists name them."""

    group: str = Field(
        default="",
        max_length=253,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$",
    )
    """API group ("" for the core group), e.g. ``storage.k8s.io``."""
    kind: str = Field(min_length=1, max_length=63, pattern=r"^[A-Z][A-Za-z0-9]*$")
    """Kind, e.g. ``StorageClass``."""


class ClusterQuota(KubeModel):
    """Limits for the clusters picked by name or selector, replacing ``spec.hard`` there."""

    cluster_names: list[ObjectName] = Field(default_factory=list, max_length=1000)
    """MemberClusters these limits apply to."""
    cluster_selector: LabelSelector | None = None
    """Label selector over MemberClusters these limits apply to."""
    hard: ResourceList
    """Limits on those clusters (cpu, memory, pods, count/<resource>)."""

    rules = (
        Rule(
            cel="(has(self.clusterNames) && size(self.clusterNames) > 0) != "
            "has(self.clusterSelector)",
            message="give exactly one of clusterNames or clusterSelector",
            check=lambda q: bool(q.cluster_names) != (q.cluster_selector is not None),
        ),
    )


class TenantQuotaSpec(KubeModel):
    """The tenant's namespaces on the hub and its limits on each member cluster."""

    namespaces: list[ObjectName] = Field(
        default_factory=list, max_length=1000, json_schema_extra={"x-kubernetes-list-type": "set"}
    )
    """Hub namespaces whose ApplicationPropagations belong to the tenant."""
    namespace_selector: LabelSelector | None = None
    """Label selector over hub namespaces that belong to the tenant."""
    destinations: list[DnsLabel] = Field(
        default_factory=list, max_length=100, json_schema_extra={"x-kubernetes-list-type": "set"}
    )
    """Member namespaces the tenant's applications may write (default: the application's
    own hub namespace name, and nothing else)."""
    cluster_scoped_kinds: list[GroupKind] = Field(default_factory=list, max_length=50)
    """Cluster-scoped kinds the tenant's applications may create (default none; a Namespace
    only when it is one of the destinations). The platform's denied kinds stay denied."""
    hard: ResourceList = Field(default_factory=dict)
    """Default limits per member cluster: cpu, memory, pods, count/<resource>."""
    clusters: list[ClusterQuota] = Field(default_factory=list, max_length=100)
    """Per-cluster limits; the first entry that matches a cluster wins over hard."""

    rules = (
        Rule(
            cel="(has(self.namespaces) && size(self.namespaces) > 0) || "
            "has(self.namespaceSelector)",
            message="a tenant needs namespaces or a namespaceSelector",
            check=lambda s: bool(s.namespaces) or s.namespace_selector is not None,
        ),
    )


class ClusterUsage(KubeModel):
    """The tenant's limits and use on one member cluster."""

    name: str
    """MemberCluster name."""
    hard: ObservedResources = Field(default_factory=dict)
    """Limits in force there."""
    used: ObservedResources = Field(default_factory=dict)
    """What the tenant's applications request there."""


class TenantQuotaStatus(KubeModel):
    """Use of the quota per member cluster."""

    conditions: list[Condition] = conditions_field()
    """Exceeded: some cluster is over its limits."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The .metadata.generation this status reflects."""
    clusters: list[ClusterUsage] = Field(
        default_factory=list,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """Limits and use per member cluster."""
    busiest: str | None = Field(default=None, max_length=1024)
    """Per limited resource, the cluster where the tenant uses most of it, e.g.
    ``cpu 600m/1 on member-1, pods 4/6 on member-2`` (for ``kubectl get tq``)."""


class TenantQuota(Resource):
    """A tenant's namespaces and its resource limits on every member cluster."""

    crd = CrdInfo(
        kind="TenantQuota",
        plural="tenantquotas",
        short_names=("tq",),
        scope="Cluster",
        columns=(
            PrinterColumn("CPU", ".spec.hard.cpu"),
            PrinterColumn("Memory", ".spec.hard.memory"),
            PrinterColumn("Pods", ".spec.hard.pods"),
            PrinterColumn(
                "Busiest",
                ".status.busiest",
                description="Per resource, the member cluster where the tenant uses most",
            ),
            PrinterColumn("Exceeded", '.status.conditions[?(@.type=="Exceeded")].status'),
            AGE,
        ),
    )
    kind: Literal["TenantQuota"] = "TenantQuota"
    spec: TenantQuotaSpec
    status: TenantQuotaStatus | None = None
