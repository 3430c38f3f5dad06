"""ApplicationPropagation: one application, described once, run on many clusters."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic.config import JsonDict

from api.charts import ChartSource
from api.common import Condition, ObjectName, conditions_field
from api.failover import EvictionReason, Failover
from api.memberowned import MemberOwnedField
from api.model import KubeModel, Rule, exactly_one
from api.placement import Placement
from api.resource import AGE, CrdInfo, PrinterColumn, Resource
from api.rollout import Canary, Rollout
from api.selectors import LabelSelector


class ResourceSelector(KubeModel):
    """Hub objects in the application's namespace to propagate, by name or by labels."""

    api_version: str = Field(min_length=1)
    """apiVersion of the objects, e.g. apps/v1."""
    kind: str = Field(min_length=1)
    """Kind of the objects, e.g. Deployment."""
    name: ObjectName | None = None
    """One object by name."""
    label_selector: LabelSelector | None = None
    """Every object of that kind with these labels."""

    rules = (exactly_one("name", "label_selector"),)


class Resources(KubeModel):
    """What to propagate: inline manifests and/or selected hub objects."""

    manifests: list[dict[str, Any]] = Field(
        default_factory=list,
        max_length=200,
        json_schema_extra={
            "items": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "x-kubernetes-embedded-resource": True,
            }
        },
    )
    """Kubernetes objects; string values may hold Jinja2 expressions rendered per cluster."""
    selectors: list[ResourceSelector] = Field(default_factory=list, max_length=50)
    """Hub objects in the application's namespace."""
    charts: list[ChartSource] = Field(default_factory=list, max_length=8)
    """Helm charts rendered per cluster (docs/charts.md); their objects follow the
    manifests and the selected objects."""

    rules = (
        Rule(
            cel="(has(self.manifests) ? size(self.manifests) : 0) + "
            "(has(self.selectors) ? size(self.selectors) : 0) + "
            "(has(self.charts) ? size(self.charts) : 0) > 0",
            message="list at least one manifest, selector or chart",
            check=lambda r: bool(r.manifests or r.selectors or r.charts),
        ),
    )


class PatchTarget(KubeModel):
    """Which manifests a patch applies to; unset fields match any."""

    api_version: str | None = None
    """apiVersion to match."""
    kind: str | None = None
    """Kind to match."""
    name: str | None = None
    """metadata.name to match."""


class JsonPatch(KubeModel):
    """One RFC 6902 JSON patch operation."""

    op: Literal["add", "remove", "replace", "copy", "move", "test"]
    """add, remove, replace, copy, move or test."""
    path: str = Field(pattern=r"^(/[^/]*)*$", max_length=1024)
    """JSON pointer, e.g. /spec/replicas."""
    value: Any = Field(
        default=None, json_schema_extra={"x-kubernetes-preserve-unknown-fields": True}
    )
    """Value for add, replace and test."""
    from_: str | None = Field(default=None, alias="from", pattern=r"^(/[^/]*)*$")
    """Source pointer for copy and move."""


class Override(KubeModel):
    """Per-cluster changes: JSON patches and/or template values for matching clusters."""

    cluster_selector: LabelSelector | None = None
    """Clusters with these labels."""
    cluster_names: list[ObjectName] = Field(default_factory=list, max_length=1000)
    """These clusters."""
    target: PatchTarget | None = None
    """Manifests the patches apply to (default: all)."""
    patches: list[JsonPatch] = Field(default_factory=list, min_length=1, max_length=100)
    """JSON patches applied after rendering; a value's strings may hold Jinja2 expressions
    too (e.g. a per-cluster metadata.namespace)."""
    values: dict[str, Any] = Field(default_factory=dict, min_length=1)
    """Extra template context, available as values.<name>."""

    rules = (
        Rule(
            cel="(has(self.clusterNames) && size(self.clusterNames) > 0) != "
            "has(self.clusterSelector)",
            message="give exactly one of clusterNames or clusterSelector",
            check=lambda o: bool(o.cluster_names) != (o.cluster_selector is not None),
        ),
        Rule(
            # minItems/minProperties rule out empty ones, so presence is enough.
            cel="has(self.patches) || has(self.values)",
            message="an override needs patches or values",
            check=lambda o: bool(o.patches or o.values),
        ),
    )


class Dependencies(KubeModel):
    """What the application's workloads use, taken from its hub namespace."""

    propagate: bool = True
    """Propagate the objects the workloads reference (by their kinds' dependency rules:
    volumes, env and envFrom, image pull Secrets, the ServiceAccount) to the same
    clusters; one no longer referenced is pruned."""
    roll_on_change: bool = False
    """A change to a referenced ConfigMap or Secret rolls the workloads that use it (their
    pod template carries a checksum of what they use)."""


class ClusterSuspension(KubeModel):
    """Member clusters that get no writes from this application for now."""

    clusters: list[ObjectName] = Field(default_factory=list, max_length=1000)
    """MemberCluster names."""
    cluster_selector: LabelSelector | None = None
    """Clusters whose labels match."""


class ApplicationPropagationSpec(KubeModel):
    """What to propagate, where, and how to roll it out."""

    fleet: ObjectName
    """The Fleet to place the application into."""
    resources: Resources
    """Manifests and/or hub objects to propagate."""
    placement: Placement = Field(default_factory=Placement)
    """Which clusters, and how many replicas each."""
    overrides: list[Override] = Field(default_factory=list, max_length=100)
    """Per-cluster patches and template values."""
    rollout: Rollout = Field(default_factory=Rollout)
    """Concurrency, retries and timeouts of the fan-out."""
    canary: Canary | None = None
    """Roll new versions out as a canary."""
    failover: Failover = Field(default_factory=Failover)
    """When replicas leave a member that stopped answering."""
    conflict_resolution: Literal["Abort", "Adopt"] = "Abort"
    """An object that already exists on a member without this application's stamp: Abort
    leaves it as it is and reports Conflict; Adopt takes it over. An object another
    application owns is never taken over."""
    member_owned: list[MemberOwnedField] = Field(default_factory=list, max_length=50)
    """Fields set when an object is created and then left to the member (an autoscaler,
    an operator, an engineer's ``kubectl scale``). A workload a HorizontalPodAutoscaler
    scales leaves its replicas to it without being listed here."""
    drift_policy: Literal["Heal", "Report"] = "Heal"
    """What a change made on a member to a field Propagator owns gets: Heal applies the
    object again; Report shows it in the status (per cluster), as an Event and in
    ``propagator_drift_detected_total``, and leaves it until the application changes or
    ``kubectl propagator sync`` asks."""
    dependencies: Dependencies | None = None
    """Bring the ConfigMaps, Secrets, ServiceAccounts and PersistentVolumeClaims the
    workloads use from the application's hub namespace."""
    suspend: bool = False
    """No writes to any member (no apply, heal or prune): each cluster keeps what it runs,
    drift is reported, a spec change waits (visibly) until this is false again."""
    suspended_clusters: ClusterSuspension | None = None
    """As ``suspend``, for these clusters only: the rollout skips them."""


class PlacedCluster(KubeModel):
    """One cluster chosen by the scheduler."""

    cluster: str
    """MemberCluster name."""
    layer: str | None = None
    """Layer that served the placement."""
    replicas: int | None = Field(default=None, ge=0)
    """Replicas assigned there."""
    score: int | None = None
    """Score, 0 to 100."""


_TIMESTAMP: JsonDict = {"format": "date-time"}


class ClusterEviction(KubeModel):
    """Replicas leaving a cluster gracefully: what runs there stays (all of it, or
    ``replicas`` of it) until the replacement is Available or the grace period passes."""

    reason: EvictionReason
    """ClusterUnreachable, ApplicationUnhealthy, Rebalance or Failback."""
    since: str = Field(json_schema_extra=_TIMESTAMP)
    """When the replicas started to leave."""
    message: str = Field(default="", max_length=1024)
    """Why, and what is kept until when."""
    replicas: int | None = Field(default=None, ge=0)
    """Replicas kept there meanwhile (unset: everything as it is)."""


class EvictedCluster(KubeModel):
    """A cluster the application was evicted from and is kept off."""

    cluster: str
    """MemberCluster name."""
    reason: Literal["ClusterUnreachable", "ApplicationUnhealthy"]
    """ClusterUnreachable (kept off until failback WhenReady returns to it) or
    ApplicationUnhealthy (kept off until a rebalance)."""
    since: str = Field(json_schema_extra=_TIMESTAMP)
    """When the application was evicted from it."""


class ObjectHealth(KubeModel):
    """One object on one cluster as its kind's interpreter rules read it."""

    api_version: str = Field(max_length=253)
    """Its apiVersion."""
    kind: str = Field(max_length=63)
    """Its kind."""
    namespace: str | None = Field(default=None, max_length=63)
    """Its namespace there."""
    name: str = Field(max_length=253)
    """Its name."""
    health: Literal["Healthy", "Progressing", "Degraded", "Unknown"] = "Unknown"
    """Its health."""
    message: str | None = Field(default=None, max_length=1024)
    """What its health rule says."""
    fields: dict[str, Any] = Field(default_factory=dict, max_length=16)
    """Its reflected status fields, by name."""


class AggregatedObject(KubeModel):
    """One object's reflected status fields combined across the clusters."""

    api_version: str = Field(max_length=253)
    """Its apiVersion."""
    kind: str = Field(max_length=63)
    """Its kind."""
    namespace: str | None = Field(default=None, max_length=63)
    """Its namespace on the members."""
    name: str = Field(max_length=253)
    """Its name."""
    fields: dict[str, Any] = Field(default_factory=dict, max_length=16)
    """Each field with an aggregation (Sum, Min, Max, All, Any), over the clusters that
    report it."""
    clusters: int = Field(default=0, ge=0)
    """Clusters whose values went in."""


class DriftReport(KubeModel):
    """What drifted on one cluster and is not healed."""

    objects: int = Field(default=0, ge=0)
    """How many objects differ from what was applied."""
    names: list[str] = Field(default_factory=list, max_length=10)
    """Some of them, as kind namespace/name."""
    since: str | None = Field(default=None, json_schema_extra=_TIMESTAMP)
    """Since when the cluster has drift."""


class ClusterResult(KubeModel):
    """The application's state on one member cluster."""

    name: str
    """MemberCluster name."""
    applied: bool = False
    """Every object was applied."""
    health: Literal["Healthy", "Progressing", "Degraded", "Unknown"] = "Unknown"
    """Workload health there."""
    attempts: int = Field(default=0, ge=0)
    """Tries in the last pass."""
    last_error: str | None = None
    """Last error there, if any."""
    revision: str | None = None
    """Revision of what is applied there."""
    unhealthy_since: str | None = Field(default=None, json_schema_extra=_TIMESTAMP)
    """Since when the application has not been Healthy there (with application failover)."""
    evicting: ClusterEviction | None = None
    """Replicas leaving this cluster gracefully."""
    health_message: str | None = Field(default=None, max_length=1024)
    """Why the health is what it is: the least healthy object and what its rules say, or
    which kinds have no health rule (they are Healthy once applied)."""
    objects: list[ObjectHealth] = Field(default_factory=list, max_length=20)
    """Objects there that are not Healthy or whose status fields the interpreter rules
    reflect (ResourceInterpreter ``spec.status``)."""
    drift: DriftReport | None = None
    """Objects changed on the member and left so (``spec.driftPolicy: Report``)."""
    rollout_revision: int | None = Field(default=None, ge=1)
    """The application's revision this cluster is to run (``status.rollout``)."""
    wave: int | None = Field(default=None, ge=0)
    """The wave (index) this cluster is in (none: it went ahead with the canary)."""
    suspended: bool | None = None
    """True: no writes here (``spec.suspend`` or ``spec.suspendedClusters``). (No default:
    a line the controller writes without it must read back the same.)"""
    charts: list[str] | None = Field(default=None, max_length=8)
    """The charts this cluster's objects are rendered from, as ``release: chart
    version``."""


CanaryPhase = Literal["Progressing", "Paused", "Promoting", "Succeeded", "RolledBack", "Aborted"]


class CanaryCluster(KubeModel):
    """The canary on one canary cluster."""

    name: str
    """MemberCluster name."""
    weight: int = Field(default=0, ge=0, le=100)
    """The weight applied there."""
    stable_ready: str | None = Field(default=None, max_length=64)
    """Ready replicas of the stable copy there, as ready/wanted."""
    canary_ready: str | None = Field(default=None, max_length=64)
    """Ready replicas of the canary copy there, as ready/wanted."""
    promoted: bool = False
    """While Promoting: the stable copy runs the new revision at full size here and the
    canary copy is gone."""


class CanaryStatus(KubeModel):
    """Where the canary stands."""

    phase: CanaryPhase = "Succeeded"
    """Progressing (a step runs), Paused (a manual step waits for promote), Promoting (the
    rest of the fleet takes the new revision), Succeeded (the stable revision is the
    latest), RolledBack (a step failed), Aborted."""
    step: int = Field(default=0, ge=0)
    """Index of the current step."""
    weight: int = Field(default=0, ge=0, le=100)
    """Current canary weight."""
    stable_revision: str | None = Field(default=None, max_length=64)
    """Revision of the stable copy."""
    canary_revision: str | None = Field(default=None, max_length=64)
    """Revision of the canary copy (after a rollback: the revision that failed)."""
    started_at: str | None = Field(default=None, json_schema_extra=_TIMESTAMP)
    """When this canary started."""
    step_started_at: str | None = Field(default=None, json_schema_extra=_TIMESTAMP)
    """When the current step's weight was set (its progress deadline counts from here)."""
    step_healthy_at: str | None = Field(default=None, json_schema_extra=_TIMESTAMP)
    """When the canary copy was first healthy everywhere at this step (its pause counts
    from here)."""
    message: str = Field(default="", max_length=1024)
    """What the canary waits for, or why it ended."""
    last_action: str | None = Field(default=None, max_length=253)
    """The propagator.io/canary-action value last acted on."""
    clusters: list[CanaryCluster] = Field(
        default_factory=list,
        max_length=1000,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """Per canary cluster: weight and ready replicas of both copies."""


RolloutPhase = Literal["Progressing", "Waiting", "Halted", "Complete", "Suspended"]


class HaltedWave(KubeModel):
    """Why the rollout stopped."""

    wave: int = Field(ge=0)
    """Index of the wave that failed."""
    name: str = Field(default="", max_length=63)
    """Its group's name (``wave-N`` for waves by size)."""
    reason: str = Field(default="", max_length=64)
    """ProgressDeadline, Degraded, Failed or CanaryRolledBack."""
    clusters: list[str] = Field(default_factory=list, max_length=100)
    """The clusters that were not healthy (or failed)."""


class RolloutStatus(KubeModel):
    """Where the rollout of the application's latest revision stands."""

    phase: RolloutPhase = "Complete"
    """Progressing (a wave is being applied or proven healthy), Waiting (a manual gate,
    a pause, or the canary goes first), Halted (a wave failed: later waves keep the
    revision they run), Complete, Suspended (``spec.suspend``)."""
    revision: int = Field(default=1, ge=1)
    """The revision being rolled out (the latest, or the one an undo returns to)."""
    previous_revision: int | None = Field(default=None, ge=1)
    """The revision it rolls out from."""
    spec_revision: int | None = Field(default=None, ge=1)
    """The spec's revision (the one the spec's objects and overrides make)."""
    spec_hash: str | None = Field(default=None, max_length=64)
    """A hash of the spec's objects and overrides (names its ControllerRevision)."""
    spec_held: bool = False
    """An undo set the spec's revision aside: it rolls out again on ``rollout resume`` or
    the next change of the spec."""
    wave: int = Field(default=0, ge=0)
    """Index of the current wave (Waiting: of the wave that waits to start)."""
    waves: int = Field(default=1, ge=0)
    """How many waves this rollout has."""
    wave_name: str = Field(default="", max_length=63)
    """The current wave's name."""
    wave_started_at: str | None = Field(default=None, json_schema_extra=_TIMESTAMP)
    """When the current wave's writes began (its progress deadline counts from here)."""
    wave_healthy_at: str | None = Field(default=None, json_schema_extra=_TIMESTAMP)
    """Since when the current wave has been healthy (its minimum healthy time counts
    from here)."""
    updated_clusters: int = Field(default=0, ge=0)
    """Clusters that are to run ``revision``."""
    paused: bool = False
    """``kubectl propagator rollout pause``: no wave starts until resume."""
    halted: HaltedWave | None = None
    """Which wave failed, where and why."""
    message: str = Field(default="", max_length=1024)
    """What the rollout waits for, or why it stopped."""
    last_action: str | None = Field(default=None, max_length=253)
    """The propagator.io/rollout-action value last acted on."""
    history: list[int] = Field(default_factory=list, max_length=50)
    """Revisions kept on the hub (``kubectl propagator rollout undo --to-revision``)."""


class ChartStatus(KubeModel):
    """One chart of the application, as last resolved."""

    release: str = Field(max_length=63)
    """The release name."""
    chart: str = Field(max_length=128)
    """The chart's name."""
    repository: str = Field(max_length=512)
    """Where it comes from."""
    version: str = Field(max_length=256)
    """The version resolved (the newest in the spec's range)."""
    digest: str = Field(max_length=80)
    """``sha256:…`` of its OCI manifest (or of its archive, from a chart repository)."""
    app_version: str | None = Field(default=None, max_length=100)
    """Its Chart.yaml's appVersion."""
    resolved_at: str | None = Field(default=None, json_schema_extra=_TIMESTAMP)
    """Since when the chart has resolved to this version and digest."""


class ApplicationPropagationStatus(KubeModel):
    """What the controller last did and saw."""

    conditions: list[Condition] = conditions_field()
    """Scheduled, Applied, Available, QuotaExceeded, CanaryProgressing."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The .metadata.generation this status reflects."""
    placement: list[PlacedCluster] = Field(default_factory=list)
    """Clusters chosen by the scheduler."""
    clusters: list[ClusterResult] = Field(
        default_factory=list,
        # Atomic: the controller writes the whole list, and a map list made the hub track
        # every line's fields in managedFields on each write (for a thousand clusters,
        # far more stored and more of the hub's CPU per status write).
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    """Result per cluster (one line per cluster name)."""
    ready_clusters: int = Field(default=0, ge=0)
    """Clusters where the application is applied and healthy."""
    total_clusters: int = Field(default=0, ge=0)
    """Clusters the application is placed on."""
    ready: str | None = None
    """readyClusters/totalClusters, e.g. 18/20 (for kubectl get)."""
    canary: CanaryStatus | None = None
    """Canary progress."""
    rollout: RolloutStatus | None = None
    """The rollout of the latest revision: waves, suspension, undo."""
    charts: list[ChartStatus] = Field(default_factory=list, max_length=8)
    """The application's Helm charts (``spec.resources.charts``) as resolved."""
    evicted: list[EvictedCluster] = Field(
        default_factory=list,
        max_length=1000,
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["cluster"],
        },
    )
    """Clusters the application was evicted from and is kept off: until failback
    (WhenReady) for an unreachable one, until a rebalance for one where it was unhealthy."""
    rebalanced: str | None = Field(default=None, max_length=253)
    """The propagator.io/rebalance value last acted on."""
    objects: list[AggregatedObject] = Field(default_factory=list, max_length=100)
    """Reflected status fields combined across clusters, per object (ResourceInterpreter
    ``spec.status`` with an aggregation)."""
    kept_on_delete: list[str] = Field(default_factory=list, max_length=100)
    """Objects marked ``propagator.io/on-delete: Orphan``, as kind namespace/name: pruned
    or at the application's deletion, they are left on the members without the
    application's stamp."""
    synced: str | None = Field(default=None, max_length=253)
    """The propagator.io/sync value last acted on (``kubectl propagator sync``)."""
    propagated_kinds: list[str] = Field(default_factory=list, max_length=500)
    """apiVersion/kind of everything propagated that may still exist on a member, e.g.
    apps/v1/Deployment (what pruning and clean-up look for)."""

    @field_validator("clusters")
    @classmethod
    def _one_line_per_cluster(cls, clusters: list[ClusterResult]) -> list[ClusterResult]:
        # The API server no longer checks this (the list is atomic); a status that names
        # a cluster twice is still a bug, refused before it is written.
        seen: set[str] = set()
        for line in clusters:
            if line.name in seen:
                raise ValueError(
                    f"clusters: {{'name': {line.name!r}}} is listed twice; each may appear once"
                )
            seen.add(line.name)
        return clusters


KEEP_ANNOTATION = "propagator.io/on-delete"
"""Set to "Orphan" on an object: pruning and the application's deletion leave it on the
member (without the application's stamp) instead of deleting it."""
KEEP_VALUE = "Orphan"
SYNC_ANNOTATION = "propagator.io/sync"
"""Set (to any new value) by ``kubectl propagator sync``: drift the application only
reports is healed once."""
ORPHAN_ANNOTATION = "propagator.io/orphan-unreachable"
"""Set to "true" on an application being deleted: clusters that cannot be cleaned up are
left as they are, and the application goes away."""


class ApplicationPropagation(Resource):
    """One application, described once on the hub, run on many member clusters."""

    crd = CrdInfo(
        kind="ApplicationPropagation",
        plural="applicationpropagations",
        short_names=("ap",),
        scope="Namespaced",
        columns=(
            PrinterColumn("Fleet", ".spec.fleet"),
            PrinterColumn("Clusters", ".status.totalClusters", "integer"),
            PrinterColumn("Ready", ".status.ready"),
            PrinterColumn("Canary", ".status.canary.weight", "integer"),
            PrinterColumn("Rollout", ".status.rollout.phase"),
            AGE,
            PrinterColumn(
                "Scheduled", '.status.conditions[?(@.type=="Scheduled")].status', priority=1
            ),
            PrinterColumn("Applied", '.status.conditions[?(@.type=="Applied")].status', priority=1),
            PrinterColumn(
                "Available", '.status.conditions[?(@.type=="Available")].status', priority=1
            ),
        ),
    )
    kind: Literal["ApplicationPropagation"] = "ApplicationPropagation"
    spec: ApplicationPropagationSpec
    status: ApplicationPropagationStatus | None = None
