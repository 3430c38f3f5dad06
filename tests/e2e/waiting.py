"""Waiting for eventual state in e2e tests.

The bound only turns a hang into a failure with a message; no test asserts how fast
anything happens.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

HANG_GUARD_S = 180.0


def eventually(probe: Callable[[], T | None], what: str, limit_s: float = HANG_GUARD_S) -> T:
    """Call ``probe`` until it returns something truthy, and return that."""
    deadline = time.monotonic() + limit_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = probe()
        except Exception as exc:  # the cluster may still be converging
            last_error = exc
        else:
            if result:
                return result
        time.sleep(0.25)
    raise AssertionError(f"never happened: {what} (last error: {last_error!r})")
