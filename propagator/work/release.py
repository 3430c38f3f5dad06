"""Fields an application leaves to the member once an object exists there: which ones
(``spec.memberOwned``, and the replicas of a workload a HorizontalPodAutoscaler scales),
the object Propagator then applies without them, and the hand-over that keeps their
values when Propagator stops applying them.

Server-side apply deletes a field its manager stops applying when no other manager owns
it. So before the first apply without a field Propagator alone owns, the field is applied
once, with the value the member holds, by a manager of its own (``propagator-released``):
it stays, and whoever changes it next (the autoscaler, an operator, ``kubectl``) owns it.
Nothing is copied back afterwards. Ownership is read from ``metadata.managedFields``
(``fieldsV1``: ``f:<field>``, ``k:<merge key JSON>``, ``v:<value>``, ``i:<index>``).
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from api.charts import is_chart_release
from api.memberowned import MemberOwnedField, protected
from propagator.interpreter.pointer import tokens
from propagator.interpreter.registry import Interpreters

RELEASED_MANAGER = "propagator-released"
"""The field manager that holds a released field's value until the member's manager
changes it."""
HPA_KINDS = frozenset(
    {("autoscaling/v2", "HorizontalPodAutoscaler"), ("autoscaling/v1", "HorizontalPodAutoscaler")}
)

GroupKindName = tuple[str, str, str, str]
"""(group, kind, namespace, name): what an autoscaler's scaleTargetRef names."""


def group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def scale_target(hpa: Mapping[str, Any], namespace: str) -> GroupKindName | None:
    """What the autoscaler ``hpa`` scales (its namespace ``namespace`` when it has none)."""
    ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
    kind, name = ref.get("kind"), ref.get("name")
    if not isinstance(kind, str) or not isinstance(name, str):
        return None
    ns = (hpa.get("metadata") or {}).get("namespace") or namespace
    return group_of(str(ref.get("apiVersion") or "")), kind, str(ns), name


def identity(obj: Mapping[str, Any]) -> GroupKindName:
    meta = obj.get("metadata") or {}
    return (
        group_of(str(obj.get("apiVersion") or "")),
        str(obj.get("kind") or ""),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


@dataclass(frozen=True)
class Release:
    """What an application leaves to its members, per object."""

    rules: tuple[MemberOwnedField, ...] = ()
    """``spec.memberOwned``."""
    scale_fields: tuple[tuple[str, str, str], ...] = ()
    """(apiVersion, kind, JSON pointer) of each kind among the objects with a replicas
    field (its interpreter rules' ``replicas.field``)."""
    autoscaled: frozenset[GroupKindName] = field(default_factory=frozenset)
    """The workloads the application's own autoscalers scale (see :meth:`on`)."""

    def on(self, objects: Iterable[Mapping[str, Any]]) -> Release:
        """This release for ``objects`` as one cluster gets them (their namespaces set):
        with the workloads their autoscalers scale."""
        return dataclasses.replace(self, autoscaled=autoscaled(objects, ""))

    def scale_field(self, obj: Mapping[str, Any]) -> str | None:
        """Where ``obj``'s kind keeps its replicas, if it has them."""
        kind = (obj.get("apiVersion"), obj.get("kind"))
        return next((f for a, k, f in self.scale_fields if (a, k) == kind), None)

    def pointers(self, obj: Mapping[str, Any]) -> list[str]:
        """The fields of ``obj`` (as applied: its namespace set) left to the member by
        pointer: the rules', and its replicas when one of the application's autoscalers
        scales it."""
        found = [p for r in self.rules if r.target.matches(obj) for p in r.json_pointers]
        scale = self.scale_field(obj)
        if scale is not None and identity(obj) in self.autoscaled and scale not in found:
            found.append(scale)
        return found

    def managers(self, obj: Mapping[str, Any]) -> frozenset[str]:
        """The member's field managers whose fields of ``obj`` are theirs."""
        return frozenset(m for r in self.rules if r.target.matches(obj) for m in r.managers)

    @property
    def any(self) -> bool:
        return bool(self.rules or self.scale_fields)


def scale_fields(
    objects: Iterable[Mapping[str, Any]],
    interpreters: Interpreters,
    served: Iterable[tuple[str, str]] = (),
) -> tuple[tuple[str, str, str], ...]:
    """(apiVersion, kind, JSON pointer) where each kind among ``objects`` keeps its
    replicas (its replicas rule's ``field``): a cluster's share is written there, and it is
    what an autoscaler scales. With a chart among them (whose objects are known only once
    rendered), every kind of ``served`` (apiVersion, kind) too."""
    found = set()
    kinds = {(str(o.get("apiVersion")), str(o.get("kind"))) for o in objects}
    if any(is_chart_release(o) for o in objects):
        kinds.update(served)
    for api_version, kind in kinds:
        pointer = interpreters.replica_field(api_version, kind)
        if pointer is not None:
            found.add((api_version, kind, pointer))
    return tuple(sorted(found))


def autoscaled(objects: Iterable[Mapping[str, Any]], namespace: str) -> frozenset[GroupKindName]:
    """What the autoscalers among ``objects`` scale (``namespace``: where the namespaced
    ones without a namespace go)."""
    found = set()
    for obj in objects:
        if (obj.get("apiVersion"), obj.get("kind")) in HPA_KINDS:
            target = scale_target(obj, namespace)
            if target is not None:
                found.add(target)
    return frozenset(found)


_MISSING = object()


def read(obj: Any, pointer: str) -> Any:
    """The value at ``pointer`` in ``obj`` (a sentinel when absent: compare with
    :func:`absent`)."""
    here = obj
    for token in tokens(pointer):
        if isinstance(here, dict) and token in here:
            here = here[token]
        elif isinstance(here, list) and token.isdigit() and int(token) < len(here):
            here = here[int(token)]
        else:
            return _MISSING
    return here


def absent(value: Any) -> bool:
    return value is _MISSING


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def without(obj: Mapping[str, Any], pointers: Sequence[str]) -> dict[str, Any]:
    """``obj`` without the fields at ``pointers`` (a copy; ``obj`` itself when there are
    none; absent ones are ignored; protected ones are never removed, whatever asked)."""
    if not pointers:
        return obj if isinstance(obj, dict) else dict(obj)
    out = copy.deepcopy(dict(obj))
    for pointer in pointers:
        path = tokens(pointer)
        if not path or protected(pointer):
            continue
        parent: Any = out
        for token in path[:-1]:
            if isinstance(parent, dict):
                parent = parent.get(token)
            elif isinstance(parent, list) and token.isdigit() and int(token) < len(parent):
                parent = parent[int(token)]
            else:
                parent = None
                break
        last = path[-1]
        if isinstance(parent, dict):
            parent.pop(last, None)
        elif isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
            del parent[int(last)]
    return out


def owned_by(live: Mapping[str, Any], managers: Iterable[str]) -> list[dict[str, Any]]:
    """The ``fieldsV1`` trees of ``live``'s entries by ``managers`` (any operation)."""
    wanted = set(managers)
    trees = []
    for entry in (live.get("metadata") or {}).get("managedFields") or []:
        if isinstance(entry, dict) and entry.get("manager") in wanted:
            tree = entry.get("fieldsV1")
            if isinstance(tree, dict):
                trees.append(tree)
    return trees


KEY_MAX = 1024
"""Longest ``k:``/``v:`` key of a ``fieldsV1`` read (a merge key is a field or two): what
a member sends is not parsed past it."""


def _named(key: str) -> Any:
    """What a ``k:`` or ``v:`` key names (its JSON), or None when it is not readable: too
    long, not JSON, nested past the parser's depth."""
    rest = key[2:]
    if len(rest) > KEY_MAX:
        return None
    try:
        return json.loads(rest)
    except (ValueError, RecursionError):
        return None


def _element(key: str, items: list[Any]) -> int | None:
    """The index in ``items`` of the list element a ``fieldsV1`` key names."""
    kind, _, rest = key.partition(":")
    if kind == "i" and rest.isdigit() and len(rest) < 10:
        index = int(rest)
        return index if index < len(items) else None
    named = _named(key)
    if named is None or kind not in ("k", "v"):
        return None
    for index, item in enumerate(items):
        if kind == "k" and isinstance(named, dict) and isinstance(item, dict):
            if all(item.get(k) == v for k, v in named.items()):
                return index
        elif kind == "v" and item == named:
            return index
    return None


def without_owned(obj: dict[str, Any], tree: Mapping[str, Any], path: str = "") -> None:
    """Remove from ``obj`` (in place) the fields ``tree`` (a ``fieldsV1``) owns, but no
    protected one and no list element's merge key."""
    for key, sub in tree.items():
        if key == "." or not isinstance(sub, dict):
            continue
        if key.startswith("f:") and isinstance(obj, dict):
            name = key[2:]
            here = f"{path}/{_escape(name)}"
            if name not in obj:
                continue
            children = {k: v for k, v in sub.items() if k != "."}
            if not children:
                if not _holds_protected(obj[name], here):
                    del obj[name]
                continue
            if isinstance(obj[name], dict):
                without_owned(obj[name], children, here)
            elif isinstance(obj[name], list):
                _without_owned_items(obj[name], children, here)


def _without_owned_items(items: list[Any], tree: Mapping[str, Any], path: str) -> None:
    for key, sub in tree.items():
        index = _element(key, items) if isinstance(sub, dict) else None
        if index is None:
            continue
        children = {k: v for k, v in sub.items() if k != "."}
        item = items[index]
        named = _named(key)
        if key.startswith("k:") and isinstance(item, dict) and isinstance(named, dict):
            kept = {k: v for k, v in children.items() if k[2:] not in named}
            without_owned(item, kept, f"{path}/{index}")


def _holds_protected(value: Any, path: str) -> bool:
    """Whether ``value`` at ``path`` holds a protected field (a whole labels map)."""
    if protected(path):
        return True
    if isinstance(value, dict):
        return any(_holds_protected(v, f"{path}/{_escape(k)}") for k, v in value.items())
    return False


def handover(
    live: Mapping[str, Any], ours: Sequence[Mapping[str, Any]], pointers: Sequence[str]
) -> dict[str, Any] | None:
    """What :data:`RELEASED_MANAGER` applies so that the fields at ``pointers`` keep
    their values once Propagator (whose ``fieldsV1`` trees are ``ours``) stops applying
    them: each such field Propagator owns, with its live value, within the object's
    identity; None when Propagator owns none of them."""
    body: dict[str, Any] = {}
    for pointer in pointers:
        for tree in ours:
            steps = _owned_steps(live, tree, tokens(pointer))
            if steps is not None:
                _merge(body, _partial(live, steps))
                break
    if not body:
        return None
    meta = live.get("metadata") or {}
    identity_meta = {"name": meta.get("name")}
    if meta.get("namespace"):
        identity_meta["namespace"] = meta["namespace"]
    return {
        **body,
        "apiVersion": live.get("apiVersion"),
        "kind": live.get("kind"),
        "metadata": {**body.get("metadata", {}), **identity_meta},
    }


def _owned_steps(live: Any, tree: Mapping[str, Any], path: Sequence[str]) -> list[str] | None:
    """The ``fieldsV1`` keys leading to the field at ``path`` when ``tree`` owns it (or
    owns a whole value it is in, as an atomic list), else None."""
    steps: list[str] = []
    node: Any = tree
    here = live
    for token in path:
        if not isinstance(node, dict):
            return None  # not a fieldsV1 tree: nothing read from it
        if not {k for k in node if k != "."}:
            return steps if steps else None  # owned whole: an atomic value holds it
        if isinstance(here, dict):
            key = f"f:{token}"
            if key not in node or token not in here:
                return None
            steps.append(key)
            node, here = node[key], here[token]
        elif isinstance(here, list) and token.isdigit() and int(token) < len(here):
            index = int(token)
            match = next((k for k in node if k != "." and _element(k, here) == index), None)
            if match is None:
                return None
            steps.append(match)
            node, here = node[match], here[index]
        else:
            return None
    return steps if isinstance(node, dict) else None


def _partial(live: Any, steps: Sequence[str]) -> Any:
    """The part of ``live`` along ``steps``: the value at their end, within each list
    element's merge keys."""
    if not steps:
        return copy.deepcopy(live)
    key, rest = steps[0], steps[1:]
    if key.startswith("f:"):
        return {key[2:]: _partial(live[key[2:]], rest)}
    index = _element(key, live)
    assert index is not None
    inner = _partial(live[index], rest)
    if key.startswith("k:"):
        named = _named(key)
        return [{**(named if isinstance(named, dict) else {}), **inner}]
    return [inner]


def _merge(into: dict[str, Any], part: Mapping[str, Any]) -> None:
    for key, value in part.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        elif isinstance(value, list) and isinstance(into.get(key), list):
            into[key] = into[key] + value
        else:
            into[key] = value
