"""The member monitors, one per MemberCluster: made from the kubeconfig in its Secret
(in the controller namespace), made again when that Secret or ``spec.namespaces``
changes, dropped with the MemberCluster."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fleet.member import MemberMonitor, namespaces_of
from fleet.readiness import HealthPolicy
from kube.informer import Informer
from propagator.fleetmanager.memberstatus import recorded_health
from propagator.settings import Settings


@dataclass
class Changes:
    """What a :meth:`Monitors.sync` changed: monitors made (new, or rebuilt) and dropped."""

    made: set[str] = field(default_factory=set)
    dropped: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.made or self.dropped)


class Monitors:
    """The monitors by member name; the one owner of that map (others read it)."""

    def __init__(
        self,
        settings: Settings,
        policy: HealthPolicy,
        member_clusters: Informer,
        secrets: Informer,
        on_change: Callable[[], None],
    ) -> None:
        """``member_clusters``, ``secrets``: the hub's MemberClusters and the controller
        namespace's Secrets; ``on_change``: called when a monitor's member changes (a
        probe's verdict, discovery, capacity)."""
        self.settings = settings
        self.policy = policy
        self.member_clusters = member_clusters
        self.secrets = secrets
        self.on_change = on_change
        self.monitors: dict[str, MemberMonitor] = {}

    def _kubeconfig_of(self, member: dict[str, Any]) -> tuple[str | None, str]:
        """The member's kubeconfig as its Secret holds it (base64: every pass asks, and
        only a changed version is decoded) and the version of that Secret."""
        ref = (member.get("spec") or {}).get("secretRef") or {}
        if ref.get("namespace") != self.settings.namespace:
            return None, f"outside:{ref.get('namespace')}"
        secret = self.secrets.get(f"{ref['namespace']}/{ref.get('name')}")
        if secret is None:
            return None, "missing"
        data = (secret.get("data") or {}).get(ref.get("key", "kubeconfig"))
        return data, str(secret["metadata"].get("resourceVersion"))

    def sync(self) -> Changes:
        """Create, rebuild (Secret or spec.namespaces changed) or drop monitors to match
        the MemberClusters; returns which."""
        wanted = {m["metadata"]["name"]: m for m in self.member_clusters.snapshot()}
        changes = Changes()
        for name in list(self.monitors):
            if name not in wanted:
                del self.monitors[name]  # its registry unit stops its watches, closes it
                changes.dropped.add(name)
        for name, member in wanted.items():
            encoded, version = self._kubeconfig_of(member)
            namespaces = namespaces_of(member)
            current = self.monitors.get(name)
            if current is not None and (current.secret_version, current.namespaces) == (
                version,
                namespaces,
            ):
                continue
            monitor = self._monitor(name, encoded, version, namespaces)
            if monitor.config_error and version.startswith("outside:"):
                monitor.config_error = (
                    f"secretRef namespace {version.removeprefix('outside:')!r} is not the "
                    f"controller namespace {self.settings.namespace!r}"
                )
            if current is not None:
                monitor.health = current.health  # a new Secret does not reset readiness
            else:  # taken over: from the last verdict on the hub, until probes say more
                monitor.health = recorded_health(member, time.monotonic())
            self.monitors[name] = monitor
            changes.made.add(name)
        return changes

    def _monitor(
        self, name: str, encoded: str | None, version: str, namespaces: tuple[str, ...]
    ) -> MemberMonitor:
        """A monitor for member ``name`` from its Secret's kubeconfig (base64); whatever
        that holds, a monitor (one that says why it cannot connect, at worst)."""
        try:
            kubeconfig = (
                None
                if encoded is None
                else base64.b64decode(encoded, validate=True).decode(errors="replace")
            )
        except ValueError:  # (the hub's API server never stores that)
            error = "the kubeconfig Secret's data is not base64"
            return MemberMonitor(
                name, version, self.policy, config_error=error, namespaces=namespaces
            )
        return MemberMonitor.from_kubeconfig(
            name,
            kubeconfig,
            version,
            options=self.settings.member_connection(),
            policy=self.policy,
            allow_exec=self.settings.allow_exec_kubeconfigs,
            on_change=self.on_change,
            namespaces=namespaces,
        )
