from __future__ import annotations

import pytest

from fleet.connection import ApiError
from fleet.retry import call_with_retries


def test_retries_retryable_errors_then_succeeds() -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ApiError("m", "503", status=503, retryable=True, retry_after_s=0.0)
        return "ok"

    assert call_with_retries(flaky, backoff_s=0.0) == "ok"
    assert len(calls) == 3


def test_does_not_retry_what_would_fail_again() -> None:
    calls = []

    def invalid() -> None:
        calls.append(1)
        raise ApiError("m", "422 Invalid", status=422)

    with pytest.raises(ApiError, match="422"):
        call_with_retries(invalid, backoff_s=0.0)
    assert len(calls) == 1


def test_gives_up_after_the_attempts() -> None:
    calls = []

    def down() -> None:
        calls.append(1)
        raise ApiError("m", "timeout", retryable=True)

    with pytest.raises(ApiError, match="timeout"):
        call_with_retries(down, attempts=2, backoff_s=0.0)
    assert len(calls) == 3
