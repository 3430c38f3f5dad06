"""What is known applied: skipped until the resync period, forgotten on demand."""

from __future__ import annotations

import anyio

from propagator.observability.metrics import Metrics
from propagator.propagation.membersync import MemberSync
from propagator.settings import Settings


def test_a_known_revision_is_skipped_until_the_resync_period() -> None:
    sync = MemberSync(
        Settings(resync_period_s=60), lambda _: None, Metrics(), anyio.CapacityLimiter(1)
    )
    sync.remember("shop/web", "m1", "r1", now=100.0)
    sync.remember("shop/web", "m2", "r1", now=100.0)
    assert sync.is_known("shop/web", "m1", "r1", now=159.0)
    assert not sync.is_known("shop/web", "m1", "r2", now=101.0)  # a new revision
    assert not sync.is_known("shop/web", "m1", "r1", now=160.0)  # time to read it back
    assert not sync.is_known("shop/other", "m1", "r1", now=101.0)
    sync.forget("shop/web", "m1")
    assert not sync.is_known("shop/web", "m1", "r1", now=101.0)
    assert sync.is_known("shop/web", "m2", "r1", now=101.0)
    sync.forget("shop/web")
    assert not sync.is_known("shop/web", "m2", "r1", now=101.0)
