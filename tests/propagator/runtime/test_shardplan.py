"""The shard decisions: the assignment every replica computes alike, the table read as
hostile input, renewals judged on this replica's clock, and each round's plan."""

from __future__ import annotations

import json
from typing import Any

import pytest

from propagator.runtime.shardplan import (
    BUCKETS,
    MAX_TABLE_BYTES,
    READY_ANNOTATION,
    REPLICA_LABEL,
    Observations,
    Replica,
    Table,
    TableError,
    application_key,
    applied,
    assign,
    bucket_of,
    parse_table,
    plan,
    replicas_of,
)


def test_a_key_keeps_its_bucket_across_processes_and_versions() -> None:
    # Fixed values: a change of the hash would move every application at an upgrade.
    assert bucket_of(application_key("shop/web")) == bucket_of("application/shop/web")
    assert [bucket_of(f"application/ns/app-{i}") for i in range(5)] == [
        bucket_of(f"application/ns/app-{i}") for i in range(5)
    ]
    assert {bucket_of(f"k{i}") for i in range(5000)} == set(range(BUCKETS))


def test_the_assignment_is_the_same_whatever_order_the_replicas_are_seen_in() -> None:
    assert assign(["a", "b", "c"]) == assign(["c", "a", "b", "a"])
    assert assign([]) == {}


def test_a_replica_coming_or_going_moves_only_its_own_buckets() -> None:
    three = assign(["a", "b", "c"])
    four = assign(["a", "b", "c", "d"])
    moved = {b for b in range(BUCKETS) if three[b] != four[b]}
    assert moved == {b for b in range(BUCKETS) if four[b] == "d"}
    two = assign(["a", "c"])
    assert {b for b in range(BUCKETS) if three[b] != two[b]} == {
        b for b in range(BUCKETS) if three[b] == "b"
    }


def test_each_replica_gets_a_share_near_its_due() -> None:
    shares = [list(assign(["r-a", "r-b", "r-c"]).values()).count(n) for n in ("r-a", "r-b", "r-c")]
    assert sum(shares) == BUCKETS
    assert all(BUCKETS / 3 * 0.5 < s < BUCKETS / 3 * 1.5 for s in shares)


def test_the_table_round_trips() -> None:
    table = Table(open=True, holders={0: "a_1", 127: "b_2"})
    assert parse_table(table.render()) == table
    assert parse_table(None) == Table()
    assert parse_table("") == Table()


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("x" * (MAX_TABLE_BYTES + 1), "bytes; at most"),
        ("{", "not JSON"),
        ("[]", "an object is expected"),
        (json.dumps({"buckets": 64, "open": True, "holders": {}}), ".buckets: 64"),
        (json.dumps({"buckets": BUCKETS, "open": "yes", "holders": {}}), ".open: 'yes'"),
        (json.dumps({"buckets": BUCKETS, "open": True, "holders": []}), ".holders: list"),
        (json.dumps({"buckets": BUCKETS, "open": True, "holders": {"128": "a"}}), "'128'"),
        (json.dumps({"buckets": BUCKETS, "open": True, "holders": {"-1": "a"}}), "'-1'"),
        (json.dumps({"buckets": BUCKETS, "open": True, "holders": {"1": ""}}), "holders[1]"),
        (json.dumps({"buckets": BUCKETS, "open": True, "holders": {"1": "a" * 254}}), "1 to 253"),
        (json.dumps({"buckets": BUCKETS, "open": True, "holders": {"1": 7}}), "holders[1]: 7"),
    ],
)
def test_a_table_not_exactly_as_replicas_write_it_is_refused_naming_the_field(
    text: str, named: str
) -> None:
    with pytest.raises(TableError, match=r"annotation propagator\.io/shard-table") as refused:
        parse_table(text)
    assert named in str(refused.value)


def _lease(name: str | None, holder: Any, renew: str = "t0", ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"propagator-replica-{name}",
            "labels": {} if name is None else {REPLICA_LABEL: name},
            "annotations": {READY_ANNOTATION: "true" if ready else "false"},
        },
        "spec": {"holderIdentity": holder, "renewTime": renew},
    }


def test_replicas_are_read_from_their_leases_and_foreign_shapes_ignored() -> None:
    leases = [
        _lease("r-a", "a_1"),
        _lease("r-b", "b_1", ready=False),
        _lease("r-c", ""),  # released
        _lease("r-d", None),
        _lease("R_bad", "x_1"),
        _lease(None, "y_1"),
        _lease("r-e", "e" * 300),
    ]
    assert replicas_of(leases) == [Replica("r-a", "a_1", True), Replica("r-b", "b_1", False)]


def test_a_renewal_counts_when_the_lease_changes_on_this_replicas_clock() -> None:
    seen = Observations(duration_s=10)
    seen.observe([_lease("r-a", "a_1", "2000-01-01T00:00:00Z")], now=100)
    assert seen.alive("a_1", 109.9)
    seen.observe([_lease("r-a", "a_1", "2000-01-01T00:00:00Z")], now=109)  # unchanged
    assert not seen.alive("a_1", 110)
    # Its clock far off: any change of the record is a renewal, whatever time it says.
    seen.observe([_lease("r-a", "a_1", "1970-01-01T00:00:00Z")], now=111)
    assert seen.alive("a_1", 120.9)


def test_an_identity_whose_lease_vanished_lives_out_its_duration() -> None:
    seen = Observations(duration_s=10)
    seen.observe([_lease("r-a", "a_1")], now=100)
    seen.observe([], now=105)  # deleted: nothing is learnt from its absence
    assert seen.alive("a_1", 109)
    assert not seen.alive("a_1", 110)


def test_an_identity_first_named_by_the_table_is_alive_for_a_duration_from_then() -> None:
    seen = Observations(duration_s=10)
    seen.notice(["old_1"], now=50)
    assert seen.alive("old_1", 59)
    assert not seen.alive("old_1", 60)
    seen.notice(["old_1"], now=70)  # noticed again: not renewed by that
    assert not seen.alive("old_1", 70)


def test_a_dead_replicas_lease_left_on_the_hub_does_not_come_back_to_life() -> None:
    seen = Observations(duration_s=1)
    lease = _lease("r-a", "a_1")
    seen.observe([lease], now=0)
    seen.prune(["a_1"], now=100)  # still listed: kept
    seen.observe([lease], now=100)
    assert not seen.alive("a_1", 100)
    seen.prune([], now=100)  # gone from the hub and the table: forgotten
    seen.observe([lease], now=101)
    assert seen.alive("a_1", 101)


ME = Replica("r-a", "a_1", True)
B = Replica("r-b", "b_1", True)


def _mine(names: list[str], me: str) -> set[int]:
    return {b for b, n in assign(names).items() if n == me}


def test_a_new_table_opens_only_once_seen_for_a_duration() -> None:
    waiting = plan(Table(), [ME, B], ME, {}, openable=False)
    assert not waiting.claims
    assert not waiting.open_table
    opening = plan(Table(), [ME, B], ME, {}, openable=True)
    assert opening.open_table
    assert opening.claims == _mine(["r-a", "r-b"], "r-a")
    assert opening.designated == len(opening.claims)


def test_a_bucket_of_a_live_holder_waits_and_of_a_dead_one_is_taken() -> None:
    want = _mine(["r-a", "r-b"], "r-a")
    table = Table(open=True, holders=dict.fromkeys(want, "old_9"))
    assert not plan(table, [ME, B], ME, {"old_9": True}, openable=True).claims
    assert plan(table, [ME, B], ME, {"old_9": False}, openable=True).claims == want
    # A holder nobody reported on counts as alive.
    assert not plan(table, [ME, B], ME, {}, openable=True).claims


def test_buckets_go_to_a_ready_replica_only() -> None:
    table = Table(open=True, holders=dict.fromkeys(range(BUCKETS), "a_1"))
    not_ready = Replica("r-b", "b_1", False)
    assert not plan(table, [ME, not_ready], ME, {}, openable=True).releases
    handing = plan(table, [ME, B], ME, {}, openable=True)
    assert handing.releases == _mine(["r-a", "r-b"], "r-b")
    assert not handing.claims
    # Not ready itself (stopping, say): it hands all over to the ready.
    leaving = plan(table, [ME, B], Replica("r-a", "a_1", False), {}, openable=True)
    assert leaving.releases == frozenset(range(BUCKETS))


def test_only_drained_buckets_are_freed() -> None:
    table = Table(open=True, holders=dict.fromkeys(range(4), "a_1"))
    decided = plan(table, [ME, B], ME, {}, openable=True)
    releases = sorted(decided.releases & set(range(4)))
    assert releases, "some of buckets 0-3 go to r-b"
    after = applied(table, "a_1", decided, drained=releases[:1])
    assert releases[0] not in after.holders
    assert all(after.holders[b] == "a_1" for b in releases[1:])
    for bucket in decided.claims:
        assert after.holders[bucket] == "a_1"
