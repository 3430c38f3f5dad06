"""``propagator run`` as shards (``PROPAGATOR_SHARDING``): three, then four replicas divide
the applications through Leases on the real hub. Nothing is ever written twice: every
test compares the replicas' member-write counters with the objects on the members — one
replica SIGKILLed mid fan-out, a fourth joining mid fan-out, every Lease deleted, clocks
skewed, a twin process holding a replica's Lease, a hub that stops answering one replica.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from fleet.local import HUB
from propagator.runtime.shardplan import BUCKETS, application_key, assign, bucket_of, member_key
from propagator.runtime.shards import REPLICA_LEASE_PREFIX, TABLE_LEASE
from tests.e2e.conftest import Fleet
from tests.e2e.controller import Controller
from tests.e2e.controller import running as controller_running
from tests.e2e.install.test_two_replicas import (
    LEASE,
    _applied_writes,
    _remove_other_applications,
)
from tests.e2e.manifests import config_map
from tests.e2e.propagation.test_propagation import (
    ENV,
    MEMBERS,
    ap_gone,
    application,
    create,
    delete_ap,
    ready_everywhere,
    update_spec,
    wait_ap,
)
from tests.e2e.relay import Relay
from tests.e2e.waiting import eventually

NS = "shards"
CONTROLLER_NS = "propagator-system"
APPS = 12
OBJECTS = 60
"""Per application and member: 12 * 60 * 3 = 2,160 writes, more than the replicas make
between the first showing and the event a test injects (one cluster at a time each)."""
WAVES = {
    "groups": [{"name": f"w{i + 1}", "clusters": [m]} for i, m in enumerate(MEMBERS)],
    "minHealthyTime": "6s",
}
SHARDED = {**ENV, **LEASE, "PROPAGATOR_SHARDING": "true"}
LEASE_DURATION_S = float(LEASE["PROPAGATOR_LEADER_LEASE_DURATION_S"])
RENEW_DEADLINE_S = float(LEASE["PROPAGATOR_LEADER_RENEW_DEADLINE_S"])


class Shards:
    """The replicas a test started, by name; all stopped at its end."""

    def __init__(self, fleet: Fleet, tmp: pytest.TempPathFactory) -> None:
        self.fleet, self.tmp = fleet, tmp
        self.running: dict[str, Controller] = {}
        self.stopped: list[Controller] = []

    def start(
        self, name: str, env: dict[str, str] | None = None, hub_args: list[str] | None = None
    ) -> Controller:
        replica = Controller(
            self.fleet,
            self.tmp.mktemp(name),
            {**SHARDED, "PROPAGATOR_REPLICA_NAME": name, **(env or {})},
            hub_args,
        )
        replica.start()
        self.running[name if name not in self.running else f"{name}-twin"] = replica
        return replica

    def kill(self, name: str) -> Controller:
        replica = self.running.pop(name)
        replica.kill()
        self.stopped.append(replica)
        return replica

    def writes(self) -> float:
        """Member writes of the replicas running (apply operations)."""
        return sum(_applied_writes(r) for r in self.running.values())

    def metric(self, name: str, metric: str) -> float:
        try:
            return self.running[name].scrape().get(metric, -1.0)
        except (OSError, AssertionError):  # not serving yet
            return -1.0

    def balanced(self, names: list[str]) -> bool:
        """Each of ``names`` holds exactly the buckets the assignment gives it, and they
        hold all of them between them."""
        held = [self.metric(n, "propagator_shard_buckets") for n in names]
        designated = [self.metric(n, "propagator_shard_designated_buckets") for n in names]
        return sum(held) == BUCKETS and held == designated and all(h > 0 for h in held)

    def wait_balanced(self, names: list[str]) -> None:
        eventually(lambda: self.balanced(names) or None, f"{names} hold all buckets")

    def three(self) -> list[str]:
        """Replicas r-a, r-b and r-c started, each holding its share."""
        names = ["r-a", "r-b", "r-c"]
        for name in names:
            self.start(name)
        self.wait_balanced(names)
        return names

    def close(self) -> None:
        for replica in self.running.values():
            if replica.proc is not None:
                replica.stop()


@pytest.fixture
def shards(
    fleet: Fleet, joined: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Shards]:
    running = Shards(fleet, tmp_path_factory)
    # The write counters below must be this test's alone: earlier applications go first
    # (a controller removes their finalizers).
    listed: Any = k8s.CustomObjectsApi(fleet.api(HUB)).list_cluster_custom_object(
        "propagator.io", "v1alpha1", "applicationpropagations"
    )
    if listed["items"]:
        with controller_running(fleet, tmp_path_factory.mktemp("cleaner"), ENV) as cleaner:
            eventually(lambda: cleaner.ready()[0] == 200 or None, "the cleaner ready")
            _remove_other_applications(fleet)
    try:
        yield running
    finally:
        if not running.running:
            running.start("cleaner")
        for i in range(APPS):
            if not ap_gone(fleet, NS, f"app-{i:02d}"):
                delete_ap(fleet, NS, f"app-{i:02d}")
        for i in range(APPS):
            eventually(
                lambda i=i: ap_gone(fleet, NS, f"app-{i:02d}") or None,  # type: ignore[misc]
                f"{NS}/app-{i:02d} gone",
            )
        running.close()


def _applications(
    fleet: Fleet, which: list[str] | None = None, rollout: dict[str, Any] | None = None
) -> int:
    """Create the applications (``which``: these of them), each one cluster at a time
    (or as ``rollout`` says); returns how many objects they want."""
    wanted = 0
    for i in range(APPS):
        if which is not None and f"app-{i:02d}" not in which:
            continue
        objects = []
        for j in range(OBJECTS):
            cm = config_map(f"app-{i:02d}-{j:02d}", NS, index=str(j))
            cm["metadata"]["labels"] = {"part": "shards", "app": f"app-{i:02d}"}
            objects.append(cm)
        spec = rollout or {"maxConcurrency": 1}
        create(fleet, application(f"app-{i:02d}", NS, objects, rollout=spec))
        wanted += OBJECTS * len(MEMBERS)
    return wanted


def _on_members(fleet: Fleet, apps: list[str] | None = None) -> int:
    """The applications' objects on the members (``apps``: only theirs)."""
    selector = "part=shards" if apps is None else f"app in ({','.join(apps)})"
    return sum(
        len(fleet.core(c).list_namespaced_config_map(NS, label_selector=selector).items)
        for c in MEMBERS
    )


def _all_applied(fleet: Fleet, total: int) -> None:
    for i in range(APPS):
        wait_ap(fleet, NS, f"app-{i:02d}", "ready everywhere", ready_everywhere)
    assert _on_members(fleet) == total  # none lost


def _handled_by(names: list[str]) -> dict[str, list[str]]:
    """The applications each replica handles: the assignment every replica computes
    (rendezvous hashing of the names over the applications' buckets)."""
    designated = assign(names)
    apps: dict[str, list[str]] = {n: [] for n in names}
    for i in range(APPS):
        apps[designated[bucket_of(application_key(f"{NS}/app-{i:02d}"))]].append(f"app-{i:02d}")
    return apps


def _shares_as_assigned(shards: Shards, names: list[str]) -> None:
    for name, apps in _handled_by(names).items():
        count = len(apps)
        eventually(
            lambda n=name, k=count: (  # type: ignore[misc]
                shards.metric(n, "propagator_shard_applications") == k or None
            ),
            f"{name} handles {count} applications",
        )


def _exactly_once(shards: Shards, before: float, total: int, gone_wrote: float = 0) -> None:
    """The running replicas' writes since ``before``, and ``gone_wrote`` by replicas
    gone, are the objects wanted, exactly: every object once, none twice — and stay so."""
    want = total - gone_wrote
    eventually(
        lambda: shards.writes() - before == want or None,
        f"the replicas' writes = {total} - {gone_wrote}",
    )
    time.sleep(2)  # a late duplicate would show here
    assert shards.writes() - before == want


def _leases(fleet: Fleet) -> k8s.CoordinationV1Api:
    return k8s.CoordinationV1Api(fleet.api(HUB))


def _changed(spec: dict[str, Any]) -> None:
    for manifest in spec["resources"]["manifests"]:
        manifest["data"] = {**(manifest.get("data") or {}), "revision": "2"}


def _on_revision_2(fleet: Fleet, apps: list[str]) -> int:
    return sum(
        1
        for c in MEMBERS
        for cm in fleet.core(c)
        .list_namespaced_config_map(NS, label_selector=f"app in ({','.join(apps)})")
        .items
        if (cm.data or {}).get("revision") == "2"
    )


def test_three_replicas_divide_the_work_and_a_killed_ones_share_is_taken_over(
    fleet: Fleet, shards: Shards
) -> None:
    names = shards.three()
    _probes_divided(shards, names)
    handled = _handled_by(names)
    busiest = max(names, key=lambda n: len(handled[n]))
    mine = handled[busiest]
    _applications(fleet, mine, {"waves": WAVES})
    _applications(fleet, [f"app-{i:02d}" for i in range(APPS) if f"app-{i:02d}" not in mine])
    _all_applied(fleet, APPS * OBJECTS * len(MEMBERS))
    # Each application is handled by the one replica the assignment names.
    _shares_as_assigned(shards, names)
    survivors = [n for n in names if n != busiest]
    before = sum(_applied_writes(shards.running[n]) for n in survivors)
    for app in mine:  # a change, in waves: the busiest replica writes the first
        update_spec(fleet, NS, app, _changed)
    eventually(lambda: _on_revision_2(fleet, mine) > 0 or None, f"{busiest} writing the change")
    shards.kill(busiest)
    killed = time.monotonic()
    time.sleep(1)  # its writes in flight land; nobody takes its share before its Lease expires
    gone_wrote = _on_revision_2(fleet, mine)
    changed = len(mine) * OBJECTS * len(MEMBERS)
    assert gone_wrote < changed, "killed after its work"

    shards.wait_balanced(survivors)
    took = time.monotonic() - killed
    print(f"{busiest}'s buckets held by {survivors} {took:.1f}s after its SIGKILL")
    # Not before its Lease could have expired (its last renewal at most a retry period
    # before the kill).
    assert took >= LEASE_DURATION_S - float(LEASE["PROPAGATOR_LEADER_RETRY_PERIOD_S"])
    eventually(lambda: _on_revision_2(fleet, mine) == changed or None, "the change everywhere")
    # The survivors wrote the rest of the change, and nothing the killed replica had.
    _exactly_once(shards, before, changed, gone_wrote=gone_wrote)
    _shares_as_assigned(shards, survivors)


def _probes(shards: Shards, name: str) -> dict[str, float]:
    return {
        c: shards.metric(name, f'propagator_member_probes_total{{cluster="{c}",result="ok"}}')
        for c in MEMBERS
    }


def _probes_divided(shards: Shards, names: list[str]) -> None:
    """Each member is probed by the one replica the assignment names, and by no other."""
    designated = assign(names)
    owner = {c: designated[bucket_of(member_key(c))] for c in MEMBERS}
    for name in names:
        mine = sum(1 for c in MEMBERS if owner[c] == name)
        eventually(
            lambda n=name, k=mine: (  # type: ignore[misc]
                shards.metric(n, "propagator_shard_member_clusters") == k or None
            ),
            f"{name} probes {mine} members",
        )
    before = {n: _probes(shards, n) for n in names}
    time.sleep(3)  # three probe intervals
    for name in names:
        after = _probes(shards, name)
        probed = {c for c in MEMBERS if after[c] > max(before[name][c], 0)}
        assert probed == {c for c in MEMBERS if owner[c] == name}, name


def _released(shards: Shards, names: list[str]) -> float:
    return sum(
        shards.metric(n, 'propagator_shard_handoffs_total{direction="released"}') for n in names
    )


def test_a_fourth_replica_takes_its_share_mid_rollout_writing_nothing_twice(
    fleet: Fleet, shards: Shards
) -> None:
    names = shards.three()
    moving = _handled_by([*names, "r-d"])["r-d"]
    assert moving, "the new replica takes applications"
    # Those it will take roll a change out in waves, a member every few seconds.
    _applications(fleet, moving, {"waves": WAVES})
    _applications(fleet, [f"app-{i:02d}" for i in range(APPS) if f"app-{i:02d}" not in moving])
    _all_applied(fleet, APPS * OBJECTS * len(MEMBERS))
    before, released = shards.writes(), _released(shards, names)
    # Its counter starts at 0: the sum over all four still counts every write once.
    fourth = shards.start("r-d")
    for app in moving:  # their replicas begin the waves while it starts
        update_spec(fleet, NS, app, _changed)
    names.append("r-d")
    shards.wait_balanced(names)
    changed = len(moving) * OBJECTS * len(MEMBERS)
    assert _on_revision_2(fleet, moving) < changed, "it took its share after the rollout"
    eventually(lambda: _on_revision_2(fleet, moving) == changed or None, "the change everywhere")
    # Only the change was written, each object once: some by the replicas that began the
    # waves, the rest by the new one.
    _exactly_once(shards, before, changed)
    assert 0 < _applied_writes(fourth) < changed
    _shares_as_assigned(shards, names)
    # The others let go of what it holds now (a bucket may go back and forth while its
    # readiness settles: at least that many).
    let_go = _released(shards, names[:3]) - released
    assert let_go >= shards.metric("r-d", "propagator_shard_buckets")


def test_deleted_leases_and_skewed_clocks_make_no_second_writer(
    fleet: Fleet, shards: Shards, faketime: Path
) -> None:
    names = ["r-a", "r-b", "r-c"]
    skew = {
        "r-b": {"LD_PRELOAD": str(faketime), "FAKETIME": "+5s", "DONT_FAKE_MONOTONIC": "1"},
        "r-c": {"LD_PRELOAD": str(faketime), "FAKETIME": "-4s", "DONT_FAKE_MONOTONIC": "1"},
    }
    for name in names:
        shards.start(name, skew.get(name))
    shards.wait_balanced(names)
    listed: Any = _leases(fleet).list_namespaced_lease(CONTROLLER_NS)
    renewals = {lease.metadata.name: lease.spec.renew_time for lease in listed.items}
    # The clocks differ (the renewal times each replica writes), and the shares hold.
    stamps = sorted(renewals[REPLICA_LEASE_PREFIX + n] for n in names)
    assert (stamps[-1] - stamps[0]).total_seconds() > 3
    before = shards.writes()
    total = _applications(fleet)
    eventually(lambda: shards.writes() > before or None, "fan-out begun")
    api = _leases(fleet)
    for _ in range(3):  # every Lease, again and again while they write
        for name in [TABLE_LEASE, *(REPLICA_LEASE_PREFIX + n for n in names)]:
            try:
                api.delete_namespaced_lease(name, CONTROLLER_NS)
            except k8s.ApiException as exc:
                if exc.status != 404:
                    raise
        time.sleep(LEASE_DURATION_S / 2)
    assert _on_members(fleet) < total, "the Leases went after the fan-out"
    shards.wait_balanced(names)
    _all_applied(fleet, total)
    _exactly_once(shards, before, total)


def _through(fleet: Fleet, relay: Relay, path: Path) -> list[str]:
    """Hub arguments of a replica that reaches the hub through ``relay``."""
    config: Any = yaml.safe_load(fleet.kubeconfig(HUB).read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = relay.address
    path.write_text(yaml.safe_dump(config))
    return ["--hub-kubeconfig", str(path)]


def test_a_replica_the_hub_stops_answering_stops_before_its_share_is_taken(
    fleet: Fleet, shards: Shards, tmp_path: Path
) -> None:
    relay = Relay(("127.0.0.1", fleet.state.cluster(HUB).api_port))
    try:
        slow = shards.start("r-a", hub_args=_through(fleet, relay, tmp_path / "hub.yaml"))
        names = ["r-a", "r-b", "r-c"]
        for name in names[1:]:
            shards.start(name)
        shards.wait_balanced(names)
        mine = _handled_by(names)["r-a"]
        _applications(fleet, mine, {"waves": WAVES})
        _applications(fleet, [f"app-{i:02d}" for i in range(APPS) if f"app-{i:02d}" not in mine])
        _all_applied(fleet, APPS * OBJECTS * len(MEMBERS))
        for app in mine:  # a change, in waves: r-a writes the first
            update_spec(fleet, NS, app, _changed)
        eventually(lambda: _on_revision_2(fleet, mine) > 0 or None, "r-a writing the change")
        relay.stall()  # the hub still stores its renewals; its answers never come back
        stalled = time.monotonic()
        before = shards.writes() - _applied_writes(slow)  # the others'
        assert slow.proc is not None
        exited = taken = None
        while exited is None or taken is None:  # which comes first, polled closely
            now = time.monotonic() - stalled
            assert now < 60, "r-a did not stop, or its share was not taken"
            if exited is None and slow.proc.poll() is not None:
                exited = now
                time.sleep(0.2)  # its member writes in flight land (not through the hub)
                gone_wrote = _on_revision_2(fleet, mine)
            held = sum(shards.metric(n, "propagator_shard_buckets") for n in names[1:])
            if taken is None and held == BUCKETS:
                taken = now
            time.sleep(0.05)
        print(f"r-a stopped {exited:.1f}s after the hub stalled; its share taken at {taken:.1f}s")
        assert exited < taken
        assert slow.proc.returncode == 1, slow.log_tail()
        assert "could not renew its Lease or read the shard table" in slow.log_tail()
        shards.running.pop("r-a")
        changed = len(mine) * OBJECTS * len(MEMBERS)
        assert gone_wrote < changed, "r-a stopped after its work"
        eventually(lambda: _on_revision_2(fleet, mine) == changed or None, "the change everywhere")
        _exactly_once(shards, before, changed, gone_wrote=gone_wrote)
    finally:
        relay.close()


def test_a_twin_holding_a_replicas_lease_keeps_the_other_out_until_it_is_gone(
    fleet: Fleet, shards: Shards
) -> None:
    names = shards.three()
    twin = shards.start("r-a")  # a second process with the same name: a stale pod, say
    eventually(lambda: twin.ready()[0] in (200, 503) or None, "the twin serving")
    time.sleep(LEASE_DURATION_S)
    assert twin.scrape().get("propagator_shard_buckets") == 0
    assert shards.balanced(names)
    mine = _handled_by(names)["r-a"]
    _applications(fleet, mine, {"waves": WAVES})
    _applications(fleet, [f"app-{i:02d}" for i in range(APPS) if f"app-{i:02d}" not in mine])
    _all_applied(fleet, APPS * OBJECTS * len(MEMBERS))
    before = shards.writes() - _applied_writes(shards.running["r-a"])  # the others'
    for app in mine:  # a change, in waves: r-a writes the first
        update_spec(fleet, NS, app, _changed)
    eventually(lambda: _on_revision_2(fleet, mine) > 0 or None, "r-a writing the change")
    shards.kill("r-a")
    time.sleep(1)
    gone_wrote = _on_revision_2(fleet, mine)
    changed = len(mine) * OBJECTS * len(MEMBERS)
    assert gone_wrote < changed, "killed after its work"
    # The twin takes the name's Lease once it expires, and with it the name's share.
    shards.running["r-a"] = shards.running.pop("r-a-twin")
    shards.wait_balanced(names)
    eventually(lambda: _on_revision_2(fleet, mine) == changed or None, "the change everywhere")
    _exactly_once(shards, before, changed, gone_wrote=gone_wrote)
