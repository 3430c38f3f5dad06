"""One kind's rules, compiled (:class:`KindRules`): what its objects' health is, how many
replicas they run and from which pod template, which status fields the hub shows, and
which other objects they use."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from api.interpreter import Aggregate, ResourceInterpreterSpec
from propagator.interpreter.cel import (
    RESULT_MAX,
    Bound,
    CompileError,
    EvaluationError,
    Program,
)
from propagator.interpreter.health import WorkloadHealth
from propagator.interpreter.pointer import read_pointer

DEPENDENCIES_MAX = 256 << 10
"""Largest result of a dependencies rule, as JSON (bytes): a list of objects, kept in
the controller (not in a status), so larger than other rules' results."""


@dataclass(frozen=True)
class Verdict:
    """An object's health and why."""

    health: WorkloadHealth
    message: str = ""


@dataclass(frozen=True)
class Replicas:
    """What an object runs: ``count`` replicas (per node when ``per_node``) of the pod
    template at ``pod_template`` (None: no pods), a cluster's share written at ``field``
    (None: not divided)."""

    count: int
    pod_template: Mapping[str, Any] | None
    field: str | None
    per_node: bool


@dataclass(frozen=True)
class Reflected:
    """A status field the hub shows and how clusters combine it."""

    name: str
    aggregate: Aggregate
    program: Program


@dataclass(frozen=True)
class CanaryFields:
    """Where an object of a kind a canary runs as two copies keeps its replicas, its pod
    template and its pods' selector (JSON pointers)."""

    replicas: str
    template: str
    selector: str | None


class RulesError(ValueError):
    """Rules that do not compile: every expression that failed, by field."""

    def __init__(self, problems: list[tuple[str, CompileError]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{where}: {error}" for where, error in problems))


class RuleFailed(ValueError):
    """A rule whose evaluation failed on an object (it names the rule)."""


class KindRules:
    """The compiled rules of one {group, kind}; each evaluation raises
    :class:`RuleFailed` naming the rule when the object defeats it."""

    def __init__(self, spec: ResourceInterpreterSpec, origin: str) -> None:
        """Compile every expression of ``spec``; raises :class:`RulesError` listing each
        that does not. ``origin``: where the rules come from (``built-in rules`` or
        ``ResourceInterpreter NAME``), said in messages."""
        self.spec, self.origin = spec, origin
        problems: list[tuple[str, CompileError]] = []

        def program(where: str, source: str, want: Any, result_max: int = RESULT_MAX) -> Program:
            try:
                return Program(source, want, result_max)
            except CompileError as exc:
                problems.append((where, exc))
                return _NEVER

        self.checks = [
            (
                program(f"spec.health.checks[{i}].when", c.when, "bool"),
                c.health,
                program(f"spec.health.checks[{i}].message", c.message, "string")
                if c.message
                else None,
            )
            for i, c in enumerate(spec.health.checks if spec.health else ())
        ]
        self.count = (
            program("spec.replicas.count", spec.replicas.count, "int") if spec.replicas else None
        )
        self.reflected = [
            Reflected(f.name, f.aggregate, program(f"spec.status[{i}].value", f.value, "any"))
            for i, f in enumerate(spec.status)
        ]
        self.dependency_list = (
            program(
                "spec.dependencies.objects", spec.dependencies.objects, "list", DEPENDENCIES_MAX
            )
            if spec.dependencies
            else None
        )
        if problems:
            raise RulesError(problems)

    @property
    def judges_health(self) -> bool:
        return self.spec.health is not None

    def health(self, obj: Mapping[str, Any]) -> tuple[Verdict, float]:
        """The object's health by the first check that holds (the ``otherwise`` verdict
        when none does), and the seconds the evaluations took."""
        spent, bound = 0.0, Bound(obj)
        for index, (when, health, message) in enumerate(self.checks):
            outcome = self._run(when, bound, f"health check {index + 1}")
            spent += outcome.seconds
            if outcome.value:
                text = ""
                if message is not None:
                    said = self._run(message, bound, f"health check {index + 1}'s message")
                    spent += said.seconds
                    text = str(said.value)[:512]
                return Verdict(health, text), spent
        otherwise = self.spec.health.otherwise if self.spec.health else "Healthy"
        return Verdict(otherwise), spent

    def replicas(self, obj: Mapping[str, Any]) -> Replicas | None:
        """What the object runs (None: the kind has no replicas rule)."""
        rules = self.spec.replicas
        if rules is None or self.count is None:
            return None
        count = 0 if rules.per_node else int(self._run(self.count, Bound(obj), "replicas").value)
        if count < 0:
            raise RuleFailed(f"{self.origin}: replicas gave {count}, not a count")
        template = None
        if rules.pod_template is not None:
            found = read_pointer(obj, rules.pod_template)
            template = found if isinstance(found, Mapping) else {}
        return Replicas(count, template, rules.field, rules.per_node)

    def reflect(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """The status fields the hub shows; a field whose rule fails is left out."""
        out: dict[str, Any] = {}
        bound = Bound(obj)
        for field in self.reflected:
            try:
                out[field.name] = self._run(field.program, bound, field.name).value
            except RuleFailed:
                continue
        return out

    def dependencies(self, obj: Mapping[str, Any]) -> list[dict[str, str]]:
        """The objects ``obj`` uses, each ``{apiVersion, kind, name, namespace}``
        (namespace: ``obj``'s own when the rule gives none; "" for a cluster-scoped
        one it names so)."""
        if self.dependency_list is None:
            return []
        found = self._run(self.dependency_list, Bound(obj), "dependencies").value
        namespace = str((obj.get("metadata") or {}).get("namespace") or "")
        out = []
        for item in _flat(found):
            if not isinstance(item, Mapping) or not all(
                isinstance(item.get(k), str) and item.get(k) for k in ("apiVersion", "kind", "name")
            ):
                raise RuleFailed(
                    f"{self.origin}: dependencies gave {item!r:.80}, not "
                    "{apiVersion, kind, name[, namespace]}"
                )
            out.append(
                {
                    "apiVersion": item["apiVersion"],
                    "kind": item["kind"],
                    "name": item["name"],
                    "namespace": str(item.get("namespace", namespace)),
                }
            )
        return out

    def _run(self, program: Program, bound: Bound, what: str) -> Any:
        try:
            return program.evaluate(bound)
        except EvaluationError as exc:
            raise RuleFailed(f"{self.origin}: {what} ({program.source!r:.120}): {exc}") from None


def _flat(items: list[Any]) -> list[Any]:
    """``items`` with the lists among them (one level) spliced in."""
    return [i for item in items for i in (item if isinstance(item, list) else [item])]


_NEVER = Program("false", "bool")
"""Stands in for an expression that did not compile while the others are checked."""
