"""What a status writer does when its write fails."""

from __future__ import annotations

import logging
from collections.abc import Callable

from kube.errors import ApiError


def status_not_written(kind: str, log: logging.Logger) -> Callable[[str, Exception], bool]:
    """For :meth:`WorkQueue.serve`: a status write of ``kind`` that failed is logged (to
    ``log``) and retried, unless the object is gone (nothing left to write)."""

    def failed(name: str, exc: Exception) -> bool:
        if isinstance(exc, ApiError) and exc.not_found:
            return False
        log.warning("%s %s: status not written: %s", kind, name, exc)
        return True

    return failed
