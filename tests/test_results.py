"""The Applied condition's summary of the member syncs."""

from __future__ import annotations

from propagator.conditions import NAMED_CLUSTERS
from propagator.propagation.results import applied_summary
from propagator.propagation.work import SyncState


def test_every_failure_is_named_and_the_clusters_in_progress_up_to_a_limit() -> None:
    states = {f"far-{n:04}": SyncState("r1", applied=n < 300) for n in range(1000)}
    states["far-0999"] = SyncState("r1", error="503 Service Unavailable")
    for n in range(300, 320):
        states[f"far-{n:04}"] = SyncState("r1", failed=True, attempts=4, error="refused")
    message = applied_summary(states)
    failed = "; ".join(f"far-{n:04}: refused after 4 attempts" for n in range(300, 320))
    # The one retrying is named first, then the first waiting; the rest are counted.
    waiting = ", ".join(f"far-{n:04}" for n in range(320, 320 + NAMED_CLUSTERS - 1))
    assert message == (
        f"300/1000 clusters applied; 20 failed: {failed}; 680 in progress: "
        f"far-0999 (retrying: 503 Service Unavailable), {waiting} and 670 more"
    )


def test_a_short_list_is_named_whole() -> None:
    states = {"a": SyncState("r1", applied=True), "b": SyncState("r1")}
    assert applied_summary(states) == "1/2 clusters applied; 1 in progress: b"
