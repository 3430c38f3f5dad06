"""The work table: which clusters need a sync when an application's work changes."""

from __future__ import annotations

from propagator.propagation.work import ClusterWork, SyncPolicy, WorkTable


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
