"""ResourceInterpreter: how Propagator reads one kind of object — its health, its replicas
and what each requests, which status fields the hub shows, and what it depends on — as
CEL expressions over the member's object (``self``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from api.common import Condition, conditions_field
from api.model import KubeModel, Rule
from api.resource import AGE, CrdInfo, PrinterColumn, Resource
from api.tenantquota import GroupKind

EXPRESSION_MAX = 2048
"""Longest CEL expression (characters): a rule is read at every health evaluation."""

HealthValue = Literal["Healthy", "Progressing", "Degraded", "Unknown"]
Expression = str


def _expression(required: bool = True) -> Any:
    return Field(... if required else None, min_length=1, max_length=EXPRESSION_MAX)


class HealthRule(KubeModel):
    """One step of a health judgement: when ``when`` holds, the object is ``health``."""

    when: Expression = _expression()
    """CEL, a bool over the object (``self``), e.g.
    ``self.status.?phase.orValue('') == 'Bound'``."""
    health: HealthValue
    """The verdict when ``when`` holds."""
    message: Expression | None = _expression(False)
    """CEL, a string saying why (shown per cluster in the application's status)."""


class HealthRules(KubeModel):
    """The object's health: the first rule whose ``when`` holds decides."""

    checks: list[HealthRule] = Field(min_length=1, max_length=32)
    """Tried in order."""
    otherwise: HealthValue = "Progressing"
    """The verdict when no rule holds."""


def _identity(pointer: str) -> bool:
    """Whether ``pointer`` is in what names an object (metadata, apiVersion, kind)."""
    return pointer.startswith("/metadata") or pointer in ("/apiVersion", "/kind")


class ReplicaRules(KubeModel):
    """How many replicas the object runs and what each asks of a cluster."""

    count: Expression = Field(default="1", min_length=1, max_length=EXPRESSION_MAX)
    """CEL, an int: the replicas the object asks for, e.g. ``self.spec.?replicas.orValue(1)``."""
    field: str | None = Field(default=None, max_length=256, pattern=r"^(/([^/~]|~[01])*)+$")
    """JSON pointer where a cluster's share is written (``Divided`` placement), e.g.
    ``/spec/replicas``. Without it the kind is not divided: every cluster runs ``count``."""
    pod_template: str | None = Field(default=None, max_length=256, pattern=r"^(/([^/~]|~[01])*)*$")
    """JSON pointer to the pod template each replica runs (``metadata`` and ``spec``), e.g.
    ``/spec/template``; ``""`` for an object that is itself a pod. Its containers'
    requests are what a replica asks of a cluster and of a tenant's quota."""
    per_node: bool = False
    """One replica per node (as a DaemonSet): ``count`` is not used."""
    canary_copies: bool = False
    """Two objects of the kind can run side by side, so a canary runs the new revision as
    a copy (``<name>-canary``, its pods labelled ``propagator.io/track: canary``) with the
    step's share of ``field``'s replicas. Needs ``field`` and ``podTemplate``. Not for
    kinds whose pods have identities or volumes of their own (StatefulSets) or that run
    one pod per node (DaemonSets)."""
    selector: str | None = Field(default=None, max_length=256, pattern=r"^(/([^/~]|~[01])*)+$")
    """JSON pointer to the label selector a canary copy narrows to its own pods (its
    ``matchLabels`` gets the track label), e.g. ``/spec/selector``."""

    rules = (
        Rule(
            cel="!has(self.canaryCopies) || !self.canaryCopies || "
            "(has(self.field) && has(self.podTemplate))",
            message="canaryCopies needs field and podTemplate",
            check=lambda r: (
                not r.canary_copies or (r.field is not None and r.pod_template is not None)
            ),
        ),
        Rule(
            cel="!has(self.field) || !(self.field.startsWith('/metadata') || "
            "self.field == '/apiVersion' || self.field == '/kind')",
            message="field must not point into metadata, apiVersion or kind: the replicas are "
            "written there",
            check=lambda r: r.field is None or not _identity(r.field),
            field_path=".field",
        ),
    )


Aggregate = Literal["Sum", "Min", "Max", "All", "Any", "None"]


class ReflectedField(KubeModel):
    """A value of the member's object shown on the hub."""

    name: str = Field(min_length=1, max_length=63, pattern=r"^[A-Za-z][A-Za-z0-9_]*$")
    """Its name in the application's status."""
    value: Expression = _expression()
    """CEL: the value, e.g. ``self.status.?readyReplicas.orValue(0)``."""
    aggregate: Aggregate = "None"
    """How the clusters' values combine into one for the application: Sum, Min, Max
    (numbers), All, Any (bools), None (per cluster only)."""


class DependencyRules(KubeModel):
    """Other objects this one uses (they must exist on the same cluster)."""

    objects: Expression = _expression()
    """CEL, a list of maps ``{apiVersion, kind, name[, namespace]}`` (namespace: the
    object's own when absent)."""


class ResourceInterpreterSpec(KubeModel):
    """Rules for one {group, kind}; each part is optional."""

    target: GroupKind
    """The kind these rules interpret."""
    health: HealthRules | None = None
    """Its health on a member; without it, the kind is Healthy once it exists."""
    replicas: ReplicaRules | None = None
    """Its replicas and their requests; without it, the kind runs no pods."""
    status: list[ReflectedField] = Field(default_factory=list, max_length=16)
    """Fields of the member's object shown per cluster in the application's status
    (``status.clusters[].objects``), and combined across clusters (``status.objects``)."""
    dependencies: DependencyRules | None = None
    """Objects it uses, which go along with it."""


class ResourceInterpreterStatus(KubeModel):
    """Whether the controller compiled the rules."""

    conditions: list[Condition] = conditions_field()
    """Compiled: every expression compiled and type-checked (False: the message names
    the expression, the position and the reason; the kind is then judged by the built-in
    rules, or not at all)."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The .metadata.generation this status reflects."""


def canonical_name(target: GroupKind) -> str:
    """The one name a ResourceInterpreter for ``target`` may have: the kind in lower case,
    then ``.group`` unless it is the core group (``certificate.cert-manager.io``,
    ``persistentvolumeclaim``), so the API server keeps one per {group, kind}."""
    kind = target.kind.lower()
    return f"{kind}.{target.group}" if target.group else kind


_NAME_RULE = Rule(
    cel="self.metadata.name == (self.spec.target.group == '' ? "
    "self.spec.target.kind.lowerAscii() : "
    "self.spec.target.kind.lowerAscii() + '.' + self.spec.target.group)",
    message="metadata.name must be the target's kind in lower case, then '.' and its group "
    "unless it is the core group (e.g. certificate.cert-manager.io, persistentvolumeclaim): "
    "one ResourceInterpreter per {group, kind}",
    check=lambda r: r.metadata.get("name") in (None, canonical_name(r.spec.target)),
)


class ResourceInterpreter(Resource):
    """How Propagator reads one kind: health, replicas, reflected status, dependencies."""

    crd = CrdInfo(
        kind="ResourceInterpreter",
        plural="resourceinterpreters",
        short_names=("ri",),
        scope="Cluster",
        columns=(
            PrinterColumn("Group", ".spec.target.group"),
            PrinterColumn("Kind", ".spec.target.kind"),
            PrinterColumn("Compiled", '.status.conditions[?(@.type=="Compiled")].status'),
            AGE,
        ),
        rules=(_NAME_RULE,),
    )
    kind: Literal["ResourceInterpreter"] = "ResourceInterpreter"
    spec: ResourceInterpreterSpec
    status: ResourceInterpreterStatus | None = None

    @model_validator(mode="after")
    def _one_per_kind(self) -> ResourceInterpreter:
        if not _NAME_RULE.check(self):
            raise ValueError(_NAME_RULE.message)
        return self
