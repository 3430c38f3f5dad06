"""What re-queues an application: not the controller's own status writes."""

from __future__ import annotations

from typing import Any

from propagator.propagation.controller import _spec_changed


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
