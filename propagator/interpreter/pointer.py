"""JSON pointers (RFC 6901) into an object: where a rule's replicas are read and written."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def tokens(pointer: str) -> list[str]:
    """The reference tokens of ``pointer``, unescaped (``~1`` is ``/``, ``~0`` is ``~``)."""
    if not pointer:
        return []
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def read_pointer(obj: Any, pointer: str) -> Any:
    """The value at ``pointer`` in ``obj`` (``""``: ``obj`` itself), or None when a step
    is missing or is not an object."""
    node = obj
    for token in tokens(pointer):
        if not isinstance(node, Mapping):
            return None
        node = node.get(token)
    return node


def write_pointer(obj: dict[str, Any], pointer: str, value: Any) -> bool:
    """Set ``value`` at ``pointer`` in ``obj``, making the objects on the way; False (and
    ``obj`` unchanged) when a step on the way holds something that is not an object."""
    steps = tokens(pointer)
    if not steps:
        return False
    node: Any = obj
    for token in steps[:-1]:
        child = node.get(token)
        if child is None:
            child = node[token] = {}
        elif not isinstance(child, dict):
            return False
        node = child
    node[steps[-1]] = value
    return True
