"""Fleet: a named set of member clusters."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from api.common import Condition, ObjectName, conditions_field
from api.model import KubeModel
from api.resource import AGE, CrdInfo, PrinterColumn, Resource
from api.selectors import LabelSelector


class FleetSpec(KubeModel):
    """Which member clusters belong to the fleet: named ones, selected ones, or both."""

    clusters: list[ObjectName] = Field(
        default_factory=list, max_length=10000, json_schema_extra={"x-kubernetes-list-type": "set"}
    )
    """Names of MemberClusters in the fleet."""
    cluster_selector: LabelSelector | None = None
    """Label selector over MemberClusters; an empty selector takes every member. With
    neither names nor a selector the fleet is empty."""


class FleetStatus(KubeModel):
    """Counts of the fleet's members."""

    conditions: list[Condition] = conditions_field()
    """Ready: at least one member is ready."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The .metadata.generation this status reflects."""
    clusters: int = Field(default=0, ge=0)
    """Members in the fleet."""
    ready_clusters: int = Field(default=0, ge=0)
    """Members that are Ready."""
    layers: dict[str, int] = Field(default_factory=dict)
    """Members per layer."""


class Fleet(Resource):
    """A named set of member clusters that applications are placed into."""

    crd = CrdInfo(
        kind="Fleet",
        plural="fleets",
        short_names=("fl",),
        scope="Cluster",
        columns=(
            PrinterColumn("Clusters", ".status.clusters", "integer"),
            PrinterColumn("Ready", ".status.readyClusters", "integer"),
            AGE,
        ),
    )
    kind: Literal["Fleet"] = "Fleet"
    spec: FleetSpec
    status: FleetStatus | None = None
