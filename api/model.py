"""The base of every API model: camelCase on the wire, unknown fields refused, and
validation rules declared once for both sides.

A :class:`Rule` is one cross-field rule with two evaluators that must agree: a CEL
expression that the hub API server runs (it lands in the CRD as ``x-kubernetes-validations``)
and a Python predicate that pydantic runs when the same object is read offline (e.g.
``propagator schedule -f ap.yaml``). Both report the same message.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel


@dataclass(frozen=True)
class Rule:
    """A validation rule: ``cel`` for the API server, ``check`` for Python, one message."""

    cel: str
    message: str
    check: Callable[[Any], bool]
    field_path: str | None = None
    message_expression: str | None = None
    """CEL, the message the API server gives (naming the value); ``message`` otherwise."""

    def as_cel(self) -> dict[str, str]:
        rule = {"rule": self.cel, "message": self.message}
        if self.message_expression:
            rule["messageExpression"] = self.message_expression
        if self.field_path:
            rule["fieldPath"] = self.field_path
        return rule


def exactly_one(first: str, second: str, message: str | None = None) -> Rule:
    """A rule that exactly one of two optional fields (Python names) is set."""
    a, b = to_camel(first), to_camel(second)
    return Rule(
        cel=f"has(self.{a}) != has(self.{b})",
        message=message or f"give exactly one of {a} or {b}",
        check=lambda m: (getattr(m, first) is None) != (getattr(m, second) is None),
    )


def _add_rules(schema: dict[str, Any], cls: type) -> None:
    rules: tuple[Rule, ...] = cls.__dict__.get("rules", ())
    if rules:
        schema["x-kubernetes-validations"] = [r.as_cel() for r in rules]


@functools.cache
def _unique_lists(cls: type[BaseModel]) -> tuple[tuple[str, str, tuple[str, ...], str], ...]:
    """The fields of ``cls`` declared as sets or maps: (name, list type, map keys, wire
    name), read once per class (validation runs on every reconcile)."""
    found = []
    for name, info in cls.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        kind = extra.get("x-kubernetes-list-type")
        if kind in ("set", "map"):
            keys = tuple(cast(list[str], extra.get("x-kubernetes-list-map-keys") or []))
            found.append((name, kind, keys, info.alias or name))
    return tuple(found)


@functools.cache
def _attribute(cls: type[BaseModel], wire_name: str) -> str:
    """The Python name of the field of ``cls`` called ``wire_name`` on the wire."""
    return next(
        (name for name, info in cls.model_fields.items() if (info.alias or name) == wire_name),
        wire_name,
    )


def _map_key(item: Any, keys: tuple[str, ...]) -> tuple[Any, ...]:
    if isinstance(item, BaseModel):
        cls = type(item)
        return tuple(getattr(item, _attribute(cls, k), None) for k in keys)
    return tuple(item.get(k) for k in keys)


def _check_unique_lists(model: BaseModel) -> None:
    """Lists declared as sets (``x-kubernetes-list-type: set``) or maps (keyed by
    ``x-kubernetes-list-map-keys``) refuse duplicates offline, as the API server does."""
    for name, kind, keys, wire_name in _unique_lists(type(model)):
        items = getattr(model, name)
        if not items:
            continue
        seen: set[Any] = set()
        for item in items:
            key: Any = item if kind == "set" else _map_key(item, keys)
            if key in seen:
                shown = key if kind == "set" else dict(zip(keys, key, strict=True))
                raise ValueError(f"{wire_name}: {shown!r} is listed twice; each may appear once")
            seen.add(key)


class KubeModel(BaseModel):
    """A part of a custom resource. Fields are snake_case in Python, camelCase in YAML."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_attribute_docstrings=True,
        json_schema_extra=_add_rules,
    )
    rules: ClassVar[tuple[Rule, ...]] = ()

    @model_validator(mode="after")
    def _check_rules(self) -> KubeModel:
        for rule in type(self).__dict__.get("rules", ()):
            if not rule.check(self):
                where = f"{rule.field_path.lstrip('.')}: " if rule.field_path else ""
                raise ValueError(f"{where}{rule.message}")
        _check_unique_lists(self)
        return self
