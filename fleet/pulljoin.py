"""Joining a Pull member: its hub namespace, its agent's least-privilege identity, its
Lease, its MemberCluster, and a short-lived bootstrap token for the agent; and removing
them all again.

The agent's identity is a ServiceAccount in the member's own hub namespace, bound to a
Role there (read its Works, write their status, renew its Lease, ask tokens for itself)
and to a ClusterRole naming its MemberCluster alone (read it, write its status). As with
a Push join, everything is validated and dry-run on the hub first; only then written.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import yaml

from api.work import AGENT_LEASE, WORK_LABEL, pull_name_problem, pull_namespace
from fleet.registration import (
    JOIN_MANAGER,
    HubObject,
    JoinError,
    UnjoinPlan,
    add_to_fleet,
    hub_error,
    member_spec,
    plan_unjoin,
    planned_member,
)
from kube.connection import KubeConnection
from kube.discovery import UnknownKind
from kube.errors import ApiError

AGENT_SERVICE_ACCOUNT = "agent"
AGENT_ROLE = "propagator-agent"
MIN_BOOTSTRAP_TTL_S = 600
"""The shortest token the API server issues."""
MAX_BOOTSTRAP_TTL_S = 86400
LEASE_DURATION_S = 40


def cluster_role_name(cluster: str) -> str:
    return f"propagator-agent-{cluster}"


def agent_role_rules() -> list[dict[str, Any]]:
    """What the agent may do in its namespace: nothing else."""
    return [
        {"apiGroups": ["propagator.io"], "resources": ["works"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["propagator.io"], "resources": ["works/status"], "verbs": ["patch"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [AGENT_LEASE],
            "verbs": ["patch"],
        },
        {
            "apiGroups": [""],
            "resources": ["serviceaccounts/token"],
            "resourceNames": [AGENT_SERVICE_ACCOUNT],
            "verbs": ["create"],
        },
    ]


def agent_cluster_rules(cluster: str) -> list[dict[str, Any]]:
    """What the agent may do outside its namespace: write its own MemberCluster's status
    (where its report goes)."""
    return [
        {
            "apiGroups": ["propagator.io"],
            "resources": ["memberclusters/status"],
            "resourceNames": [cluster],
            "verbs": ["patch"],
        }
    ]


@dataclass(frozen=True)
class PullJoinPlan:
    """The hub objects of a Pull member's join, validated."""

    cluster: str
    fleet: str | None
    objects: tuple[dict[str, Any], ...]
    """Written in order (the namespace first)."""
    member: dict[str, Any]
    bootstrap_ttl_s: int

    @property
    def namespace(self) -> str:
        return pull_namespace(self.cluster)

    def describe(self) -> list[str]:
        ns = self.namespace
        lines = [
            f"Namespace {ns}: the member's Works and its agent's Lease",
            f"ServiceAccount {ns}/{AGENT_SERVICE_ACCOUNT}: the agent's hub identity "
            f"(Role {AGENT_ROLE}: its Works, their status, its Lease, its own tokens; "
            f"ClusterRole {cluster_role_name(self.cluster)}: MemberCluster {self.cluster} "
            "and its status)",
            f"MemberCluster {self.cluster}: mode Pull",
        ]
        if self.fleet:
            lines.append(f"Fleet {self.fleet}: add {self.cluster} (created if missing)")
        return lines


def plan_pull_join(
    name: str,
    *,
    fleet: str | None = None,
    layer: str | None = None,
    region: str | None = None,
    zone: str | None = None,
    labels: dict[str, str] | None = None,
    namespaces: tuple[str, ...] = (),
    bootstrap_ttl_s: int = 3600,
) -> PullJoinPlan:
    """Build and validate a Pull member's hub objects (raises JoinError)."""
    if problem := pull_name_problem(name):
        raise JoinError(f"NAME: {problem}")
    if not MIN_BOOTSTRAP_TTL_S <= bootstrap_ttl_s <= MAX_BOOTSTRAP_TTL_S:
        raise JoinError(
            f"--bootstrap-ttl={bootstrap_ttl_s}: must be {MIN_BOOTSTRAP_TTL_S} to "
            f"{MAX_BOOTSTRAP_TTL_S} seconds"
        )
    spec = {"mode": "Pull"} | member_spec(layer, region, zone, namespaces)
    member = planned_member(name, spec, labels or {}, fleet)
    ns = pull_namespace(name)
    mine = {WORK_LABEL: name}
    subject = {"kind": "ServiceAccount", "name": AGENT_SERVICE_ACCOUNT, "namespace": ns}
    rbac = "rbac.authorization.k8s.io/v1"
    objects: tuple[dict[str, Any], ...] = (
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": mine}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": AGENT_SERVICE_ACCOUNT, "namespace": ns, "labels": mine},
        },
        {
            "apiVersion": rbac,
            "kind": "Role",
            "metadata": {"name": AGENT_ROLE, "namespace": ns, "labels": mine},
            "rules": agent_role_rules(),
        },
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": {"name": AGENT_ROLE, "namespace": ns, "labels": mine},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": AGENT_ROLE,
            },
            "subjects": [subject],
        },
        {
            "apiVersion": rbac,
            "kind": "ClusterRole",
            "metadata": {"name": cluster_role_name(name), "labels": mine},
            "rules": agent_cluster_rules(name),
        },
        {
            "apiVersion": rbac,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": cluster_role_name(name), "labels": mine},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": cluster_role_name(name),
            },
            "subjects": [subject],
        },
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": AGENT_LEASE, "namespace": ns, "labels": mine},
            "spec": {"leaseDurationSeconds": LEASE_DURATION_S},
        },
    )
    return PullJoinPlan(name, fleet, objects, member, bootstrap_ttl_s)


async def _exists(hub: KubeConnection, obj: dict[str, Any]) -> bool:
    meta = obj["metadata"]
    try:
        await hub.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
    except ApiError as exc:
        if exc.not_found:
            return False
        raise
    return True


async def _write(hub: KubeConnection, plan: PullJoinPlan, dry_run: bool) -> None:
    namespace_there = await _exists(hub, plan.objects[0])
    for obj in plan.objects:
        # Nothing can be dry-run into a namespace only the real run will create.
        if dry_run and not namespace_there and obj["metadata"].get("namespace"):
            continue
        await hub.apply(obj, field_manager=JOIN_MANAGER, dry_run=dry_run)
    await hub.apply(plan.member, field_manager=JOIN_MANAGER, dry_run=dry_run)
    if plan.fleet:
        await add_to_fleet(hub, plan.fleet, plan.cluster, dry_run)


async def bootstrap_token(hub: KubeConnection, cluster: str, ttl_s: int) -> str:
    """A token of the agent's ServiceAccount valid ``ttl_s`` seconds."""
    answer = await hub.request(
        "POST",
        f"/api/v1/namespaces/{pull_namespace(cluster)}/serviceaccounts/"
        f"{AGENT_SERVICE_ACCOUNT}/token",
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": ttl_s},
        },
    )
    token = (answer.get("status") or {}).get("token")
    if not isinstance(token, str) or not token:
        raise JoinError("the hub's TokenRequest answer holds no token")
    return token


async def pull_join(hub: KubeConnection, plan: PullJoinPlan, *, dry_run: bool = False) -> str:
    """Write the plan to the hub after a dry run of every write; returns the agent's
    bootstrap token ("" on a dry run)."""
    try:
        await _write(hub, plan, dry_run=True)
        if dry_run:
            return ""
        await _write(hub, plan, dry_run=False)
        return await bootstrap_token(hub, plan.cluster, plan.bootstrap_ttl_s)
    except (ApiError, UnknownKind) as exc:
        raise hub_error(exc) from exc


def agent_kubeconfig(cluster: str, server: str, ca_data: bytes | None, token: str) -> str:
    """The hub kubeconfig the agent starts from (its bootstrap token inside)."""
    entry: dict[str, Any] = {"server": server}
    if ca_data:
        entry["certificate-authority-data"] = base64.b64encode(ca_data).decode()
    name = f"propagator-hub-{cluster}"
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "hub", "cluster": entry}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [
            {
                "name": name,
                "context": {"cluster": "hub", "user": name, "namespace": pull_namespace(cluster)},
            }
        ],
        "current-context": name,
    }
    return yaml.safe_dump(doc, sort_keys=False)


async def plan_member_unjoin(hub: KubeConnection, cluster: str) -> UnjoinPlan:
    """What removing member ``cluster`` deletes (either mode; raises JoinError)."""
    plan = await plan_unjoin(hub, cluster)
    if plan.mode == "Pull":
        plan.identity = pull_identity_objects(cluster)
    return plan


def pull_identity_objects(cluster: str) -> list[HubObject]:
    """What removing a Pull member deletes besides its MemberCluster: its ClusterRole and
    binding, and its namespace (its Works, Lease, ServiceAccount: every token it was given
    is refused from then on)."""
    return [
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", cluster_role_name(cluster), None),
        ("rbac.authorization.k8s.io/v1", "ClusterRole", cluster_role_name(cluster), None),
        ("v1", "Namespace", pull_namespace(cluster), None),
    ]
