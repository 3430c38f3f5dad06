from __future__ import annotations

import anyio
import pytest

from kube.connection import call_with_retries
from kube.errors import ApiError
from kube.retry import backoff_delay


def test_retries_retryable_errors_then_succeeds() -> None:
    calls = []

    async def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ApiError("m", "503", status=503, retryable=True, retry_after_s=0.0)
        return "ok"

    assert anyio.run(lambda: call_with_retries(flaky, backoff_s=0.0)) == "ok"
    assert len(calls) == 3


def test_does_not_retry_what_would_fail_again() -> None:
    calls = []

    async def invalid() -> None:
        calls.append(1)
        raise ApiError("m", "422 Invalid", status=422)

    with pytest.raises(ApiError, match="422"):
        anyio.run(lambda: call_with_retries(invalid, backoff_s=0.0))
    assert len(calls) == 1


def test_gives_up_after_the_attempts() -> None:
    calls = []

    async def down() -> None:
        calls.append(1)
        raise ApiError("m", "timeout", retryable=True)

    with pytest.raises(ApiError, match="timeout"):
        anyio.run(lambda: call_with_retries(down, attempts=2, backoff_s=0.0))
    assert len(calls) == 3


def test_backoff_doubles_with_jitter_is_capped_and_honours_retry_after() -> None:
    for retry, step in ((1, 1.0), (2, 2.0), (3, 4.0), (6, 10.0)):
        delay = backoff_delay(retry, 1.0, 10.0)
        assert step / 2 <= delay <= step
    assert backoff_delay(1, 1.0, 10.0, retry_after_s=3.0) == 3.0
    assert backoff_delay(1, 1.0, 10.0, retry_after_s=60.0) == 10.0


def test_a_key_that_failed_thousands_of_times_waits_the_cap() -> None:
    # A member or hub away for a long time: a queue's key fails over and over (the agent's
    # reports during a ten-minute hub outage passed 1,024 failures, where 2**1024 overflowed).
    for retry in (1025, 10**6):
        assert backoff_delay(retry, 0.5, 2.0, jitter=False) == 2.0
        assert 1.0 <= backoff_delay(retry, 0.5, 2.0) <= 2.0
