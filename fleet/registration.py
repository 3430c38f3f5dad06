"""Joining member clusters to the hub, and removing them.

Everything is checked before anything is written: the kubeconfig (one context, no
command, certificate not expired), the member itself (reachable, trusts our CA, accepts
our credentials), the MemberCluster against the API models, and then every write as a
server-side dry run on the hub. Only then are the Secret, the MemberCluster and the
Fleet membership written.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from api.common import API_VERSION
from api.fleet import Fleet
from api.membercluster import MemberCluster
from api.selectors import label_error
from kube.connection import KubeConnection
from kube.discovery import UnknownKind
from kube.errors import ApiError
from kube.kubeconfig import LoadedKubeconfig, check_not_expired
from kube.session import ConnectionOptions

MEMBER_LABEL = "propagator.io/member-cluster"
JOIN_MANAGER = "propagator-join"
_FLAGS = {
    "layer": "--layer",
    "region": "--region",
    "zone": "--zone",
    "namespaces": "--member-namespace",
    "metadata": "NAME",
}


class JoinError(RuntimeError):
    """Joining or unjoining cannot go ahead; nothing was written."""


def secret_name(cluster: str) -> str:
    return f"{cluster}-kubeconfig"


async def verify_member(
    name: str,
    loaded: LoadedKubeconfig,
    options: ConnectionOptions,
    namespaces: tuple[str, ...] = (),
) -> str:
    """Talk to the member with these credentials; return its version or raise JoinError.
    With ``namespaces`` (the member is to be used only there), what they must read is in
    those, not the whole cluster."""
    source = f"member {name!r} (context {loaded.context!r}, {loaded.credentials.server})"
    try:
        check_not_expired(loaded.credentials, source)
    except ValueError as exc:
        raise JoinError(str(exc)) from exc
    conn = KubeConnection(name, loaded.credentials, options)
    try:
        await conn.readyz(options.read_timeout_s)
        version = (await conn.version()).get("gitVersion", "unknown")
        # The credentials can read, not only /readyz.
        for namespace in namespaces:
            await conn.list("v1", "ConfigMap", namespace, limit=1)
        if not namespaces:
            await conn.list("v1", "Namespace", limit=1)
    except ApiError as exc:
        raise JoinError(f"{source}: {_explain(exc)}") from exc
    finally:
        await conn.close()
    return str(version)


def _explain(exc: ApiError) -> str:
    text = exc.message
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return (
            "the server's TLS certificate is not signed by the kubeconfig's "
            f"certificate-authority-data (wrong CA?): {text}"
        )
    if exc.status == 401:
        return f"the server rejected the kubeconfig's credentials (401 Unauthorized): {text}"
    if exc.status == 403:
        return f"the kubeconfig's user may not read the cluster (403 Forbidden): {text}"
    if exc.status is None and exc.retryable:
        return f"cannot reach the API server: {text}"
    return text


@dataclass(frozen=True)
class JoinPlan:
    """The writes a join makes on the hub, already validated."""

    cluster: str
    namespace: str
    fleet: str | None
    kubeconfig: LoadedKubeconfig
    member_version: str
    secret: dict[str, Any]
    member: dict[str, Any]

    def describe(self) -> list[str]:
        spec = self.member["spec"]
        where = ", ".join(f"{k} {spec[k]}" for k in ("layer", "region", "zone") if k in spec)
        if spec.get("namespaces"):
            where += f"{', ' if where else ''}only namespaces {', '.join(spec['namespaces'])}"
        lines = [
            f"Secret {self.namespace}/{secret_name(self.cluster)}: kubeconfig of context "
            f"{self.kubeconfig.context!r} ({self.kubeconfig.credentials.server}, "
            f"Kubernetes {self.member_version})",
            f"MemberCluster {self.cluster}: {where}",
        ]
        if self.fleet:
            lines.append(f"Fleet {self.fleet}: add {self.cluster} (created if missing)")
        return lines


def planned_member(
    name: str, spec: dict[str, Any], labels: dict[str, str], fleet: str | None
) -> dict[str, Any]:
    """The MemberCluster a join writes, checked with its labels and ``--fleet`` (raises
    JoinError naming the flag)."""
    for key, value in labels.items():
        if problem := label_error(key, value):
            raise JoinError(f"--label {key}={value}: {problem}")
    member = {
        "apiVersion": API_VERSION,
        "kind": "MemberCluster",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": spec,
    }
    validate_model(MemberCluster, member)
    if fleet:
        validate_model(
            Fleet,
            {"kind": "Fleet", "metadata": {"name": fleet}, "spec": {"clusters": [name]}},
            flag="--fleet",
        )
    return member


def member_spec(
    layer: str | None, region: str | None, zone: str | None, namespaces: tuple[str, ...]
) -> dict[str, Any]:
    """The MemberCluster spec fields a join's flags set (either mode)."""
    spec: dict[str, Any] = {
        k: v for k, v in (("layer", layer), ("region", region), ("zone", zone)) if v
    }
    if namespaces:
        spec["namespaces"] = sorted(set(namespaces))  # (a set on the hub: once each)
    return spec


def plan_join(
    name: str,
    loaded: LoadedKubeconfig,
    member_version: str,
    *,
    namespace: str,
    fleet: str | None = None,
    layer: str | None = None,
    region: str | None = None,
    zone: str | None = None,
    labels: dict[str, str] | None = None,
    namespaces: tuple[str, ...] = (),
) -> JoinPlan:
    """Build and validate the Secret and MemberCluster of a join (raises JoinError)."""
    ref = {"namespace": namespace, "name": secret_name(name), "key": "kubeconfig"}
    spec = {"secretRef": ref} | member_spec(layer, region, zone, namespaces)
    member = planned_member(name, spec, labels or {}, fleet)
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": secret_name(name),
            "namespace": namespace,
            "labels": {MEMBER_LABEL: name},
        },
        "data": {"kubeconfig": base64.b64encode(loaded.to_yaml().encode()).decode()},
    }
    return JoinPlan(name, namespace, fleet, loaded, member_version, secret, member)


def validate_model(
    model: type[MemberCluster] | type[Fleet], obj: dict[str, Any], flag: str | None = None
) -> None:
    """Raise JoinError naming the flag behind each field of ``obj`` the model refuses."""
    try:
        model.model_validate(obj)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            loc = [str(p) for p in error["loc"]]
            field_name = next((_FLAGS[p] for p in reversed(loc) if p in _FLAGS), None)
            where = flag or field_name or ".".join(loc)
            problems.append(f"{where}={error['input']!r}: {error['msg']}")
        raise JoinError("; ".join(problems)) from exc


def hub_error(exc: Exception) -> JoinError:
    """The JoinError for a hub that refused (or lacks the CRDs)."""
    if isinstance(exc, UnknownKind):
        return JoinError(f"{exc}: install the CRDs first (`propagator crds | kubectl apply -f -`)")
    return JoinError(f"the hub refused: {exc}")


async def _ensure_namespace(hub: KubeConnection, namespace: str, dry_run: bool) -> None:
    try:
        await hub.get("v1", "Namespace", namespace)
    except ApiError as exc:
        if not exc.not_found:
            raise
        await hub.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            field_manager=JOIN_MANAGER,
            dry_run=dry_run,
        )


async def add_to_fleet(hub: KubeConnection, fleet: str, cluster: str, dry_run: bool) -> None:
    """Add ``cluster`` to Fleet ``fleet`` (created if missing)."""
    info = await hub.resource(API_VERSION, "Fleet")
    for _ in range(5):  # optimistic concurrency: retry on a conflicting update
        try:
            current = await hub.get(API_VERSION, "Fleet", fleet)
        except ApiError as exc:
            if not exc.not_found:
                raise
            body = {
                "apiVersion": API_VERSION,
                "kind": "Fleet",
                "metadata": {"name": fleet},
                "spec": {"clusters": [cluster]},
            }
            await hub.request(
                "POST", info.path(), body=body, params={"dryRun": "All" if dry_run else None}
            )
            return
        clusters = current.get("spec", {}).get("clusters") or []
        if cluster in clusters:
            return
        current["spec"]["clusters"] = [*clusters, cluster]
        try:
            await hub.request(
                "PUT",
                info.path(None, fleet),
                body=current,
                params={"dryRun": "All" if dry_run else None},
            )
            return
        except ApiError as exc:
            if exc.status != 409:
                raise
    raise JoinError(f"Fleet {fleet} kept changing while adding {cluster}; try again")


async def _write_join(hub: KubeConnection, plan: JoinPlan, dry_run: bool) -> None:
    await _ensure_namespace(hub, plan.namespace, dry_run)
    # A Secret cannot be dry-run into a namespace that only the real run will create.
    if not dry_run or await _namespace_exists(hub, plan.namespace):
        await hub.apply(plan.secret, field_manager=JOIN_MANAGER, dry_run=dry_run)
    await hub.apply(plan.member, field_manager=JOIN_MANAGER, dry_run=dry_run)
    if plan.fleet:
        await add_to_fleet(hub, plan.fleet, plan.cluster, dry_run)


async def _namespace_exists(hub: KubeConnection, namespace: str) -> bool:
    try:
        await hub.get("v1", "Namespace", namespace)
    except ApiError as exc:
        if exc.not_found:
            return False
        raise
    return True


async def join(hub: KubeConnection, plan: JoinPlan, *, dry_run: bool = False) -> None:
    """Write the plan to the hub, after a server-side dry run of every write succeeded."""
    try:
        await _write_join(hub, plan, dry_run=True)
        if not dry_run:
            await _write_join(hub, plan, dry_run=False)
    except (ApiError, UnknownKind) as exc:
        raise hub_error(exc) from exc


HubObject = tuple[str, str, str, str | None]
"""apiVersion, kind, name, namespace (None: cluster-scoped)."""


@dataclass
class UnjoinPlan:
    """What an unjoin removes from the hub."""

    cluster: str
    secret: tuple[str, str] | None
    fleets: list[str] = field(default_factory=list)
    mode: str = "Push"
    identity: list[HubObject] = field(default_factory=list)
    """A Pull member's: its agent's identity and its hub namespace (deleted last)."""

    def describe(self) -> list[str]:
        lines = [f"MemberCluster {self.cluster}: delete"]
        if self.secret:
            lines.append(f"Secret {self.secret[0]}/{self.secret[1]}: delete")
        lines += [f"Fleet {f}: remove {self.cluster}" for f in self.fleets]
        lines += [f"{kind} {name}: delete" for _, kind, name, _ in self.identity]
        return lines


async def plan_unjoin(hub: KubeConnection, cluster: str) -> UnjoinPlan:
    """Find the MemberCluster, its Secret and the fleets naming it (raises JoinError)."""
    try:
        member = await hub.get(API_VERSION, "MemberCluster", cluster)
        fleets = (await hub.list(API_VERSION, "Fleet"))["items"]
    except ApiError as exc:
        if exc.not_found:
            raise JoinError(f"no MemberCluster named {cluster!r} on the hub") from exc
        raise hub_error(exc) from exc
    except UnknownKind as exc:
        raise hub_error(exc) from exc
    ref = member.get("spec", {}).get("secretRef") or {}
    secret = (ref["namespace"], ref["name"]) if ref.get("name") else None
    names = [
        f["metadata"]["name"]
        for f in fleets
        if cluster in (f.get("spec", {}).get("clusters") or [])
    ]
    mode = str(member.get("spec", {}).get("mode") or "Push")
    return UnjoinPlan(cluster, secret, names, mode)


async def unjoin(hub: KubeConnection, plan: UnjoinPlan, *, dry_run: bool = False) -> None:
    """Remove the cluster from its fleets, then delete the MemberCluster and its Secret."""
    if dry_run:
        return
    try:
        for name in plan.fleets:
            fleet = await hub.get(API_VERSION, "Fleet", name)
            fleet["spec"]["clusters"] = [
                c for c in fleet["spec"].get("clusters", []) if c != plan.cluster
            ]
            info = await hub.resource(API_VERSION, "Fleet")
            await hub.request("PUT", info.path(None, name), body=fleet)
        await hub.delete(API_VERSION, "MemberCluster", plan.cluster)
        if plan.secret:
            await hub.delete("v1", "Secret", plan.secret[1], plan.secret[0])
        for api_version, kind, name, namespace in plan.identity:
            await hub.delete(api_version, kind, name, namespace)
    except (ApiError, UnknownKind) as exc:
        raise hub_error(exc) from exc
