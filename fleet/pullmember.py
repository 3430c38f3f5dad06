"""A Pull member as the hub sees it: no connection, only what its agent reports.

Its probe is its agent's heartbeat: the Lease the agent renews in the member's hub
namespace. A renewal counts when the hub sees it change (the hub's own clock, not the
agent's ``renewTime``: a member whose clock is off neither fails nor passes for it), and
a probe passes while the last one seen is younger than the Lease's duration. Its version,
served kinds and capacity are the agent's report (MemberCluster ``status.agent``), read
as any member's answer: bounded by the API model, a report that does not fit ignored.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar

from pydantic import ValidationError

from api.membercluster import AgentReport
from api.work import AGENT_LEASE, pull_namespace
from fleet.member import MemberMonitor, ProbeResult

log = logging.getLogger(__name__)

MIN_LEASE_S = 10
MAX_LEASE_S = 300
"""A Lease duration the hub accepts (an agent's outside it is taken at the bound)."""


@dataclass
class PullMonitor(MemberMonitor):
    """A Pull member's health and report (see the module)."""

    mode: ClassVar[str] = "Pull"
    heartbeat_at: float | None = None
    """When (time.monotonic()) the hub last saw the agent's Lease renewed."""
    lease_duration_s: float = 40.0
    renewed: str | None = None
    """The Lease's renewTime when last seen (a change is a renewal)."""
    report_problem: str | None = None
    """Why the agent's report was not taken (None: taken, or none yet)."""

    @property
    def lease(self) -> str:
        return f"{pull_namespace(self.name)}/{AGENT_LEASE}"

    def lease_seen(self, lease: Mapping[str, Any] | None, now: float | None = None) -> None:
        """The agent's Lease as the hub holds it now (None: there is none)."""
        spec = (lease or {}).get("spec") or {}
        renewed = spec.get("renewTime")
        duration = spec.get("leaseDurationSeconds")
        if isinstance(duration, int) and not isinstance(duration, bool):
            self.lease_duration_s = float(min(max(duration, MIN_LEASE_S), MAX_LEASE_S))
        if lease is None or not isinstance(renewed, str) or renewed == self.renewed:
            return
        self.renewed = renewed
        self.heartbeat_at = time.monotonic() if now is None else now

    def report_seen(self, report: Mapping[str, Any] | None) -> None:
        """The agent's report (MemberCluster ``status.agent``) as the hub holds it now."""
        if not report:
            return
        try:
            taken = AgentReport.model_validate(report)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            self.report_problem = f"status.agent.{where}: {first['msg']}"
            return
        self.report_problem = None
        if taken.kubernetes_version:
            self.version = taken.kubernetes_version
            self.enablements = [
                e.model_dump(by_alias=True, mode="json") for e in taken.api_enablements
            ]
        capacity: dict[str, Any] = {}
        if taken.nodes is not None:
            capacity["nodes"] = taken.nodes.model_dump(by_alias=True, mode="json")
        if taken.resources is not None:
            capacity["resources"] = taken.resources.model_dump(by_alias=True, mode="json")
        self._capacity = capacity or None

    async def probe(self, timeout_s: float, now: float | None = None) -> ProbeResult:
        """Whether the agent renewed its Lease within its duration, folded into
        ``health`` (no call: the Lease comes through the hub's watch)."""
        now = time.monotonic() if now is None else now
        if self.heartbeat_at is None:
            result = ProbeResult(False, f"no heartbeat from its agent yet (Lease {self.lease})")
        elif now - self.heartbeat_at > self.lease_duration_s:
            result = ProbeResult(
                False,
                f"its agent has not renewed Lease {self.lease} within its "
                f"{self.lease_duration_s:g} s",
            )
        else:
            result = ProbeResult(True)
        self.health = self.health.observe(result.ok, now, self.policy, result.error)
        return result

    def capacity(self) -> dict[str, Any] | None:
        """``nodes`` and ``resources`` as the agent last reported them."""
        return self._capacity

    def quota_usage(self, namespace: str) -> dict[str, Decimal] | None:
        """Not known on the hub (None): the agent holds the member's pods."""
        return None
