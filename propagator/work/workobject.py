"""A Pull member's work as a hub object, both ways: the :class:`ClusterWork` the hub
decided, as the Work it writes (:func:`work_object`); the Work as the agent takes it
back (:func:`cluster_work`, checked as any input); a sync's state as the Work's status
(:func:`work_status`); and that status as the hub reads it (:func:`reported`, checked as
any member's answer). Pure: no I/O."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from api.common import API_VERSION
from api.work import (
    MAX_REPORTED_OBJECTS,
    WORK_LABEL,
    ScaleField,
    Work,
    WorkRetry,
    WorkSpec,
    WorkStatus,
    pull_namespace,
    work_name,
)
from propagator.work.release import Release
from propagator.work.table import ClusterWork, SyncPolicy, SyncState

REPORT_BYTES = 256 * 1024
"""The live copies a Work's status carries, at most (JSON): past it, each is cut to its
identity and status (what health rules read first)."""
_KEPT_WHEN_CUT = ("apiVersion", "kind", "status")
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


class WorkRefused(ValueError):
    """A Work (or its status) that cannot be taken: the message names the field."""


def work_object(work: ClusterWork, report_kinds: Iterable[str] = ()) -> dict[str, Any]:
    """The Work the hub applies for ``work`` in its cluster's namespace; ``report_kinds``:
    ``apiVersion/kind`` of the objects whose copies its agent is to report."""
    spec = WorkSpec(
        application=work.app,
        uid=work.uid,
        revision=work.revision,
        objects=list(work.objects),
        prune_kinds=sorted(work.prune_kinds),
        adopt=work.adopt,
        heal_drift=work.heal_drift,
        heal=work.heal,
        suspended=work.suspended,
        member_owned=list(work.release.rules),
        scale_fields=[
            ScaleField(api_version=a, kind=k, field=f) for a, k, f in work.release.scale_fields
        ],
        retry=WorkRetry(
            attempts=work.policy.attempts,
            backoff_seconds=work.policy.backoff_s,
            max_backoff_seconds=work.policy.max_backoff_s,
            timeout_seconds=work.policy.timeout_s,
        ),
        report_kinds=sorted(report_kinds),
    )
    return {
        "apiVersion": API_VERSION,
        "kind": "Work",
        "metadata": {
            "name": work_name(work.app),
            "namespace": pull_namespace(work.cluster),
            "labels": {WORK_LABEL: work.cluster},
        },
        "spec": spec.model_dump(by_alias=True, exclude_defaults=True, mode="json")
        | {"application": work.app, "revision": work.revision, "objects": list(work.objects)},
    }


def _problems(exc: ValidationError, prefix: str) -> str:
    found = []
    for error in exc.errors()[:5]:
        where = ".".join(str(p) for p in error["loc"])
        found.append(f"{prefix}.{where}: {error['msg']}")
    more = len(exc.errors()) - 5
    return "; ".join(found) + (f" (and {more} more)" if more > 0 else "")


def cluster_work(obj: Mapping[str, Any], cluster: str, max_concurrency: int) -> ClusterWork:
    """The work a Work object asks of ``cluster`` (the agent's side); raises WorkRefused
    naming the field when it is not a Work this cluster can take."""
    meta = obj.get("metadata") or {}
    where = f"Work {meta.get('namespace')}/{meta.get('name')}"
    if meta.get("namespace") != pull_namespace(cluster):
        raise WorkRefused(
            f"{where}: metadata.namespace is not this cluster's ({pull_namespace(cluster)})"
        )
    try:
        spec = Work.model_validate({"kind": "Work", "spec": obj.get("spec")}).spec
    except ValidationError as exc:
        raise WorkRefused(f"{where}: {_problems(exc, 'spec')}") from None
    if spec.application.count("/") != 1 or work_name(spec.application) != meta.get("name"):
        raise WorkRefused(
            f"{where}: spec.application {spec.application!r} does not name this Work "
            "(namespace/name, the Work named namespace.name)"
        )
    retry = spec.retry
    return ClusterWork(
        app=spec.application,
        cluster=cluster,
        objects=tuple(spec.objects),
        revision=spec.revision,
        prune_kinds=frozenset(spec.prune_kinds),
        policy=SyncPolicy(
            attempts=retry.attempts,
            backoff_s=retry.backoff_seconds,
            max_backoff_s=retry.max_backoff_seconds,
            timeout_s=retry.timeout_seconds,
            max_concurrency=max_concurrency,
        ),
        uid=spec.uid,
        adopt=spec.adopt,
        release=Release(
            rules=tuple(spec.member_owned),
            scale_fields=tuple((s.api_version, s.kind, s.field) for s in spec.scale_fields),
        ),
        heal_drift=spec.heal_drift,
        heal=spec.heal,
        suspended=spec.suspended,
    )


def report_kinds(obj: Mapping[str, Any]) -> frozenset[str]:
    """The kinds (``apiVersion/kind``) whose copies a Work asks its agent to report (a
    Work :func:`cluster_work` took)."""
    kinds = (obj.get("spec") or {}).get("reportKinds") or []
    return frozenset(k for k in kinds if isinstance(k, str))


def reported_objects(live: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The live copies a Work's status carries: without the last-applied annotation, at
    most :data:`MAX_REPORTED_OBJECTS`; cut to identity and status past
    :data:`REPORT_BYTES`."""
    out = []
    for obj in live[:MAX_REPORTED_OBJECTS]:
        meta = dict(obj.get("metadata") or {})
        meta.pop("managedFields", None)
        if _LAST_APPLIED in (meta.get("annotations") or {}):
            meta["annotations"] = {
                k: v for k, v in meta["annotations"].items() if k != _LAST_APPLIED
            }
        out.append({**obj, "metadata": meta})
    if len(json.dumps(out, separators=(",", ":"))) <= REPORT_BYTES:
        return out
    cut = []
    for obj in out:
        meta = obj["metadata"]
        kept = {k: meta[k] for k in ("name", "namespace", "generation") if k in meta}
        cut.append({k: obj[k] for k in _KEPT_WHEN_CUT if k in obj} | {"metadata": kept})
    return cut


def work_status(
    state: SyncState, generation: int | None, live: Sequence[Mapping[str, Any]], now: str
) -> dict[str, Any]:
    """The Work status for a sync's ``state`` of the Work at ``generation`` and the
    member's copies of its objects."""
    status = WorkStatus(
        revision=state.revision,
        observed_generation=generation,
        applied=state.applied,
        failed=state.failed,
        conflict=state.conflict,
        quota_exceeded=state.quota_exceeded,
        attempts=min(state.attempts, 1_000_000),
        error=None if state.error is None else state.error[:4096],
        drift=list(state.drift[:100]),
        healed=state.healed,
        objects=reported_objects(live),
        reported_at=now,
    )
    return status.model_dump(by_alias=True, exclude_none=True, mode="json")


@dataclass(frozen=True)
class Reported:
    """A Work's status as the hub takes it (:func:`reported`)."""

    status: WorkStatus | None
    """None: the agent has not reported on it yet, or its report was refused."""
    problem: str | None = None
    """Why the report was refused."""


def reported(obj: Mapping[str, Any]) -> Reported:
    """The status of a Work as its agent wrote it, checked against the model's bounds (a
    hostile agent's report is refused whole, naming the field)."""
    raw = obj.get("status")
    if not raw:
        return Reported(None)
    try:
        return Reported(WorkStatus.model_validate(raw))
    except ValidationError as exc:
        return Reported(None, f"the agent's report is refused: {_problems(exc, 'status')}")
