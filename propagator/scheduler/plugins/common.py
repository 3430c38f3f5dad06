"""What the built-in plugins share: how summaries name a taint, a selector as a memo key."""

from __future__ import annotations

from collections.abc import Hashable

from api.selectors import LabelSelector
from api.taints import (
    NOT_READY_TAINT,
    UNREACHABLE_TAINT,
)

_SHORT_TAINTS = {NOT_READY_TAINT: "not-ready", UNREACHABLE_TAINT: "unreachable"}


def taint_name(key: str) -> str:
    """How summaries name a taint: the controller's own by their short names."""
    return _SHORT_TAINTS.get(key, key)


def selector_key(selector: LabelSelector) -> Hashable:
    """A label selector as a hashable value (equal selectors, equal keys)."""
    labels = selector.match_labels
    return (
        tuple(sorted(labels.items())) if len(labels) > 1 else tuple(labels.items()),
        tuple([(r.key, r.operator, tuple(r.values)) for r in selector.match_expressions]),
    )
