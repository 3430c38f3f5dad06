"""The work table: which clusters need a sync when an application's work changes."""

from __future__ import annotations

from propagator.propagation.work import ClusterWork, SyncPolicy, SyncState, WorkTable


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
        state.applied, state.tried_at = True, 0.0
    assert table.set_work("shop/web", _works("r1", "a", "b"), now=10, recheck_after_s=60) == []
    assert table.set_work("shop/web", _works("r1", "a", "b"), now=60, recheck_after_s=60) == [
        "a",
        "b",
    ]
    for cluster in ("a", "b"):
        state = table.state("shop/web", cluster)
        assert state is not None
        state.tried_at = 60.0  # rechecked
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
    assert table.apps_on("a") == ["shop/other", "shop/web"]
    table.forget("shop/web")
    assert table.apps_on("a") == ["shop/other"]
    assert table.states_of("shop/web") == {}


def test_failures_elsewhere_count_other_clusters_only() -> None:
    table = WorkTable()
    table.set_work("shop/web", _works("r1", "a", "b", "c"), now=0, recheck_after_s=60)
    for cluster in ("a", "b"):
        state = table.state("shop/web", cluster)
        assert state is not None
        state.failed = True
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
    b.applied, b.tried_at = False, 0.0
    table.set_work(
        "shop/web", works, now=1, recheck_after_s=60, reported={"b": ("r1", 1), **reported}
    )
    assert table.state("shop/web", "b") is b
    assert not b.applied
