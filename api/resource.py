"""What makes a model a custom resource: its CRD names, scope and printer columns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from api.common import GROUP
from api.model import Rule


@dataclass(frozen=True)
class PrinterColumn:
    """A column of ``kubectl get``."""

    name: str
    json_path: str
    type: Literal["string", "integer", "number", "boolean", "date"] = "string"
    description: str = ""
    priority: int = 0  # 1: shown only with -o wide

    def as_crd(self) -> dict[str, Any]:
        column: dict[str, Any] = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        if self.description:
            column["description"] = self.description
        if self.priority:
            column["priority"] = self.priority
        return column


AGE = PrinterColumn("Age", ".metadata.creationTimestamp", "date")


@dataclass(frozen=True)
class CrdInfo:
    """Names and presentation of one custom resource definition."""

    kind: str
    plural: str
    short_names: tuple[str, ...]
    scope: Literal["Cluster", "Namespaced"]
    columns: tuple[PrinterColumn, ...] = field(default=())
    categories: tuple[str, ...] = ("propagator",)
    rules: tuple[Rule, ...] = ()
    """Rules over the whole object (they may read ``self.metadata.name``)."""

    @property
    def name(self) -> str:
        return f"{self.plural}.{GROUP}"


class Resource(BaseModel):
    """A whole custom resource object: apiVersion, kind, metadata, spec and status."""

    crd: ClassVar[CrdInfo]

    api_version: Literal["propagator.io/v1alpha1"] = Field(
        default="propagator.io/v1alpha1", alias="apiVersion"
    )
    kind: str
    metadata: dict[str, Any] = Field(default_factory=dict)
