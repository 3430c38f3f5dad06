"""The work table: which clusters need a sync when an application's work changes."""

from __future__ import annotations

from propagator.work.table import ClusterWork, SyncPolicy, SyncState, WorkTable


def _works(revision: str, *clusters: str) -> dict[str, ClusterWork]:
    return {
        c: ClusterWork("shop/web", c, (), revision, frozenset(), SyncPolicy()) for c in clusters
    }


def test_new_or_changed_work_is_due_unchanged_work_only_after_the_recheck_period() -> None:
    table = WorkTable()
    assert table.set_work("shop/web", _works("r1", "a", "b"), now=0, recheck_after_s=60) == [
        "a",
        "b",
    ]
    for cluster in ("a", "b"):
        state = table.state("shop/web", cluster)
        assert state is not None
        table.record_applied("shop/web", cluster, state, (), now=0.0)
    assert table.set_work("shop/web", _works("r1", "a", "b"), now=10, recheck_after_s=60) == []
    assert table.set_work("shop/web", _works("r1", "a", "b"), now=60, recheck_after_s=60) == [
        "a",
        "b",
    ]
    for cluster in ("a", "b"):
        state = table.state("shop/web", cluster)
        assert state is not None
        table.record_applied("shop/web", cluster, state, (), now=60.0)  # rechecked
    works = {**_works("r1", "a"), **_works("r2", "b")}
    assert table.set_work("shop/web", works, now=61, recheck_after_s=60) == ["b"]
    state = table.state("shop/web", "b")
    assert state is not None
    assert state.revision == "r2"
    assert not state.applied


def test_a_cluster_left_out_loses_its_state_and_forget_drops_everything() -> None:
    table = WorkTable()
    table.set_work("shop/web", _works("r1", "a", "b"), now=0, recheck_after_s=60)
    table.set_work("shop/other", _works("r1", "a"), now=0, recheck_after_s=60)
    table.set_work("shop/web", _works("r1", "a"), now=1, recheck_after_s=60)
    assert table.state("shop/web", "b") is None
    assert set(table.works_of("shop/web")) == {"a"}
    assert table.apps_on("a") == ["shop/other", "shop/web"]
    table.forget("shop/web")
    assert table.apps_on("a") == ["shop/other"]
    assert table.apps() == ["shop/other"]
    assert table.states_of("shop/web") == {}
    assert table.works_of("shop/web") == {}


def test_failures_elsewhere_count_other_clusters_only() -> None:
    table = WorkTable()
    table.set_work("shop/web", _works("r1", "a", "b", "c"), now=0, recheck_after_s=60)
    for cluster in ("a", "b"):
        state = table.state("shop/web", cluster)
        assert state is not None
        table.record_failure(
            "shop/web", cluster, state, "refused", within_retries=False, over_quota=False, now=0
        )
    assert table.failed_elsewhere("shop/web", "a") == 1
    assert table.failed_elsewhere("shop/web", "c") == 2


def test_what_an_earlier_controller_reported_applied_starts_applied_and_is_still_synced() -> None:
    """After a restart, a cluster the status shows applied at the revision of its work
    counts as applied until its sync reports (it is synced all the same); another
    revision, or a cluster the status does not show applied, starts over."""
    table = WorkTable()
    works = {**_works("r1", "a", "b"), **_works("r2", "c")}
    reported = {"a": ("r1", 2), "c": ("r1", 1)}
    due = table.set_work("shop/web", works, now=0, recheck_after_s=60, reported=reported)
    assert due == ["a", "b", "c"]
    assert set(table.states_of("shop/web")) == {"a", "b", "c"}
    a, b, c = (table.state("shop/web", x) or SyncState("none") for x in "abc")
    assert (a.applied, a.attempts, a.carried) == (True, 2, True)
    assert (b.applied, b.carried) == (False, False)
    assert (c.applied, c.carried) == (False, False)  # the status is of another revision
    # A state the table holds is never replaced by what the status says.
    table.record_failure("shop/web", "b", b, "503", within_retries=True, over_quota=False, now=0)
    table.set_work(
        "shop/web", works, now=1, recheck_after_s=60, reported={"b": ("r1", 1), **reported}
    )
    assert table.state("shop/web", "b") is b
    assert not b.applied


def test_pending_and_failures_follow_what_each_sync_records() -> None:
    table = WorkTable()
    table.set_work("shop/web", _works("r1", "a", "b", "c"), now=0, recheck_after_s=60)
    a, b, c = (table.state("shop/web", x) or SyncState("none") for x in "abc")
    table.record_applied("shop/web", "a", a, (), now=1)
    table.record_failure("shop/web", "b", b, "503", within_retries=True, over_quota=False, now=1)
    assert table.pending("shop/web")  # b is still within its retries, c not tried
    assert table.failed_elsewhere("shop/web", "a") == 0
    table.record_skip("shop/web", "c", c, "circuit open")
    table.record_failure("shop/web", "b", b, "503", within_retries=False, over_quota=False, now=2)
    assert not table.pending("shop/web")
    assert table.failed_elsewhere("shop/web", "a") == 2
    assert table.failed_elsewhere("shop/web", "b") == 1
    table.record_applied("shop/web", "b", b, ("ConfigMap shop/x: not ours",), now=3)
    assert (b.applied, b.failed, b.conflict) == (False, True, True)  # a conflict counts failed
    table.record_applied("shop/web", "c", c, (), now=3)
    assert table.failed_elsewhere("shop/web", "a") == 1
    table.record_unreachable("shop/web", "a", "no route")
    assert a.error == "cannot connect: no route"
    assert table.failed_elsewhere("shop/web", "c") == 2


def test_a_sync_of_a_replaced_revision_changes_no_count() -> None:
    """The work changed while a sync ran: its outcome lands in the state it started from,
    not in the new revision's, which is still pending."""
    table = WorkTable()
    table.set_work("shop/web", _works("r1", "a"), now=0, recheck_after_s=60)
    old = table.state("shop/web", "a")
    assert old is not None
    table.set_work("shop/web", _works("r2", "a"), now=1, recheck_after_s=60)
    table.record_failure("shop/web", "a", old, "503", within_retries=False, over_quota=False, now=2)
    assert old.failed
    assert table.pending("shop/web")
    assert table.failed_elsewhere("shop/web", "b") == 0
    new = table.state("shop/web", "a")
    assert new is not None
    assert new is not old
    assert not new.failed
    table.record_applied("shop/web", "a", new, (), now=3)
    assert not table.pending("shop/web")
    table.forget("shop/web")
    assert not table.pending("shop/web")


def _reporting(revision: str, heal: str = "") -> dict[str, ClusterWork]:
    work = ClusterWork(
        "shop/web", "a", (), revision, frozenset(), SyncPolicy(), heal_drift=False, heal=heal
    )
    return {"a": work}


def test_reported_drift_is_healed_by_a_new_revision_or_a_sync_request_only() -> None:
    table = WorkTable()
    works = _reporting("r1")
    table.set_work("shop/web", works, now=0, recheck_after_s=60)
    state = table.state("shop/web", "a")
    assert state is not None
    assert state.heals(works["a"])  # the first sync of a revision writes it all
    table.record_applied("shop/web", "a", state, (), 0.0, ("v1 ConfigMap shop/x",), 100.0, "")
    assert not state.heals(works["a"])
    assert state.drift == ("v1 ConfigMap shop/x",)
    assert state.drift_since == 100.0
    table.record_applied("shop/web", "a", state, (), 1.0, ("v1 ConfigMap shop/x",), 200.0, "")
    assert state.drift_since == 100.0  # since it was first found
    asked = _reporting("r1", heal="t1")
    assert table.set_work("shop/web", asked, now=2, recheck_after_s=60) == ["a"]
    assert state.heals(asked["a"])
    table.record_applied("shop/web", "a", state, (), 3.0, (), 300.0, "t1")
    assert not state.heals(asked["a"])
    assert not state.drift
    assert state.drift_since is None
    assert table.set_work("shop/web", asked, now=4, recheck_after_s=60) == []
    table.set_work("shop/web", _reporting("r2"), now=5, recheck_after_s=60)
    fresh = table.state("shop/web", "a")
    assert fresh is not None
    assert fresh.heals(_reporting("r2")["a"])


def test_a_carried_state_after_a_restart_does_not_heal_reported_drift() -> None:
    table = WorkTable()
    works = _reporting("r1")
    table.set_work("shop/web", works, now=0, recheck_after_s=60, reported={"a": ("r1", 1)})
    state = table.state("shop/web", "a")
    assert state is not None
    assert state.carried
    assert not state.heals(works["a"])
