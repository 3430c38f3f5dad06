"""Shards on the hub: each replica's Lease, the shard table, and the rounds that keep them
(the decisions are :mod:`.shardplan`'s; the gate is :mod:`.ownership`'s).

A round, every retry period: renew this replica's Lease (saying whether it is ready), list
the replicas' Leases, read the table, decide (:func:`~.shardplan.plan`), stop and drain the
buckets to hand over, and write the table once (with the resourceVersion read: a
conflicting write by another replica wins, this round is tried again). The holdings a
round read are confirmed from the moment it began; a replica whose rounds fail for longer
than the renew deadline has taken no new work since, and stops (:class:`ShardsLost`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

import anyio

from kube.connection import KubeConnection
from kube.errors import ApiError
from propagator.runtime.leader import LEASE_API, LeaderElector, LeaseConfig
from propagator.runtime.ownership import Ownership
from propagator.runtime.shardplan import (
    READY_ANNOTATION,
    REPLICA_LABEL,
    TABLE_ANNOTATION,
    Observations,
    Plan,
    Replica,
    Table,
    TableError,
    applied,
    parse_table,
    plan,
    replicas_of,
)

log = logging.getLogger(__name__)

TABLE_LEASE = "propagator-shards"
REPLICA_LEASE_PREFIX = "propagator-replica-"


class ShardsLost(RuntimeError):
    """This replica could not confirm its holdings within the renew deadline."""


def replica_lease(namespace: str, name: str, holder: LeaseConfig) -> LeaseConfig:
    """The Lease of replica ``name`` (unique among the replicas: the pod's), with
    ``holder``'s identity (this process: a replica restarted is a new identity) and
    durations."""
    return dataclasses.replace(holder, namespace=namespace, name=REPLICA_LEASE_PREFIX + name)


class ShardRuntime:
    """Keeps this replica's Lease (``config``, see :func:`replica_lease`) and its
    buckets; ``ownership`` is its gate."""

    def __init__(
        self,
        hub: KubeConnection,
        name: str,
        config: LeaseConfig,
        ownership: Ownership,
        ready: Callable[[], bool],
    ) -> None:
        self.hub = hub
        self.name = name
        self.config = config
        self.ownership = ownership
        self.ready = ready
        self.lease = LeaderElector(hub, config, labels={REPLICA_LABEL: name})
        self.observations = Observations(config.lease_duration_s)
        self._table_seen: tuple[str, float] | None = None
        """(uid, when first seen) of the table as this replica knows it."""
        self.replicas: list[Replica] = []
        """The live replicas the last round saw."""
        self.designated = 0
        self.running = False
        self._leaving = False

    # -- a round ---------------------------------------------------------------------------

    async def round(self) -> Plan | None:
        """One round (see the module); None when this replica does not hold its own Lease
        (another process with its name does: it waits, holding nothing)."""
        started = time.monotonic()
        self.lease.annotations = {READY_ANNOTATION: "true" if self._ready() else "false"}
        if not await self.lease.try_acquire_or_renew():
            self.ownership.confirm((), started)
            return None
        listed = await self.hub.request(
            "GET", await self._path(), params={"labelSelector": REPLICA_LABEL}
        )
        leases = list(listed.get("items") or [])
        now = time.monotonic()
        self.observations.observe(leases, now)
        lease, table = await self._table()
        self.observations.notice(table.holders.values(), now)
        live = [r for r in replicas_of(leases) if self.observations.alive(r.identity, now)]
        self.replicas = live
        me = Replica(self.name, self.config.identity, self._ready())
        alive = {h: self.observations.alive(h, now) for h in set(table.holders.values())}
        decided = plan(table, live, me, alive, self._openable(lease, now))
        self.designated = decided.designated
        mine = table.held_by(me.identity)
        # Stop what goes to another before freeing it; what this round reads is held.
        self.ownership.stop(decided.releases)
        self.ownership.confirm(mine - decided.releases, started)
        drained = await self.ownership.drained(decided.releases, self.config.retry_period_s)
        after = applied(table, me.identity, decided, drained)
        if after != table:
            await self._write(lease, after)
            self.ownership.confirm(after.held_by(me.identity) - decided.releases, started)
            if decided.claims or drained:
                log.info(
                    "shards: %s took %d bucket(s), freed %d; holds %d of %d designated",
                    self.name,
                    len(decided.claims),
                    len(drained),
                    self.ownership.share(),
                    decided.designated,
                )
        listed_holders = [str((x.get("spec") or {}).get("holderIdentity")) for x in leases]
        self.observations.prune([*after.holders.values(), *listed_holders], now)
        return decided

    def _ready(self) -> bool:
        return not self._leaving and self.ready()

    def _openable(self, lease: dict[str, Any], now: float) -> bool:
        uid = str((lease.get("metadata") or {}).get("uid"))
        if self._table_seen is None or self._table_seen[0] != uid:
            self._table_seen = (uid, now)
        return now - self._table_seen[1] >= self.config.lease_duration_s

    async def _path(self, name: str | None = None) -> str:
        return (await self.hub.resource(LEASE_API, "Lease")).path(self.config.namespace, name)

    async def _table(self) -> tuple[dict[str, Any], Table]:
        """The table's Lease (created, not open, when there is none) and the table."""
        try:
            lease = await self.hub.request("GET", await self._path(TABLE_LEASE))
        except ApiError as exc:
            if not exc.not_found:
                raise
            body = {
                "apiVersion": LEASE_API,
                "kind": "Lease",
                "metadata": {
                    "name": TABLE_LEASE,
                    "namespace": self.config.namespace,
                    "annotations": {TABLE_ANNOTATION: Table().render()},
                },
                "spec": {},
            }
            log.warning(
                "shards: no table on the hub (first start, or deleted): created; free "
                "buckets are taken once it has been seen for %gs",
                self.config.lease_duration_s,
            )
            lease = await self.hub.request("POST", await self._path(), body=body)
        text = ((lease.get("metadata") or {}).get("annotations") or {}).get(TABLE_ANNOTATION)
        return lease, parse_table(text)

    async def _write(self, lease: dict[str, Any], table: Table) -> None:
        meta = lease.setdefault("metadata", {})
        meta.setdefault("annotations", {})[TABLE_ANNOTATION] = table.render()
        await self.hub.request("PUT", await self._path(TABLE_LEASE), body=lease)

    # -- running ---------------------------------------------------------------------------

    async def _attempt(self, timeout_s: float) -> bool:
        """One round, given up after ``timeout_s``; False when it failed."""
        try:
            with anyio.fail_after(timeout_s):
                return await self.round() is not None
        except TimeoutError:
            log.warning("shards: a round did not end within %gs", timeout_s)
        except ApiError as exc:
            log.warning("shards: round failed (tried again): %s", exc)
        except TableError as exc:
            # Nothing of it is trusted: this replica holds nothing it cannot read.
            log.error("shards: the table cannot be read, nothing is taken: %s", exc)
            self.ownership.confirm((), time.monotonic())
        return False

    async def run(self) -> None:
        """Rounds until cancelled; raises :class:`ShardsLost` once this replica, holding
        buckets, could not confirm them for the renew deadline (counted from when the last
        good round began: the gate closed at that moment, and this stops the work in
        flight before anyone may take the buckets over)."""
        deadline = self.config.renew_deadline_s
        self.running = True
        last = time.monotonic()
        while True:
            started = time.monotonic()
            holding = bool(self.ownership.share())
            timeout = max(last + deadline - started, 0.001) if holding else deadline
            if await self._attempt(timeout):
                last = started
            elif holding and time.monotonic() - last >= deadline:
                raise ShardsLost(
                    f"replica {self.name} could not renew its Lease or read the shard "
                    f"table for {deadline:g}s: it stops, another replica takes its buckets"
                )
            elif not holding:
                last = started  # nothing to lose: the deadline counts from a holding
            await anyio.sleep(max(0.0, self.config.retry_period_s - (time.monotonic() - started)))

    async def leave(self, grace_s: float) -> None:
        """On a clean shutdown: stop all work, let it drain (``grace_s``), free this
        replica's buckets and its Lease, so the others take them over at once."""
        self._leaving = True
        held = self.ownership.held
        self.ownership.stop(held)
        await self.ownership.drained(held, grace_s)
        try:
            lease, table = await self._table()
            mine = table.held_by(self.config.identity)
            if mine:
                await self._write(
                    lease,
                    Table(table.open, {b: h for b, h in table.holders.items() if b not in mine}),
                )
        except (ApiError, TableError) as exc:
            log.warning("shards: could not free this replica's buckets: %s", exc)
        await self.lease.release()
