"""Types shared by the resources: conditions, names, durations, quantities, references."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    StrictInt,
    StrictStr,
)
from pydantic_core import core_schema

from api.model import KubeModel, Rule
from api.quantity import QuantityError, parse_quantity

GROUP = "propagator.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
"""A DNS label of at most 63 characters, to ``fullmatch`` (a namespace's name)."""
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"


@dataclass(frozen=True)
class StringRule:
    """``Annotated`` metadata: a string checked by one regular expression, with one readable
    message for pydantic and the API server alike (a bare ``pattern`` shows only the regex)."""

    pattern: str
    message: str
    max_length: int

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        compiled = re.compile(self.pattern)

        def check(value: str) -> str:
            if not compiled.match(value):
                raise ValueError(f"{value!r}: {self.message}")
            return value

        return core_schema.no_info_after_validator_function(
            check, core_schema.str_schema(min_length=1, max_length=self.max_length)
        )

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> dict[str, Any]:
        out = handler(schema)
        out["x-kubernetes-validations"] = [
            # A raw CEL string: the pattern's backslashes are not CEL escapes.
            {"rule": f"self.matches(r'{self.pattern}')", "message": self.message}
        ]
        return out


DnsLabel = Annotated[
    str,
    StringRule(
        DNS_LABEL_PATTERN,
        "must be a DNS label: at most 63 lower-case letters, digits or '-', "
        "starting and ending with a letter or digit",
        63,
    ),
]
"""A DNS label (RFC 1123), e.g. ``edge`` or ``high-performance``."""
# Names fill long lists (a fleet of 10,000 clusters): a plain pattern costs the API server
# nothing per item, where a CEL rule would blow the schema's cost budget.
ObjectName = Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)]
"""A Kubernetes object name (DNS subdomain): lower-case letters, digits, '-' and '.'."""
Duration = Annotated[
    str, StringRule(DURATION_PATTERN, "must be a duration such as 30s, 5m, 1h30m or 500ms", 32)
]
"""A Go-style duration: 30s, 5m, 1h30m, 500ms."""

_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration_rule(field: str, attr: str, most: str, least: str | None = None) -> Rule:
    """A rule (CEL on the hub, its Python twin offline) that keeps the Duration ``field``
    (JSON name; ``attr`` in Python) at most ``most`` and at least ``least``; unset passes."""
    bounds = [f"duration(self.{field}) <= duration('{most}')"]
    words = f"at most {most}"
    if least is not None:
        bounds.insert(0, f"duration(self.{field}) >= duration('{least}')")
        words = f"between {least} and {most}"
    low, high = duration_seconds(least or "0s"), duration_seconds(most)

    def check(model: Any) -> bool:
        value = getattr(model, attr)
        return value is None or low <= duration_seconds(value) <= high

    return Rule(
        cel=f"!has(self.{field}) || ({' && '.join(bounds)})",
        message=f"{field} must be {words}",
        check=check,
        field_path=f".{field}",
    )


def duration_seconds(text: str) -> float:
    """Seconds in a Duration such as ``1h30m`` (raises ValueError when it is not one)."""
    if not re.fullmatch(DURATION_PATTERN, text):
        raise ValueError(f"{text!r} is not a duration such as 30s, 5m, 1h30m or 500ms")
    return sum(
        float(number) * _DURATION_UNITS[unit]
        for number, unit in re.findall(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)", text)
    )


_QUANTITY_CEL = (
    "type(self) == int ? self >= 0 : "
    "(isQuantity(string(self)) && !quantity(string(self)).isLessThan(quantity('0')))"
)


def _check_quantity(value: str | int) -> str | int:
    # The hub's CEL reads the string with ParseQuantity, which does not trim (a ResourceQuota,
    # read from JSON, would): both validators refuse the same objects.
    if isinstance(value, str) and len(value) > 64:
        raise ValueError(f"{value[:20]!r}... has {len(value)} characters: at most 64")
    if isinstance(value, str) and value != value.strip():
        raise ValueError(f"{value!r} has white space around it: limits are written without")
    try:
        parsed = parse_quantity(value)
    except QuantityError as exc:
        raise ValueError(str(exc)) from exc
    if parsed < 0:
        raise ValueError(f"{value!r} is negative: limits must be zero or more")
    return value


Quantity = Annotated[
    StrictStr | StrictInt,  # true is not a quantity (lax mode would read it as 1)
    AfterValidator(_check_quantity),
    Field(
        json_schema_extra={
            "x-kubernetes-int-or-string": True,
            "maxLength": 64,
            "x-kubernetes-validations": [
                {
                    "rule": _QUANTITY_CEL,
                    "message": "must be a non-negative quantity such as 500m, 2Gi or 10",
                }
            ],
        }
    ),
]
"""A non-negative Kubernetes quantity: ``500m``, ``2Gi``, ``10``."""

ResourceList = Annotated[dict[str, Quantity], Field(max_length=32)]
"""Limits by resource name (``cpu``, ``memory``, ``pods``, ``count/deployments.apps``...)."""

ObservedQuantity = Annotated[
    str | int, Field(json_schema_extra={"x-kubernetes-int-or-string": True})
]
"""A quantity written by the controller into a status (not validated again)."""
ObservedResources = dict[str, ObservedQuantity]
"""Quantities by resource name, as observed or computed by the controller."""


class Condition(KubeModel):
    """The standard ``metav1.Condition``."""

    type: str = Field(max_length=316)
    """Type of condition in CamelCase, e.g. Ready."""
    status: Literal["True", "False", "Unknown"]
    """True, False or Unknown."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The .metadata.generation the condition was set from."""
    last_transition_time: str = Field(json_schema_extra={"format": "date-time"})
    """When the status last changed."""
    reason: str = Field(max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    """Programmatic identifier of the last transition, in CamelCase."""
    message: str = Field(default="", max_length=32768)
    """Human-readable details about the last transition."""


CONDITIONS_SCHEMA_EXTRA: dict[str, Any] = {
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
}


def conditions_field() -> Any:
    """The ``status.conditions`` field, keyed by ``type`` like every Kubernetes API."""
    return Field(default_factory=list, json_schema_extra=CONDITIONS_SCHEMA_EXTRA)


class SecretKeyRef(KubeModel):
    """A key of a Secret on the hub."""

    namespace: ObjectName
    """Namespace of the Secret."""
    name: ObjectName
    """Name of the Secret."""
    key: str = Field(default="kubeconfig", min_length=1, max_length=253)
    """Key in the Secret's data that holds the value."""
