"""Where an application goes: cluster choice, layers, spread and replica division."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from api.common import DnsLabel, ObjectName
from api.model import KubeModel, Rule, exactly_one
from api.selectors import LabelSelector
from api.taints import Toleration

MAX_WEIGHT = 10000


class StaticWeight(KubeModel):
    """Share of the replicas for one cluster, or for every cluster a selector picks."""

    cluster: ObjectName | None = None
    """A MemberCluster name."""
    selector: LabelSelector | None = None
    """A label selector over MemberClusters."""
    weight: int = Field(ge=1, le=MAX_WEIGHT)
    """Relative share, 1 or more."""

    rules = (
        exactly_one("cluster", "selector", "each weight names exactly one of cluster or selector"),
    )


class ReplicaWeights(KubeModel):
    """How Divided replicas are shared: fixed weights, or by what each cluster has free."""

    static: list[StaticWeight] = Field(default_factory=list, max_length=64)
    """Fixed weights per cluster or selector."""
    dynamic: Literal["AvailableCapacity"] | None = None
    """AvailableCapacity: in proportion to the replicas each cluster can still fit."""

    rules = (
        Rule(
            cel="(has(self.static) && size(self.static) > 0) != has(self.dynamic)",
            message="give exactly one of static or dynamic",
            check=lambda w: bool(w.static) != (w.dynamic is not None),
        ),
        Rule(
            cel="!has(self.static) || self.static.all(w, !has(w.cluster) || "
            "self.static.filter(v, has(v.cluster) && v.cluster == w.cluster).size() == 1)",
            message="a cluster may appear in at most one static weight",
            check=lambda w: (
                len([s.cluster for s in w.static if s.cluster])
                == len({s.cluster for s in w.static if s.cluster})
            ),
            field_path=".static",
        ),
    )


class ReplicaScheduling(KubeModel):
    """Duplicated: every cluster runs all replicas. Divided: the replicas are shared out.
    Aggregated: the replicas go to as few clusters as hold them."""

    mode: Literal["Duplicated", "Divided", "Aggregated"] = "Duplicated"
    """Duplicated, Divided or Aggregated."""
    weights: ReplicaWeights | None = None
    """How Divided replicas are shared (default: equally)."""

    rules = (
        Rule(
            cel="self.mode == 'Divided' || !has(self.weights)",
            message="weights apply only to mode Divided",
            check=lambda r: r.mode == "Divided" or r.weights is None,
        ),
    )


class Spread(KubeModel):
    """Spread the chosen clusters over groups: by a label, or by region, zone or provider."""

    by_label: str | None = Field(default=None, min_length=1, max_length=317)
    """Label key whose values form the groups."""
    by_field: Literal["region", "zone", "provider"] | None = None
    """MemberCluster field whose values form the groups."""
    min_groups: int | None = Field(default=None, ge=1)
    """At least this many groups."""
    max_groups: int | None = Field(default=None, ge=1)
    """At most this many groups."""

    rules = (
        exactly_one("by_label", "by_field"),
        Rule(
            cel="!has(self.minGroups) || !has(self.maxGroups) || self.minGroups <= self.maxGroups",
            message="minGroups must not exceed maxGroups",
            check=lambda s: (
                s.min_groups is None or s.max_groups is None or s.min_groups <= s.max_groups
            ),
        ),
    )


class PreferredClusters(KubeModel):
    """Clusters to favour when scoring, with a weight."""

    weight: int = Field(ge=1, le=100)
    """How much matching counts, 1 to 100."""
    selector: LabelSelector
    """Label selector over MemberClusters."""


class Placement(KubeModel):
    """Which member clusters of the fleet run the application, and with how many replicas."""

    cluster_selector: LabelSelector | None = None
    """Only clusters with these labels."""
    cluster_names: list[ObjectName] = Field(
        default_factory=list, max_length=1000, json_schema_extra={"x-kubernetes-list-type": "set"}
    )
    """Only these clusters."""
    exclude_clusters: list[ObjectName] = Field(
        default_factory=list, max_length=1000, json_schema_extra={"x-kubernetes-list-type": "set"}
    )
    """Never these clusters."""
    layers: list[DnsLabel] = Field(
        default_factory=list, max_length=16, json_schema_extra={"x-kubernetes-list-type": "set"}
    )
    """Layers to try in order: the next one is used only when the placement cannot be
    satisfied in the previous one (or, with overflow, for the replicas it cannot hold)."""
    overflow: bool = False
    """Divided and Aggregated with layers: fill the first layer as far as it goes and
    place the remaining replicas in the next (default: a layer is used only when it holds
    every replica, so an application stays within one tier)."""
    tolerations: list[Toleration] = Field(default_factory=list, max_length=32)
    """Taints of member clusters that this application tolerates."""
    preferred: list[PreferredClusters] = Field(default_factory=list, max_length=16)
    """Clusters to favour when scoring."""
    spread: Spread | None = None
    """Spread over regions, zones, providers or label values."""
    min_clusters: int | None = Field(default=None, ge=0)
    """Fewer fitting clusters than this makes the application unschedulable."""
    max_clusters: int | None = Field(default=None, ge=1)
    """At most this many clusters."""
    replicas: ReplicaScheduling = Field(default_factory=ReplicaScheduling)
    """How workload replicas are assigned to clusters."""

    rules = (
        Rule(
            cel="!has(self.minClusters) || !has(self.maxClusters) || "
            "self.minClusters <= self.maxClusters",
            message="minClusters must not exceed maxClusters",
            check=lambda p: (
                p.min_clusters is None or p.max_clusters is None or p.min_clusters <= p.max_clusters
            ),
        ),
        Rule(
            cel="!has(self.overflow) || !self.overflow || (has(self.replicas) && "
            "has(self.replicas.mode) && self.replicas.mode != 'Duplicated')",
            message="overflow applies only to replicas.mode Divided or Aggregated",
            check=lambda p: not p.overflow or p.replicas.mode != "Duplicated",
        ),
    )
