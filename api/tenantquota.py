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


PodSecurityLevel = Literal["privileged", "baseline", "restricted"]
ServiceType = Literal["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"]
_CLUSTER_IP_ONLY: list[ServiceType] = ["ClusterIP"]


class PodSecurity(KubeModel):
    """The Pod Security Standard the tenant's pods meet on every member."""

    level: PodSecurityLevel | None = None
    """``restricted``, ``baseline`` or ``privileged`` (only where the platform allows it:
    PROPAGATOR_POD_SECURITY_PRIVILEGED); default: the platform's
    (PROPAGATOR_POD_SECURITY_DEFAULT, ``baseline`` unless set). The hub refuses an
    application with a pod template below it, and the tenant's member namespaces carry the
    matching ``pod-security.kubernetes.io`` labels, so each member's Pod Security Admission
    refuses such pods too."""


class ServiceExposure(KubeModel):
    """How the tenant's applications may expose what they run."""

    types: list[ServiceType] = Field(
        default_factory=lambda: _CLUSTER_IP_ONLY.copy(),
        max_length=4,
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    """Service types the tenant may use (default ClusterIP only; a LoadBalancer's node
    ports come with it)."""
    external_ips: bool = Field(default=False, alias="externalIPs")
    """Whether a Service may set ``spec.externalIPs`` (traffic to those addresses anywhere
    in the member goes to the tenant's pods: never, unless the platform says so)."""
    ingress_classes: list[ObjectName] | None = Field(
        default=None, max_length=50, json_schema_extra={"x-kubernetes-list-type": "set"}
    )
    """IngressClasses an Ingress must name (``spec.ingressClassName``); unset: any."""
    gateway_classes: list[ObjectName] | None = Field(
        default=None, max_length=50, json_schema_extra={"x-kubernetes-list-type": "set"}
    )
    """GatewayClasses a Gateway must name (``spec.gatewayClassName``); unset: any."""


class LimitRangeItem(KubeModel):
    """One entry of the default LimitRange (as a LimitRange's ``spec.limits`` entry)."""

    type: Literal["Container", "Pod", "PersistentVolumeClaim"]
    """What the entry limits."""
    default: ResourceList = Field(default_factory=dict)
    """Limits given to containers that state none (type Container)."""
    default_request: ResourceList = Field(default_factory=dict)
    """Requests given to containers that state none (type Container)."""
    max: ResourceList = Field(default_factory=dict)
    """Largest limit allowed."""
    min: ResourceList = Field(default_factory=dict)
    """Smallest request allowed."""
    max_limit_request_ratio: ResourceList = Field(default_factory=dict)
    """Largest limit-to-request ratio allowed."""


class NetworkIsolation(KubeModel):
    """The default NetworkPolicy of each tenant namespace: which pods may connect to the
    tenant's pods."""

    ingress_from: Literal["SameTenant", "SameNamespace"] = "SameTenant"
    """``SameTenant``: pods in any of the tenant's namespaces on that member;
    ``SameNamespace``: pods of the same namespace only."""
    allowed_namespaces: list[LabelSelector] = Field(default_factory=list, max_length=20)
    """Namespaces (by label) whose pods may connect as well, e.g. an ingress controller's
    (``kubernetes.io/metadata.name: ingress-nginx``)."""


class NamespaceDefaults(KubeModel):
    """Objects the platform keeps in each of the tenant's namespaces on every member (the
    tenant may not write these kinds itself: PROPAGATOR_PLATFORM_OWNED_KINDS)."""

    limits: list[LimitRangeItem] | None = Field(default=None, min_length=1, max_length=10)
    """A LimitRange ``propagator-tenant-<tenant>`` with these entries."""
    network_policy: NetworkIsolation | None = None
    """A NetworkPolicy ``propagator-tenant-<tenant>`` selecting every pod of the
    namespace."""


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
    pod_security: PodSecurity | None = None
    """The Pod Security Standard of the tenant's pods (default: the platform's)."""
    services: ServiceExposure | None = None
    """Service types, external IPs, ingress and gateway classes the tenant may use
    (default: ClusterIP Services only)."""
    namespace_defaults: NamespaceDefaults | None = None
    """A LimitRange and a NetworkPolicy kept in each of the tenant's member namespaces."""

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
