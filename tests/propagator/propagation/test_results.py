"""The Applied condition's summary of the member syncs."""

from __future__ import annotations

from propagator.conditions import NAMED_CLUSTERS
from propagator.propagation.results import applied_summary
from propagator.work.table import SyncState


def _far(n: int) -> str:
    return f"far-{n:04}"


def test_failures_by_error_and_the_clusters_in_progress_up_to_a_limit() -> None:
    states = {_far(n): SyncState("r1", applied=n < 300) for n in range(1000)}
    states["far-0999"] = SyncState("r1", error="503 Service Unavailable")
    for n in range(300, 320):
        states[_far(n)] = SyncState("r1", failed=True, attempts=4, error="refused")
    states["far-0320"] = SyncState("r1", failed=True, attempts=1, error="422 Invalid")
    message = applied_summary(states)
    # One error shared by 20 clusters is one entry, its first clusters named.
    refused = ", ".join(_far(n) for n in range(300, 300 + NAMED_CLUSTERS))
    # The one retrying is named first, then the first waiting; the rest are counted.
    waiting = ", ".join(_far(n) for n in range(321, 321 + NAMED_CLUSTERS - 1))
    assert message == (
        f"300/1000 clusters applied; 21 failed: {refused} and 10 more: refused after 4 "
        "attempts; far-0320: 422 Invalid after 1 attempt; 679 in progress: "
        f"far-0999 (retrying: 503 Service Unavailable), {waiting} and 669 more"
    )


def test_the_errors_most_clusters_share_come_first_and_past_a_limit_are_counted() -> None:
    states = {_far(n): SyncState("r1", failed=True, error=f"error {n}") for n in range(30)}
    for n in range(30, 33):
        states[_far(n)] = SyncState("r1", failed=True, error="timeout")
    message = applied_summary(states)
    shown = "; ".join(f"{_far(n)}: error {n}" for n in range(NAMED_CLUSTERS - 1))
    assert message == (
        f"0/33 clusters applied; 33 failed: far-0030, far-0031, far-0032: timeout; {shown}; "
        f"{30 - NAMED_CLUSTERS + 1} more clusters with {30 - NAMED_CLUSTERS + 1} other errors"
    )


def test_a_short_list_is_named_whole() -> None:
    states = {"a": SyncState("r1", applied=True), "b": SyncState("r1")}
    assert applied_summary(states) == "1/2 clusters applied; 1 in progress: b"
