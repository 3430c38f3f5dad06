"""Timed operations land in the propagation histogram as success or failure."""

from __future__ import annotations

import pytest

from propagator.observability.metrics import Metrics


def _count(metrics: Metrics, operation: str, status: str) -> float:
    value = metrics.registry.get_sample_value(
        "propagator_propagation_duration_seconds_count",
        {"operation": operation, "status": status},
    )
    return value or 0.0


def test_a_block_is_a_success_unless_it_raises_or_says_it_failed() -> None:
    metrics = Metrics()
    with metrics.timed("apply"):
        pass
    with metrics.timed("apply") as timing:
        timing.failed = True
    with pytest.raises(RuntimeError), metrics.timed("apply"):
        raise RuntimeError("boom")
    assert _count(metrics, "apply", "success") == 1
    assert _count(metrics, "apply", "failure") == 2
