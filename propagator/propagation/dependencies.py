"""What an application's workloads use, brought along (``spec.dependencies``): the
ConfigMaps, Secrets, ServiceAccounts and PersistentVolumeClaims their kinds' dependency
rules name, read from the application's hub namespace. They join the application's
objects, so they go through the same tenancy checks, are applied to the same clusters
and are pruned once no workload names them.

With ``rollOnChange``, each workload's pod template carries a checksum of the ConfigMaps
and Secrets it uses: a change to one rolls the workloads that use it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kube.connection import KubeConnection
from kube.errors import ApiError
from propagator.conditions import some_of
from propagator.interpreter.pointer import read_pointer
from propagator.interpreter.registry import Interpreters
from propagator.interpreter.rules import RuleFailed
from propagator.runtime.bounded import each
from propagator.work.objects import strip_server_fields

MAX_DEPENDENCIES = 256
"""Distinct objects an application's workloads may name: more is refused (each is read
from the hub and applied to every cluster)."""
READ_ONE_BY_ONE = 8
"""Objects of one kind read by name (at once); more are read with one list of the
namespace."""
CHECKSUM_ANNOTATION = "propagator.io/dependencies-checksum"
"""On a workload's pod template (``rollOnChange``): a hash of the ConfigMaps and Secrets
it uses."""
BROUGHT_KINDS: tuple[tuple[str, str], ...] = (
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "ServiceAccount"),
    ("v1", "PersistentVolumeClaim"),
)
"""What is brought along (the hub watches them for the applications that bring them); other
kinds a dependency rule names (an Ingress's Services, an autoscaler's target) are not."""
CONTENT_KINDS = frozenset({("v1", "ConfigMap"), ("v1", "Secret")})
"""What a workload reads the content of (a change rolls it)."""

Reference = tuple[str, str, str]
"""(apiVersion, kind, name) in the application's namespace."""


class DependencyError(Exception):
    """The workloads' dependencies cannot be brought (too many, or a rule failed)."""


@dataclass(frozen=True)
class Dependencies:
    """What :func:`bring` found."""

    objects: list[dict[str, Any]]
    """The objects to propagate along (hub objects as manifests)."""
    missing: list[str]
    """What the workloads name that the hub namespace lacks, as kind/name."""


def references(
    objects: Sequence[Mapping[str, Any]], namespace: str, interpreters: Interpreters
) -> dict[int, list[Reference]]:
    """By index in ``objects``: what each object names in ``namespace`` (its own
    namespace when it has none), less what ``objects`` hold already; raises
    DependencyError past :data:`MAX_DEPENDENCIES` or when a rule fails."""
    have = {_ref_of(o) for o in objects}
    out: dict[int, list[Reference]] = {}
    distinct: set[Reference] = set()
    for index, obj in enumerate(objects):
        own = str((obj.get("metadata") or {}).get("namespace") or namespace)
        try:
            named = interpreters.dependencies(obj)
        except RuleFailed as exc:
            raise DependencyError(f"dependencies of {_name(obj)}: {exc}") from exc
        refs = []
        for dep in named:
            if (dep.get("namespace") or own) != namespace or own != namespace:
                continue  # only the application's own hub namespace is read
            ref = (dep["apiVersion"], dep["kind"], dep["name"])
            if ref[:2] not in BROUGHT_KINDS:
                continue
            if ref not in refs:
                refs.append(ref)
            if ref not in have:
                distinct.add(ref)
            if len(distinct) > MAX_DEPENDENCIES:
                raise DependencyError(
                    f"the workloads name more than {MAX_DEPENDENCIES} objects to bring along "
                    f"(spec.dependencies; {_name(obj)} names {len(named)}): at most "
                    f"{MAX_DEPENDENCIES} are propagated"
                )
        if refs:
            out[index] = refs
    return out


async def bring(
    objects: list[dict[str, Any]],
    namespace: str,
    hub: KubeConnection,
    interpreters: Interpreters,
    roll_on_change: bool,
) -> Dependencies:
    """The dependencies of ``objects`` (see :func:`references`), read from the hub (by
    name, or one list per kind when there are many); with ``roll_on_change`` the
    workloads among ``objects`` get their checksum (in place). Raises DependencyError,
    or ApiError from the hub."""
    refs = references(objects, namespace, interpreters)
    wanted = {r for found in refs.values() for r in found}
    have = {_ref_of(o): o for o in objects}
    found: dict[Reference, dict[str, Any]] = {}
    unreadable: set[tuple[str, str]] = set()
    for api_version, kind in sorted({(a, k) for a, k, _ in wanted - set(have)}):
        names = sorted(n for a, k, n in wanted - set(have) if (a, k) == (api_version, kind))
        try:
            items = await _read(hub, api_version, kind, namespace, names)
        except ApiError as exc:
            if exc.status != 403:
                raise
            unreadable.add((api_version, kind))  # the platform keeps the kind from it
            continue
        for item in items:
            name = (item.get("metadata") or {}).get("name")
            if name in names:
                obj = strip_server_fields({**item, "apiVersion": api_version, "kind": kind})
                found[api_version, kind, name] = obj
    if roll_on_change:
        for index, used in refs.items():
            _stamp_checksum(
                objects[index], [found.get(r) or have.get(r) for r in used], interpreters
            )
    unread = " (the controller may not read them on the hub)"
    missing = sorted(
        f"{k}/{n}" + (unread if (a, k) in unreadable else "")
        for a, k, n in wanted
        if (a, k, n) not in found and (a, k, n) not in have
    )
    return Dependencies([found[r] for r in sorted(found)], missing)


async def _read(
    hub: KubeConnection, api_version: str, kind: str, namespace: str, names: Sequence[str]
) -> list[dict[str, Any]]:
    """The objects ``names`` of ``kind`` in ``namespace`` that exist: a few are read one by
    one (a namespace may hold thousands of Secrets, Helm's releases among them), more with
    one list."""
    if len(names) > READ_ONE_BY_ONE:
        listing = await hub.list(api_version, kind, namespace)
        return list(listing.get("items") or [])
    found: list[dict[str, Any]] = []

    async def get(name: str) -> None:
        try:
            found.append(await hub.get(api_version, kind, name, namespace))
        except ApiError as exc:
            if not exc.not_found:
                raise

    await each(names, get, READ_ONE_BY_ONE, (ApiError,))
    return found


def dependencies_condition(brought: Dependencies) -> tuple[str, bool, str, str]:
    """The ``Dependencies`` condition: whether everything the workloads use was found."""
    if brought.missing:
        return (
            "Dependencies",
            False,
            "NotOnHub",
            f"{len(brought.missing)} object(s) the workloads use are not in the "
            f"application's hub namespace (not propagated): {some_of(brought.missing, ', ', 5)}",
        )
    return ("Dependencies", True, "Propagated", f"{len(brought.objects)} object(s) brought along")


def _stamp_checksum(
    workload: dict[str, Any], used: Sequence[Mapping[str, Any] | None], interpreters: Interpreters
) -> None:
    """Put the checksum of the ConfigMaps and Secrets ``used`` on ``workload``'s pod
    template (none when it has no pod template or uses none)."""
    rules = interpreters.rules_for(str(workload.get("apiVersion")), str(workload.get("kind")))
    spec = rules.spec.replicas if rules is not None else None
    if spec is None or spec.pod_template is None:
        return
    contents = [
        {k: o.get(k) for k in ("kind", "data", "binaryData", "stringData")}
        | {"name": (o.get("metadata") or {}).get("name")}
        for o in used
        if o is not None and (o.get("apiVersion"), o.get("kind")) in CONTENT_KINDS
    ]
    if not contents:
        return
    text = json.dumps(contents, sort_keys=True, separators=(",", ":"), default=str)
    template = read_pointer(workload, spec.pod_template) if spec.pod_template else workload
    if not isinstance(template, dict):
        return
    meta = template.setdefault("metadata", {})
    if not isinstance(meta, dict):
        return
    annotations = meta.setdefault("annotations", {})
    if isinstance(annotations, dict):
        annotations[CHECKSUM_ANNOTATION] = hashlib.sha256(text.encode()).hexdigest()[:16]


def _ref_of(obj: Mapping[str, Any]) -> Reference:
    return (
        str(obj.get("apiVersion")),
        str(obj.get("kind")),
        str((obj.get("metadata") or {}).get("name")),
    )


def _name(obj: Mapping[str, Any]) -> str:
    return f"{obj.get('kind')} {(obj.get('metadata') or {}).get('name')}"
