"""Readiness of a member from its probes, with hysteresis so it does not flap.

A member becomes NotReady after ``failure_threshold`` consecutive failed probes and Ready
again only after ``success_threshold`` consecutive good ones (one is enough for a member
never seen before). NotReady for ``unreachable_after_s`` adds the unreachable taint.

A probe is a ``/readyz`` call, or, for a Ready member whose last probe passed and whose
last ``/readyz`` passed less than ``readyz_interval_s`` ago (:meth:`Health.may_ping`),
anything its API server sent since the last probe, or else an HTTP/2 PING on its
connection: at rest, most probes of a large fleet cost nothing or a quarter of a call.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from api.taints import NOT_READY_TAINT, UNREACHABLE_TAINT


@dataclass(frozen=True)
class HealthPolicy:
    failure_threshold: int = 3
    success_threshold: int = 2
    unreachable_after_s: float = 40.0
    readyz_interval_s: float = 30.0
    """A Ready member's ``/readyz`` at least this often (0: every probe)."""


@dataclass(frozen=True)
class Health:
    """What the probes have shown so far."""

    ready: bool | None = None  # None: never probed
    failures: int = 0
    successes: int = 0
    not_ready_since: float | None = None
    last_error: str | None = None
    last_probe_at: float | None = None

    def observe(
        self, ok: bool, now: float, policy: HealthPolicy, error: str | None = None
    ) -> Health:
        """The state after one probe."""
        if ok:
            successes = self.successes + 1
            ready = self.ready
            if self.ready is None or successes >= policy.success_threshold:
                ready = True
            return replace(
                self,
                ready=ready,
                successes=successes,
                failures=0,
                not_ready_since=None if ready else self.not_ready_since,
                last_error=None if ready else self.last_error,
                last_probe_at=now,
            )
        failures = self.failures + 1
        ready = False if failures >= policy.failure_threshold else self.ready
        not_ready_since = self.not_ready_since
        if ready is False and not_ready_since is None:
            not_ready_since = now
        return replace(
            self,
            ready=ready,
            failures=failures,
            successes=0,
            not_ready_since=not_ready_since,
            last_error=error,
            last_probe_at=now,
        )

    def may_ping(self, readyz_at: float | None, now: float, policy: HealthPolicy) -> bool:
        """True when a PING may stand in for ``/readyz`` (last passed at ``readyz_at``):
        the member is Ready and its last probe passed. After any failed probe every probe
        calls ``/readyz`` until the member is Ready again, so a PING's success never
        counts toward a member's recovery nor hides a failing ``/readyz``."""
        return (
            self.ready is True
            and self.failures == 0
            and readyz_at is not None
            and now - readyz_at < policy.readyz_interval_s
        )

    def taints(self, now: float, policy: HealthPolicy) -> list[str]:
        """The controller's taint keys this member should carry now."""
        if self.ready is not False:
            return []
        keys = [NOT_READY_TAINT]
        if self.not_ready_since is not None and now - self.not_ready_since >= (
            policy.unreachable_after_s
        ):
            keys.append(UNREACHABLE_TAINT)
        return keys
