"""Metric analysis of a running canary: each check's PromQL query, rendered per canary
cluster, measured every ``interval`` against its Prometheus server, judged against its
bounds. A step holds once every check has passed on every canary cluster since the step
began; a check that fails more often than its ``failureLimit`` on a cluster fails the step.

The judging is pure; :class:`Analysis` does the I/O (one bounded HTTP query per check and
cluster when due) and keeps the measurements of each application's current step.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
from jinja2 import StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment

from api.common import duration_seconds
from api.rollout import MetricCheck
from propagator.canary.machine import CanaryState, Finding

QUERY_TIMEOUT_S = 5.0
MAX_RESPONSE_BYTES = 1 << 20
MAX_QUERY_BYTES = 16 << 10
_TEMPLATES = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False)


@dataclass(frozen=True)
class CheckVerdict:
    """One measurement: the value (None: none came back) and whether it is within bounds."""

    ok: bool
    message: str
    value: float | None = None


def judge(check: MetricCheck, value: float | None) -> CheckVerdict:
    """Whether ``value`` keeps ``check``'s bounds (no value, or NaN, does not)."""
    if value is None:
        return CheckVerdict(False, "no data")
    if math.isnan(value):
        return CheckVerdict(False, "NaN", value)
    if check.max is not None and value > check.max:
        return CheckVerdict(False, f"{value:g} is above max {check.max:g}", value)
    if check.min is not None and value < check.min:
        return CheckVerdict(False, f"{value:g} is below min {check.min:g}", value)
    return CheckVerdict(True, f"{value:g} within bounds", value)


def query_for(
    check: MetricCheck,
    cluster: str,
    labels: Mapping[str, str],
    state: CanaryState,
    namespace: str,
) -> str:
    """The check's query for ``cluster`` (a sandboxed template: nothing but the names
    given). Raises ValueError naming the check."""
    context = {
        "cluster": {"name": cluster, "labels": dict(labels)},
        "revision": state.canary or "",
        "stableRevision": state.stable or "",
        "namespace": namespace,
    }
    try:
        text = _TEMPLATES.from_string(check.query).render(context)
    except TemplateError as exc:
        raise ValueError(f"query of check {check.name}: {exc}") from None
    if len(text.encode()) > MAX_QUERY_BYTES:
        raise ValueError(f"query of check {check.name}: longer than {MAX_QUERY_BYTES} bytes")
    return text


def value_of(body: Any) -> float | None:
    """The one number of a Prometheus instant query response (None: no series). Raises
    ValueError when the response is an error or holds more than one series."""
    if not isinstance(body, dict) or body.get("status") != "success":
        error = body.get("error") if isinstance(body, dict) else None
        raise ValueError(f"Prometheus: {str(error or 'not a query response')[:300]}")
    data = body.get("data") or {}
    result = data.get("result")
    if data.get("resultType") == "scalar" and isinstance(result, list) and len(result) == 2:
        return float(result[1])
    if data.get("resultType") != "vector" or not isinstance(result, list):
        raise ValueError(f"Prometheus: a {data.get('resultType')} result, not one number")
    if not result:
        return None
    if len(result) > 1:
        raise ValueError(f"the query returned {len(result)} series; it must return one")
    return float(result[0]["value"][1])


@dataclass
class _Record:
    failures: int = 0
    passed: bool = False
    last_at: float | None = None
    last: str = ""


@dataclass
class _Step:
    stage: tuple[Any, ...]
    records: dict[tuple[str, str], _Record] = field(default_factory=dict)


class Analysis:
    """Measures the checks of running canaries (those of the operator's allowed
    addresses only)."""

    def __init__(
        self,
        allowed: Sequence[str],
        *,
        concurrency: int = 20,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """``allowed``: address prefixes the controller may query (empty: none);
        ``transport``: how requests travel (default: the network)."""
        self.allowed = tuple(a.rstrip("/") for a in allowed)
        self._transport = transport
        self._limit = anyio.CapacityLimiter(concurrency)
        self._steps: dict[str, _Step] = {}

    def forget(self, key: str) -> None:
        self._steps.pop(key, None)

    def _step(self, key: str, state: CanaryState) -> _Step:
        stage = (state.canary, state.step, state.step_started_at)
        step = self._steps.get(key)
        if step is None or step.stage != stage:
            step = self._steps[key] = _Step(stage)
        return step

    def allows(self, address: str) -> bool:
        address = address.rstrip("/")
        return any(address == a or address.startswith(a + "/") for a in self.allowed)

    async def measure(
        self,
        key: str,
        namespace: str,
        state: CanaryState,
        checks: Sequence[MetricCheck],
        clusters: Mapping[str, Mapping[str, str]],
        now: float,
    ) -> Finding:
        """Measure what is due (each check on each canary cluster, every ``interval``) and
        say where the step stands. ``clusters``: canary cluster -> its labels."""
        step = self._step(key, state)
        due = [
            (check, cluster)
            for check in checks
            if self.allows(check.address)
            for cluster in sorted(clusters)
            if (r := step.records.get((check.name, cluster))) is None
            or r.last_at is None
            or now - r.last_at >= duration_seconds(check.interval)
        ]
        if due:
            async with (
                httpx.AsyncClient(timeout=QUERY_TIMEOUT_S, transport=self._transport) as client,
                anyio.create_task_group() as tg,
            ):
                for check, cluster in due:
                    tg.start_soon(
                        self._one,
                        client,
                        step,
                        check,
                        cluster,
                        clusters[cluster],
                        state,
                        namespace,
                        now,
                    )
        return self.finding(key, state, checks, clusters)

    def finding(
        self, key: str, state: CanaryState, checks: Sequence[MetricCheck], clusters: Iterable[str]
    ) -> Finding:
        """Where the step stands on ``clusters`` by the measurements taken so far."""
        step = self._step(key, state)
        waiting = []
        names = sorted(clusters)
        for check in checks:
            if not self.allows(check.address):  # the operator's rule: fails at once
                allowed = ", ".join(self.allowed) or "none"
                return Finding(
                    False,
                    f"check {check.name}: {check.address} is not among the Prometheus "
                    f"addresses the controller may query (PROPAGATOR_ANALYSIS_ADDRESSES: "
                    f"{allowed})",
                )
            for cluster in names:
                r = step.records.get((check.name, cluster)) or _Record()
                if r.failures > check.failure_limit:
                    return Finding(
                        False,
                        f"check {check.name} on {cluster}: {r.last} ({r.failures} failed "
                        f"measurement(s), {check.failure_limit} tolerated)",
                    )
                if not r.passed:
                    waiting.append(
                        f"{check.name} on {cluster}" + (f" ({r.last})" if r.last else "")
                    )
        if waiting:
            return Finding(False, None, ", ".join(waiting[:5]) + (" …" if len(waiting) > 5 else ""))
        return Finding(True)

    def next_due(self, key: str, checks: Sequence[MetricCheck], now: float) -> float | None:
        """Seconds until a measurement of ``key``'s current step is due (None: none kept)."""
        step = self._steps.get(key)
        if step is None or not checks:
            return None
        intervals = {c.name: duration_seconds(c.interval) for c in checks}
        ends = [
            r.last_at + intervals[name]
            for (name, _), r in step.records.items()
            if r.last_at is not None and name in intervals
        ]
        return max(0.0, min(ends) - now) if ends else 0.0

    async def _one(
        self,
        client: httpx.AsyncClient,
        step: _Step,
        check: MetricCheck,
        cluster: str,
        labels: Mapping[str, str],
        state: CanaryState,
        namespace: str,
        now: float,
    ) -> None:
        record = step.records.setdefault((check.name, cluster), _Record())
        record.last_at = now
        try:
            query = query_for(check, cluster, labels, state, namespace)
            url = check.address.rstrip("/") + "/api/v1/query"
            async with self._limit, client.stream("GET", url, params={"query": query}) as answer:
                body = bytearray()
                async for chunk in answer.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_RESPONSE_BYTES:
                        raise ValueError(
                            f"Prometheus answered more than {MAX_RESPONSE_BYTES} bytes"
                        )
            outcome = judge(check, value_of(json.loads(body)))
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
            outcome = CheckVerdict(False, f"{type(exc).__name__}: {exc}"[:300])
        record.last = outcome.message
        if outcome.ok:
            record.passed = True
        else:
            record.failures += 1
