"""Leader election on a ``coordination.k8s.io`` Lease, so that one controller acts at a time.

Like client-go's: a candidate takes the Lease when it does not exist, when it holds it
already, or when the holder's record has not changed for a whole lease duration as
observed on the candidate's own clock (so clocks need not agree across machines). Every
write carries the resourceVersion it read, so two candidates cannot both win. The leader
renews every retry period and gives up leadership when it could not renew within the renew
deadline; on a clean shutdown it releases the Lease so that another candidate takes over
at once.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass
from typing import Any

import anyio

from kube.connection import KubeConnection
from kube.errors import ApiError

log = logging.getLogger(__name__)

LEASE_API = "coordination.k8s.io/v1"


class LeadershipLost(RuntimeError):
    """The leader could not renew its Lease within the renew deadline."""


@dataclass(frozen=True)
class LeaseConfig:
    namespace: str
    name: str
    identity: str
    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """One candidate. Blocking methods; ``lead`` wraps them for anyio."""

    def __init__(
        self,
        hub: KubeConnection,
        config: LeaseConfig,
        labels: dict[str, str] | None = None,
    ) -> None:
        self.hub = hub
        self.config = config
        self.labels = dict(labels or {})
        """Labels the Lease carries (written with it)."""
        self.annotations: dict[str, str] = {}
        """Annotations written with every renewal (what the holder says of itself)."""
        self._observed: tuple[str, str] | None = None  # (holder, renewTime)
        self._observed_at = 0.0
        self.is_leader = False
        self.holder: str | None = None
        """The holder last seen ("" when the Lease is free)."""
        self.seen_at: float | None = None
        """time.monotonic() when the Lease was last read or written."""

    def _saw(self, holder: str) -> None:
        self.seen_at = time.monotonic()
        if holder != self.holder:
            log.info(
                "lease %s/%s: held by %s (was %s)",
                self.config.namespace,
                self.config.name,
                holder or "nobody",
                self.holder or "nobody",
            )
            self.holder = holder

    def observing(self) -> bool:
        """Whether the Lease was seen within a lease duration: the hub answers and this
        candidate follows who leads (a standby that can take over)."""
        return (
            self.seen_at is not None
            and time.monotonic() - self.seen_at <= self.config.lease_duration_s
        )

    async def _path(self, name: str | None = None) -> str:
        return (await self.hub.resource(LEASE_API, "Lease")).path(self.config.namespace, name)

    def _spec(self, lease: dict[str, Any] | None) -> dict[str, Any]:
        now = _now()
        spec = dict((lease or {}).get("spec") or {})
        changed_hands = spec.get("holderIdentity") != self.config.identity
        spec.update(
            holderIdentity=self.config.identity,
            renewTime=now,
            leaseDurationSeconds=int(self.config.lease_duration_s),
        )
        if changed_hands:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if lease else 0)
        return spec

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this candidate holds the Lease afterwards."""
        c = self.config
        try:
            lease = await self.hub.request("GET", await self._path(c.name))
        except ApiError as exc:
            if not exc.not_found:
                raise
            body = {
                "apiVersion": LEASE_API,
                "kind": "Lease",
                "metadata": {
                    "name": c.name,
                    "namespace": c.namespace,
                    "labels": self.labels,
                    "annotations": self.annotations,
                },
                "spec": self._spec(None),
            }
            try:
                await self.hub.request("POST", await self._path(), body=body)
            except ApiError as create_exc:
                if create_exc.status == 409:  # another candidate created it first
                    return False
                raise
            self.is_leader = True
            self._saw(c.identity)
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        self._saw(holder)
        record = (holder, str(spec.get("renewTime")))
        now = time.monotonic()
        if record != self._observed:
            self._observed, self._observed_at = record, now
        duration = float(spec.get("leaseDurationSeconds") or c.lease_duration_s)
        expired = now - self._observed_at >= duration
        if holder and holder != c.identity and not expired:
            self.is_leader = False
            return False
        lease["spec"] = self._spec(lease)
        meta = lease.setdefault("metadata", {})
        meta["labels"] = {**(meta.get("labels") or {}), **self.labels}
        meta["annotations"] = {**(meta.get("annotations") or {}), **self.annotations}
        try:
            updated = await self.hub.request("PUT", await self._path(c.name), body=lease)
        except ApiError as exc:
            if exc.status == 409:  # someone else wrote it since we read it
                self.is_leader = False
                return False
            raise
        new_spec = updated.get("spec") or {}
        self._observed = (c.identity, str(new_spec.get("renewTime")))
        self._observed_at = time.monotonic()
        self.is_leader = True
        self._saw(c.identity)
        return True

    async def release(self) -> None:
        """Give the Lease up (clean shutdown), if this candidate holds it."""
        if not self.is_leader:
            return
        try:
            lease = await self.hub.request("GET", await self._path(self.config.name))
            if (lease.get("spec") or {}).get("holderIdentity") == self.config.identity:
                lease["spec"]["holderIdentity"] = ""
                lease["spec"]["leaseDurationSeconds"] = 1
                await self.hub.request("PUT", await self._path(self.config.name), body=lease)
        except ApiError as exc:
            log.warning("could not release lease %s: %s", self.config.name, exc)
        self.is_leader = False

    # -- anyio -----------------------------------------------------------------------------

    async def _attempt(self) -> bool:
        try:
            return await self.try_acquire_or_renew()
        except ApiError as exc:
            log.warning("lease %s/%s: %s", self.config.namespace, self.config.name, exc)
            return False

    async def acquire(self) -> None:
        """Wait until this candidate is the leader."""
        while True:
            if await self._attempt():
                break
            await anyio.sleep(self.config.retry_period_s)
        log.info(
            "leader: %s holds lease %s/%s",
            self.config.identity,
            self.config.namespace,
            self.config.name,
        )

    async def keep(self) -> None:
        """Renew until cancelled; raise LeadershipLost when renewing fails for longer than
        the renew deadline.

        A renewal counts from when it was sent, not answered (a hub slow to answer may
        have stored it long before: the others' Lease duration runs from then), and an
        attempt is given up at the deadline: a leader stops within its renew deadline of
        its last renewal, whatever the hub does."""
        last_renewed = time.monotonic()
        while True:
            await anyio.sleep(self.config.retry_period_s)
            sent = time.monotonic()
            remaining = last_renewed + self.config.renew_deadline_s - sent
            renewed = False
            with anyio.move_on_after(max(remaining, 0.0)):
                renewed = await self._attempt()
            if renewed:
                last_renewed = sent
            elif time.monotonic() - last_renewed >= self.config.renew_deadline_s:
                raise LeadershipLost(
                    f"{self.config.identity} could not renew lease {self.config.name} for "
                    f"{self.config.renew_deadline_s:g}s"
                )
