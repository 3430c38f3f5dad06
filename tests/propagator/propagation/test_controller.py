"""What re-queues an application (not the controller's own status writes), and when a
member sync's result refreshes its status."""

from __future__ import annotations

from typing import Any

from propagator.propagation.controller import (
    STATUS_DEBOUNCE_S,
    STATUS_PROGRESS_S,
    _spec_changed,
    status_refresh_delay,
)
from propagator.work.table import ClusterWork, SyncPolicy, WorkTable


def _app(generation: int, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web", "generation": generation, **meta}, "status": {}}


def test_status_only_updates_do_not_requeue() -> None:
    before = _app(1)
    after = {**_app(1), "status": {"ready": "3/3"}}
    assert not _spec_changed(before, after)


def test_our_finalizer_added_does_not_requeue_but_removed_does() -> None:
    # Added by the first plan, which went on: planning again would do it all twice.
    assert not _spec_changed(_app(1), _app(1, finalizers=["propagator.io/cleanup"]))
    assert not _spec_changed(_app(1), _app(1, finalizers=["example.com/other"]))
    # Taken away by someone: the next plan puts it back.
    assert _spec_changed(_app(1, finalizers=["propagator.io/cleanup"]), _app(1))
    assert _spec_changed(
        _app(1, finalizers=["example.com/other", "propagator.io/cleanup"]),
        _app(1, finalizers=["example.com/other"]),
    )


def test_spec_deletion_and_annotations_requeue() -> None:
    assert _spec_changed(_app(1), _app(2))
    assert _spec_changed(_app(1), _app(1, deletionTimestamp="2026-11-30T00:00:00Z"))
    assert _spec_changed(_app(1), _app(1, annotations={"propagator.io/orphan-unreachable": "true"}))
    assert _spec_changed(None, _app(1))


def test_the_status_is_refreshed_at_once_when_the_last_cluster_of_the_work_settles() -> None:
    table = WorkTable()
    works = {c: ClusterWork("shop/web", c, (), "r1", frozenset(), SyncPolicy()) for c in "ab"}
    table.set_work("shop/web", works, now=0, recheck_after_s=60)
    a, b = table.state("shop/web", "a"), table.state("shop/web", "b")
    assert a is not None
    assert b is not None
    # a settled, b still syncing: more is coming, the progress waits (and so does a
    # workload's change meanwhile)
    table.record_applied("shop/web", "a", a, (), now=1)
    assert status_refresh_delay(table, "shop/web", True) == STATUS_PROGRESS_S
    assert status_refresh_delay(table, "shop/web", False) == STATUS_PROGRESS_S
    # the last one settled (failed counts): nothing more is coming
    table.record_failure(
        "shop/web", "b", b, "refused", within_retries=False, over_quota=False, now=1
    )
    assert status_refresh_delay(table, "shop/web", True) == 0
    # What settles nothing afterwards (a recheck, a workload's change) is debounced: the
    # rechecks of a large application's clusters make one refresh.
    assert status_refresh_delay(table, "shop/web", False) == STATUS_DEBOUNCE_S


def test_the_progress_of_a_large_application_is_written_less_often() -> None:
    """Each write carries every cluster's line: 0.25 s per 25 clusters between them (10 s
    at 1,000), never less than 0.25 s."""
    table = WorkTable()
    clusters = [f"c{i:04d}" for i in range(1000)]
    works = {c: ClusterWork("shop/big", c, (), "r1", frozenset(), SyncPolicy()) for c in clusters}
    table.set_work("shop/big", works, now=0, recheck_after_s=60)
    assert status_refresh_delay(table, "shop/big", True) == STATUS_PROGRESS_S * 40 == 10
    small = {c: ClusterWork("shop/web", c, (), "r1", frozenset(), SyncPolicy()) for c in "abc"}
    table.set_work("shop/web", small, now=0, recheck_after_s=60)
    assert status_refresh_delay(table, "shop/web", True) == STATUS_PROGRESS_S
    for cluster, state in table.states_of("shop/big").items():
        table.record_applied("shop/big", cluster, state, (), now=1)
    # the last result is written at once, whatever the size
    assert status_refresh_delay(table, "shop/big", True) == 0


def test_a_caches_first_list_refreshes_no_status() -> None:
    from typing import cast

    from kube.connection import KubeConnection
    from kube.informer import Informer
    from propagator.propagation.controller import _listed
    from propagator.runtime.memberregistry import Member

    services = Informer(cast(KubeConnection, None), "v1", "Service", lambda *_: None)

    class _Member:
        def cached(self, api_version: str, kind: str) -> Informer | None:
            return services if (api_version, kind) == ("v1", "Service") else None

    member = cast(Member, _Member())
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}}
    # its events while it lists: the syncs that wait for the list refresh the status
    assert not _listed(member, service)
    services.mark_synced()
    assert _listed(member, service)  # a change seen by a listed cache: refreshed
    assert not _listed(member, {"apiVersion": "v1", "kind": "Pod", "metadata": {}})
