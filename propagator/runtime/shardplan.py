"""Shards: how N controller replicas divide the work, as pure decisions (no I/O).

The work is cut into :data:`BUCKETS` buckets by a stable hash of a *shard key* (an
application's, a tenant's, a member cluster's); each bucket is held by at most one replica,
recorded in one shard table on the hub (a Lease's annotation, written with the
resourceVersion it read, so two replicas cannot both take a bucket). Every replica renews a
Lease of its own; the replicas whose Lease renews and that say they are ready divide the
buckets by rendezvous hashing of their names (all compute the same, and a replica that
comes or goes moves only its own share).

A bucket changes hands only through the table: its holder stops and lets its work in
flight finish before it frees the bucket; a bucket whose holder's Lease has not changed
for a whole Lease duration, on the taker's own clock, is taken over (its holder stopped
writing a renew deadline after its last renewal, which is shorter). A table that is
created — the first start, or after somebody deleted it — opens for free buckets only once
it has been seen for a Lease duration: a replica still acting on a deleted table stops
within its renew deadline.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

BUCKETS = 128
"""Buckets of the work: enough that 16 replicas each get a fair share, few enough that the
table is a small object."""
TABLE_ANNOTATION = "propagator.io/shard-table"
READY_ANNOTATION = "propagator.io/ready"
REPLICA_LABEL = "propagator.io/replica"
MAX_TABLE_BYTES = 64 * 1024
MAX_IDENTITY = 253
REPLICA_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
"""A replica's name (the pod's name in the chart, the host's by default): its Lease is
named after it, and a label carries it."""


class TableError(ValueError):
    """The shard table on the hub cannot be read (hostile or corrupted): named."""


def tenant_key(tenant: str) -> str:
    """The shard key of a tenant's work: all its applications, its quotas on every member,
    its TenantQuota status (one replica sees its whole use)."""
    return f"tenant/{tenant}"


def application_key(app: str) -> str:
    """The shard key of an application of no tenant (``namespace/name``)."""
    return f"application/{app}"


def member_key(cluster: str) -> str:
    """The shard key of a member's probes and MemberCluster status."""
    return f"member/{cluster}"


def fleet_key(fleet: str) -> str:
    """The shard key of a Fleet's status."""
    return f"fleet/{fleet}"


def interpreter_key(name: str) -> str:
    """The shard key of a ResourceInterpreter's status (every replica compiles its rules;
    one writes whether they compiled)."""
    return f"interpreter/{name}"


def bucket_of(key: str) -> int:
    """The bucket of a shard key: the same on every replica and across restarts."""
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % BUCKETS


def _score(name: str, bucket: int) -> int:
    return int.from_bytes(hashlib.blake2b(f"{name}/{bucket}".encode(), digest_size=8).digest())


def assign(names: Iterable[str]) -> dict[int, str]:
    """Each bucket's designated replica among ``names`` (rendezvous hashing: a name
    added or taken away moves only the buckets it gains or had)."""
    ordered = sorted(set(names))
    if not ordered:
        return {}
    return {b: max(ordered, key=functools.partial(_ranked, b)) for b in range(BUCKETS)}


def _ranked(bucket: int, name: str) -> tuple[int, str]:
    return _score(name, bucket), name


@dataclass
class Table:
    """Who holds each bucket; ``open``: free buckets may be taken."""

    open: bool = False
    holders: dict[int, str] = field(default_factory=dict)

    def held_by(self, identity: str) -> set[int]:
        return {b for b, h in self.holders.items() if h == identity}

    def render(self) -> str:
        return json.dumps(
            {
                "buckets": BUCKETS,
                "open": self.open,
                "holders": {str(b): h for b, h in sorted(self.holders.items())},
            },
            separators=(",", ":"),
        )


def parse_table(text: str | None) -> Table:
    """The table in the annotation ``text`` (None or empty: a new table, not open).
    Raises :class:`TableError` naming what is wrong: nothing of a table that is not
    exactly what replicas write is trusted."""
    if not text:
        return Table()
    where = f"annotation {TABLE_ANNOTATION}"
    if len(text) > MAX_TABLE_BYTES:
        raise TableError(f"{where}: {len(text)} bytes; at most {MAX_TABLE_BYTES}")
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise TableError(f"{where}: not JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise TableError(f"{where}: {type(raw).__name__}; an object is expected")
    if raw.get("buckets") != BUCKETS:
        raise TableError(
            f"{where}.buckets: {raw.get('buckets')!r}; this version divides the work in "
            f"{BUCKETS} buckets"
        )
    is_open, holders = raw.get("open"), raw.get("holders")
    if not isinstance(is_open, bool):
        raise TableError(f"{where}.open: {is_open!r}; true or false is expected")
    if not isinstance(holders, dict):
        raise TableError(f"{where}.holders: {type(holders).__name__}; an object is expected")
    table = Table(open=is_open)
    for bucket, holder in holders.items():
        if not (isinstance(bucket, str) and bucket.isdigit() and int(bucket) < BUCKETS):
            raise TableError(f"{where}.holders: bucket {bucket!r}; 0 to {BUCKETS - 1}")
        if not isinstance(holder, str) or not 0 < len(holder) <= MAX_IDENTITY:
            raise TableError(
                f"{where}.holders[{bucket}]: {holder!r}; a replica identity of 1 to "
                f"{MAX_IDENTITY} characters"
            )
        table.holders[int(bucket)] = holder
    return table


@dataclass(frozen=True)
class Replica:
    """A replica as its Lease shows it."""

    name: str
    identity: str
    ready: bool


def replicas_of(leases: Iterable[Mapping[str, Any]]) -> list[Replica]:
    """The replicas the labelled Leases announce (a Lease with no holder, or a foreign
    shape, announces none)."""
    found = []
    for lease in leases:
        meta = lease.get("metadata") or {}
        name = (meta.get("labels") or {}).get(REPLICA_LABEL)
        holder = (lease.get("spec") or {}).get("holderIdentity")
        if not isinstance(name, str) or not REPLICA_NAME.match(name):
            continue
        if not isinstance(holder, str) or not 0 < len(holder) <= MAX_IDENTITY:
            continue
        ready = (meta.get("annotations") or {}).get(READY_ANNOTATION) == "true"
        found.append(Replica(name, holder, ready))
    return found


class Observations:
    """When each replica identity was last seen to renew, on this replica's own clock (a
    renewal counts when its Lease's renewTime changed: no two clocks are compared).

    An identity first named by the table, or whose Lease vanished, counts as renewed when
    first seen so: it is alive for a Lease duration more."""

    def __init__(self, duration_s: float) -> None:
        self.duration_s = duration_s
        self._seen: dict[str, tuple[str, float]] = {}

    def observe(self, leases: Iterable[Mapping[str, Any]], now: float) -> None:
        for lease in leases:
            spec = lease.get("spec") or {}
            holder = spec.get("holderIdentity")
            if not isinstance(holder, str) or not holder:
                continue
            record = str(spec.get("renewTime"))
            if (seen := self._seen.get(holder)) is None or seen[0] != record:
                self._seen[holder] = (record, now)

    def notice(self, identities: Iterable[str], now: float) -> None:
        """Identities the table names: never seen yet, they start their duration now."""
        for identity in identities:
            self._seen.setdefault(identity, ("", now))

    def alive(self, identity: str, now: float) -> bool:
        seen = self._seen.get(identity)
        return seen is not None and now - seen[1] < self.duration_s

    def prune(self, keep: Iterable[str], now: float) -> None:
        """Forget identities long dead and not in ``keep`` (the table's holders and the
        Leases': a dead replica's Lease stays on the hub, and an identity forgotten
        while its Lease is there would look renewed when seen again)."""
        kept = set(keep)
        for identity, (_, at) in list(self._seen.items()):
            if identity not in kept and now - at > 10 * self.duration_s:
                del self._seen[identity]


@dataclass(frozen=True)
class Plan:
    """What this replica does to the table in one round."""

    claims: frozenset[int]
    """Buckets to take: designated to it, free (in an open table) or held by the dead."""
    releases: frozenset[int]
    """Buckets to stop, drain and free: designated to another ready replica."""
    open_table: bool
    designated: int
    """How many buckets the assignment gives this replica."""


def plan(
    table: Table,
    replicas: Iterable[Replica],
    me: Replica,
    alive: Mapping[str, bool],
    openable: bool,
) -> Plan:
    """This replica's round: ``replicas``, the live ones (their Lease renews);
    ``alive``, per identity the table names, whether it renews; ``openable``: the table
    has been seen for a Lease duration."""
    ready = {r.name for r in replicas if r.ready and r.identity != me.identity}
    if me.ready:
        ready.add(me.name)
    designated = assign(ready)
    will_open = not table.open and openable
    claims, releases = set(), set()
    for bucket in range(BUCKETS):
        holder = table.holders.get(bucket)
        to = designated.get(bucket)
        if holder == me.identity:
            if to is not None and to != me.name:
                releases.add(bucket)
        elif to == me.name:
            if holder is None:
                if table.open or will_open:
                    claims.add(bucket)
            elif not alive.get(holder, True):
                claims.add(bucket)
    return Plan(
        frozenset(claims),
        frozenset(releases),
        will_open,
        sum(1 for n in designated.values() if n == me.name),
    )


def applied(table: Table, me: str, plan: Plan, drained: Iterable[int]) -> Table:
    """The table after ``plan``, freeing only the ``drained`` of its releases."""
    holders = dict(table.holders)
    for bucket in set(drained) & plan.releases:
        holders.pop(bucket, None)
    for bucket in plan.claims:
        holders[bucket] = me
    return Table(open=table.open or plan.open_table, holders=holders)
