"""Every kind's rules in force (:class:`Interpreters`): the built-in ones, with the parts a
platform's ResourceInterpreters on the hub replace.

The one place that says what any object's health, replicas, reflected status and
dependencies are; nothing else special-cases kinds. Rules are compiled when they change,
never while judging. A kind whose rules take longer than the time limit on what a member
holds reads Unknown (with why) and is not evaluated again for a while, so one kind's slow
rules do not slow anything else.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from api.interpreter import Aggregate, ResourceInterpreter, ResourceInterpreterSpec
from propagator.interpreter.builtins import builtin_interpreters
from propagator.interpreter.rules import (
    CanaryFields,
    KindRules,
    Replicas,
    RuleFailed,
    RulesError,
    Verdict,
)

GroupKind = tuple[str, str]

TIME_LIMIT_S = 0.05
"""Longest one object's rules may take (the iteration budget keeps a rule far below this on
any object a member can hold; a rule over it is hostile or broken)."""
PAUSE_S = 60.0
"""How long a kind whose rules went over the time limit is not evaluated (Unknown)."""

PARTS = ("health", "replicas", "status", "dependencies")
REMEMBERED = 65_536
"""Verdicts and reflected fields kept, by object and resourceVersion: a member's object
that has not changed is not evaluated again (a resync judges every application)."""


def group_kind(api_version: str, kind: str) -> GroupKind:
    """(group, kind) of an apiVersion and kind: ``apps/v1`` -> ``apps``, ``v1`` -> ``""``."""
    return (api_version.rpartition("/")[0], kind)


@dataclass(frozen=True)
class Compiled:
    """What came of one hub ResourceInterpreter."""

    target: GroupKind
    error: str | None
    """Why its rules are not used (None: they are)."""


class Interpreters:
    """The rules in force per {group, kind}."""

    def __init__(
        self,
        *,
        time_limit_s: float = TIME_LIMIT_S,
        pause_s: float = PAUSE_S,
        clock: Callable[[], float] = time.monotonic,
        failed: Callable[[str, str], None] = lambda _kind, _reason: None,
    ) -> None:
        """``failed(kind, reason)``: told of each evaluation that failed on an object
        (``error``) and each kind paused for its time (``slow``); kind as ``group/Kind``."""
        self.time_limit_s, self.pause_s, self.clock = time_limit_s, pause_s, clock
        self.failed = failed
        self._builtin = {_target(r.spec): r.spec for r in builtin_interpreters()}
        self._hub: dict[str, ResourceInterpreterSpec] = {}
        """Hub ResourceInterpreters that compiled, by name."""
        self._rules: dict[GroupKind, KindRules] = {}
        self._paused: dict[GroupKind, tuple[float, str]] = {}
        self._verdicts: dict[tuple[str, ...], Verdict] = {}
        self._reflected: dict[tuple[str, ...], tuple[dict[str, Any], dict[str, Aggregate]]] = {}
        self.generation = 0
        """Goes up at every change of the rules in force."""
        for target in self._builtin:
            self._rebuild(target)

    # -- the rules in force -----------------------------------------------------------

    def set(self, obj: Mapping[str, Any]) -> Compiled:
        """Compile a hub ResourceInterpreter (its object) and use it when it compiles;
        when it does not, its kind keeps (or returns to) the built-in rules."""
        name = str((obj.get("metadata") or {}).get("name"))
        try:
            resource = ResourceInterpreter.model_validate(
                {k: obj[k] for k in ("metadata", "spec") if k in obj}
            )
        except ValueError as exc:
            self.remove(name)
            return Compiled(("", ""), f"invalid: {str(exc)[:500]}")
        target = _target(resource.spec)
        try:
            rules = KindRules(self._merged(target, resource.spec), f"ResourceInterpreter {name}")
        except RulesError as exc:
            self.remove(name)
            return Compiled(target, str(exc))
        self._hub[name] = resource.spec
        self._install(target, rules)
        return Compiled(target, None)

    def remove(self, name: str) -> None:
        """A hub ResourceInterpreter is gone (or no longer compiles): its kind returns to
        the built-in rules, if any."""
        spec = self._hub.pop(name, None)
        if spec is not None:
            self._rebuild(_target(spec))

    def _merged(
        self, target: GroupKind, hub: ResourceInterpreterSpec | None
    ) -> ResourceInterpreterSpec:
        builtin = self._builtin.get(target)
        if hub is None:
            assert builtin is not None
            return builtin
        if builtin is None:
            return hub
        given = hub.model_fields_set
        return builtin.model_copy(update={p: getattr(hub, p) for p in PARTS if p in given})

    def _rebuild(self, target: GroupKind) -> None:
        """The kind's rules again after a hub ResourceInterpreter of it went away."""
        if target in self._builtin:
            self._install(target, KindRules(self._builtin[target], "built-in rules"))
        else:
            self._install(target, None)

    def _install(self, target: GroupKind, rules: KindRules | None) -> None:
        self._paused.pop(target, None)
        self._verdicts.clear()
        self._reflected.clear()
        self.generation += 1
        if rules is None:
            self._rules.pop(target, None)
        else:
            self._rules[target] = rules

    def rules_for(self, api_version: str, kind: str) -> KindRules | None:
        return self._rules.get(group_kind(api_version, kind))

    def interprets(self, api_version: str, kind: str) -> bool:
        """Whether objects of the kind have health or status rules (their changes on a
        member matter to the application's status)."""
        rules = self.rules_for(api_version, kind)
        return rules is not None and (rules.judges_health or bool(rules.reflected))

    # -- what the rules say of one object ---------------------------------------------

    def verdict(self, obj: Mapping[str, Any] | None) -> Verdict:
        """The health of one live object (None: it is not there yet; being deleted: it
        is going away, whatever its status still says)."""
        if obj is None:
            return Verdict("Progressing", "not created yet")
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            return Verdict("Progressing", "being deleted")
        target = group_kind(str(obj.get("apiVersion")), str(obj.get("kind")))
        rules = self._rules.get(target)
        if rules is None or not rules.judges_health:
            return Verdict("Healthy", f"no health rule for {_name(target)}: healthy once applied")
        paused = self._pause_of(target)
        if paused is not None:
            return Verdict("Unknown", paused)
        key = _version_key(obj)
        if key is not None and (known := self._verdicts.get(key)) is not None:
            return known
        try:
            verdict, spent = rules.health(obj)
        except RuleFailed as exc:
            verdict, spent = Verdict("Unknown", str(exc)), 0.0
            self.failed(_label(target), "error")
        if spent > self.time_limit_s:
            return Verdict("Unknown", self._pause(target, rules, spent))
        if key is not None:
            _remember(self._verdicts, key, verdict)
        return verdict

    def reflect(self, obj: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Aggregate]]:
        """The status fields the rules show of ``obj`` (none while its kind is paused),
        and how those that combine across clusters do."""
        target = group_kind(str(obj.get("apiVersion")), str(obj.get("kind")))
        rules = self._rules.get(target)
        if rules is None or not rules.reflected or self._pause_of(target) is not None:
            return {}, {}
        key = _version_key(obj)
        if key is not None and (known := self._reflected.get(key)) is not None:
            return known
        started = time.thread_time()  # (processor time, as Program.evaluate measures)
        fields = rules.reflect(obj)
        spent = time.thread_time() - started
        if spent > self.time_limit_s:
            self._pause(target, rules, spent)
            return {}, {}
        aggregates: dict[str, Aggregate] = {
            f.name: f.aggregate for f in rules.reflected if f.aggregate != "None"
        }
        if key is not None:
            _remember(self._reflected, key, (fields, aggregates))
        return fields, aggregates

    def replicas(self, obj: Mapping[str, Any]) -> Replicas | None:
        """What ``obj`` runs (None: its kind runs no pods); raises :class:`RuleFailed`."""
        rules = self.rules_for(str(obj.get("apiVersion")), str(obj.get("kind")))
        return rules.replicas(obj) if rules is not None else None

    def replica_field(self, api_version: str, kind: str) -> str | None:
        """Where a cluster's share of the kind's replicas is written (None: not divided)."""
        rules = self.rules_for(api_version, kind)
        spec = rules.spec.replicas if rules is not None else None
        return spec.field if spec is not None and not spec.per_node else None

    def divides(self, api_version: str, kind: str) -> bool:
        """Whether the kind's replicas are spread (divided across clusters, or per node)."""
        rules = self.rules_for(api_version, kind)
        spec = rules.spec.replicas if rules is not None else None
        return spec is not None and (spec.field is not None or spec.per_node)

    def canary_fields(self, api_version: str, kind: str) -> CanaryFields | None:
        """Where a canary copy of the kind is sized, labelled and narrowed (None: a canary
        does not run the kind as two copies)."""
        rules = self.rules_for(api_version, kind)
        spec = rules.spec.replicas if rules is not None else None
        if spec is None or not spec.canary_copies or spec.field is None:
            return None
        return CanaryFields(spec.field, spec.pod_template or "", spec.selector)

    def dependencies(self, obj: Mapping[str, Any]) -> list[dict[str, str]]:
        """The objects ``obj`` uses; raises :class:`RuleFailed`."""
        rules = self.rules_for(str(obj.get("apiVersion")), str(obj.get("kind")))
        return rules.dependencies(obj) if rules is not None else []

    def _pause_of(self, target: GroupKind) -> str | None:
        paused = self._paused.get(target)
        if paused is None:
            return None
        until, why = paused
        if self.clock() >= until:
            del self._paused[target]
            return None
        return why

    def _pause(self, target: GroupKind, rules: KindRules, spent: float) -> str:
        why = (
            f"{rules.origin}: took {spent * 1000:.0f} ms on one object, over the limit of "
            f"{self.time_limit_s * 1000:.0f} ms; {_name(target)} is not judged for "
            f"{self.pause_s:.0f} s"
        )
        self._paused[target] = (self.clock() + self.pause_s, why)
        self.failed(_label(target), "slow")
        return why


def _version_key(obj: Mapping[str, Any]) -> tuple[str, ...] | None:
    """An object at one version (None: it has no resourceVersion, as a manifest)."""
    meta = obj.get("metadata") or {}
    version = meta.get("resourceVersion")
    if not isinstance(version, str) or not version:
        return None
    return (
        str(obj.get("apiVersion")),
        str(obj.get("kind")),
        str(meta.get("namespace") or ""),
        str(meta.get("name")),
        str(meta.get("uid") or ""),
        version,
    )


def _remember(memo: dict[tuple[str, ...], Any], key: tuple[str, ...], value: Any) -> None:
    if len(memo) >= REMEMBERED:
        del memo[next(iter(memo))]  # the oldest
    memo[key] = value


def _target(spec: ResourceInterpreterSpec) -> GroupKind:
    return (spec.target.group, spec.target.kind)


def _label(target: GroupKind) -> str:
    return f"{target[0] or 'core'}/{target[1]}"


def _name(target: GroupKind) -> str:
    return f"{target[1]}.{target[0]}" if target[0] else target[1]


@cache
def builtin_rules() -> Interpreters:
    """The built-in rules alone (for what runs without a hub: ``propagator schedule``,
    the pure parts' defaults); one instance, never changed."""
    return Interpreters()


__all__ = ["Interpreters", "Replicas", "RuleFailed", "Verdict", "builtin_rules", "group_kind"]
