"""The agent's heartbeat and report: its Lease renewed while its member's API server
answers (the hub takes a member whose Lease is not renewed within its duration as not
ready, then unreachable, and fails its replicas over), and what it observes of the member
(version, served kinds, nodes and capacity) in its MemberCluster's ``status.agent``,
written when it changes."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import anyio

from api.common import API_VERSION
from api.work import AGENT_LEASE, pull_namespace
from fleet.member import MemberMonitor
from kube.connection import KubeConnection
from kube.errors import ApiError
from propagator.observability.metrics import Metrics

log = logging.getLogger(__name__)

AGENT_VERSION = "0.1.0"


def micro_time() -> str:
    """Now as a Kubernetes MicroTime."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Heartbeat:
    """Renews the agent's Lease every quarter of its duration; runs until cancelled."""

    def __init__(
        self,
        cluster: str,
        hub: KubeConnection,
        monitor: MemberMonitor,
        metrics: Metrics,
        *,
        identity: str,
        duration_s: int,
        probe_timeout_s: float,
    ) -> None:
        self.cluster, self.hub, self.monitor, self.metrics = cluster, hub, monitor, metrics
        self.identity, self.duration_s, self.probe_timeout_s = identity, duration_s, probe_timeout_s
        self._reported: dict[str, Any] | None = None
        self.renewed_at: float | None = None
        """When (time.monotonic()) the Lease was last renewed."""

    def report(self) -> dict[str, Any] | None:
        """What the MemberCluster's ``status.agent`` is to say (None: nothing known yet)."""
        monitor = self.monitor
        if monitor.version is None:
            return None
        report: dict[str, Any] = {
            "agentVersion": AGENT_VERSION,
            "kubernetesVersion": monitor.version,
            "apiEnablements": monitor.enablements,
        }
        report.update(monitor.capacity() or {})
        return report

    async def beat(self) -> None:
        """One heartbeat: probe the member; renew the Lease if it answered; report."""
        result = await self.monitor.probe(self.probe_timeout_s)
        if not result.ok:
            log.warning("member API server does not answer (%s): Lease not renewed", result.error)
            return
        await self.hub.merge_patch(
            "coordination.k8s.io/v1",
            "Lease",
            AGENT_LEASE,
            {
                "spec": {
                    "holderIdentity": self.identity,
                    "leaseDurationSeconds": self.duration_s,
                    "renewTime": micro_time(),
                }
            },
            namespace=pull_namespace(self.cluster),
        )
        self.renewed_at = anyio.current_time()
        self.metrics.agent_heartbeats.inc()
        report = self.report()
        if report is not None and report != self._reported:
            await self.hub.merge_patch(
                API_VERSION,
                "MemberCluster",
                self.cluster,
                {"status": {"agent": report}},
                subresource="status",
            )
            self._reported = report
            self.metrics.status_writes.labels("MemberCluster agent").inc()

    async def run(self) -> None:
        while True:
            try:
                await self.beat()
            except ApiError as exc:
                hint = (
                    " (was the cluster unjoined? its Lease is made by the join)"
                    if exc.not_found
                    else ""
                )
                log.warning("heartbeat not written to the hub: %s%s", exc, hint)
            await anyio.sleep(self.duration_s / 4)
