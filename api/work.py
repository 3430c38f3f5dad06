"""Work: what one application wants on one Pull member, as the hub writes it for that
member's agent, and what the agent reports back in its status.

Each Pull member has a namespace of its own on the hub (:func:`pull_namespace`) holding
its Works and its agent's Lease; its agent may read only there and write only the Works'
status, its Lease and its MemberCluster's ``status.agent``.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import Field

from api.common import DNS_LABEL
from api.memberowned import MemberOwnedField
from api.model import KubeModel
from api.resource import AGE, CrdInfo, PrinterColumn, Resource
from api.rollout import MAX_RETRY_ATTEMPTS

PULL_NAMESPACE_PREFIX = "propagator-cluster-"
MAX_PULL_NAME = 63 - len(PULL_NAMESPACE_PREFIX)
"""A Pull member's name is at most this long: its namespace's name is a DNS label."""
AGENT_LEASE = "agent"
"""The agent's heartbeat Lease in its cluster's namespace."""
WORK_LABEL = "propagator.io/work-cluster"
"""On every Work and agent Lease: the MemberCluster it is for."""
MAX_WORK_OBJECTS = 2000
"""Objects one Work may hold (an application renders at most as many per cluster)."""
MAX_REPORTED_OBJECTS = 200
"""Live copies one Work's status may hold (what health is judged from on the hub)."""


def pull_name_problem(cluster: str) -> str | None:
    """Why ``cluster`` cannot be a Pull member's name (None: it can)."""
    if len(cluster) > MAX_PULL_NAME or not DNS_LABEL.fullmatch(cluster):
        return (
            f"a Pull member's name must be a DNS label of at most {MAX_PULL_NAME} "
            f"characters (its hub namespace is {PULL_NAMESPACE_PREFIX}<name>), got {cluster!r}"
        )
    return None


def pull_namespace(cluster: str) -> str:
    """The hub namespace of Pull member ``cluster``'s Works and Lease."""
    return PULL_NAMESPACE_PREFIX + cluster


def cluster_of_namespace(namespace: str) -> str | None:
    """The Pull member whose namespace ``namespace`` is (None: none's)."""
    if not namespace.startswith(PULL_NAMESPACE_PREFIX):
        return None
    return namespace[len(PULL_NAMESPACE_PREFIX) :] or None


def work_name(app: str) -> str:
    """The Work's name for application ``app`` (namespace/name): ``namespace.name``,
    unique as a namespace has no dot; shortened with a digest past 253 characters."""
    namespace, name = app.split("/", 1)
    full = f"{namespace}.{name}"
    if len(full) <= 253:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:16]
    return f"{full[:236]}-{digest}"


class ScaleField(KubeModel):
    """Where one kind keeps its replicas."""

    api_version: str = Field(max_length=253)
    """The kind's apiVersion, e.g. apps/v1."""
    kind: str = Field(max_length=63)
    """The kind, e.g. Deployment."""
    field: str = Field(max_length=256)
    """A JSON pointer, e.g. /spec/replicas."""


class WorkRetry(KubeModel):
    """How the agent retries a sync that failed in a way worth retrying."""

    attempts: int = Field(default=3, ge=0, le=MAX_RETRY_ATTEMPTS)
    """Retries after the first try before the sync counts as failed."""
    backoff_seconds: float = Field(default=1.0, ge=0, le=3600)
    """Wait before the first retry (doubling from there)."""
    max_backoff_seconds: float = Field(default=60.0, ge=0, le=86400)
    """The longest wait between two retries."""
    timeout_seconds: float = Field(default=30.0, ge=0.01, le=3600)
    """One try's bound."""


class WorkSpec(KubeModel):
    """What one application wants on one cluster (written by the hub only)."""

    application: str = Field(max_length=317)
    """namespace/name of the application."""
    uid: str = Field(default="", max_length=64)
    """The application's UID, stamped on its objects."""
    revision: str = Field(max_length=128)
    """The revision of ``objects``; the status says which revision it reports on."""
    objects: list[dict[str, Any]] = Field(
        default_factory=list,
        max_length=MAX_WORK_OBJECTS,
        json_schema_extra={
            "items": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "x-kubernetes-embedded-resource": True,
            }
        },
    )
    """The rendered objects; empty: remove everything the application has there."""
    prune_kinds: list[str] = Field(default_factory=list, max_length=500)
    """``apiVersion/kind`` of everything the application may have left there."""
    adopt: bool = False
    """Take over objects that exist without the application's stamp."""
    heal_drift: bool = True
    """Re-apply what drifted; else only report it."""
    heal: str = Field(default="", max_length=128)
    """A request to heal drift once (``kubectl propagator sync``)."""
    suspended: bool = False
    """Write nothing; report what differs as drift."""
    member_owned: list[MemberOwnedField] = Field(default_factory=list, max_length=32)
    """Fields left to the member once an object exists there."""
    scale_fields: list[ScaleField] = Field(default_factory=list, max_length=100)
    """Where each kind among the objects keeps its replicas."""
    retry: WorkRetry = Field(default_factory=WorkRetry)
    """How the agent retries a sync that failed in a way worth retrying."""
    report_kinds: list[str] = Field(default_factory=list, max_length=500)
    """``apiVersion/kind`` of the objects whose copies the agent reports (those the hub
    judges by rules: health, reflected status); the others' outcome is enough."""


class WorkStatus(KubeModel):
    """What the agent reports of its last sync of the Work (written by the agent only;
    the hub reads it as it reads any member's answer: checked, bounded)."""

    revision: str | None = Field(default=None, max_length=128)
    """The spec revision this status is about."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The Work's metadata.generation this status is about."""
    applied: bool = False
    """In line with the Work at ``revision``."""
    failed: bool = False
    """Counts as failed (a refusal, or retries used up)."""
    conflict: bool = False
    """Objects another application (or nobody) owns were left alone."""
    quota_exceeded: bool = False
    attempts: int = Field(default=0, ge=0, le=1_000_000)
    error: str | None = Field(default=None, max_length=4096)
    drift: list[str] = Field(default_factory=list, max_length=100)
    """Objects changed on the member and left so."""
    healed: str | None = Field(default=None, max_length=128)
    """The ``heal`` request the last successful sync acted on."""
    objects: list[dict[str, Any]] = Field(
        default_factory=list,
        max_length=MAX_REPORTED_OBJECTS,
        json_schema_extra={
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        },
    )
    """The member's copies of the Work's objects (their status; what health is judged
    from), as its watch caches hold them."""
    reported_at: str | None = Field(default=None, json_schema_extra={"format": "date-time"})


class Work(Resource):
    """What one application wants on one Pull member."""

    crd = CrdInfo(
        kind="Work",
        plural="works",
        short_names=("pw",),
        scope="Namespaced",
        columns=(
            PrinterColumn("Application", ".spec.application"),
            PrinterColumn("Revision", ".spec.revision"),
            PrinterColumn("Applied", ".status.applied", "boolean"),
            PrinterColumn("Reported", ".status.revision"),
            AGE,
        ),
    )
    kind: Literal["Work"] = "Work"
    spec: WorkSpec
    status: WorkStatus | None = None
