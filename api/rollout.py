"""How an application rolls out: concurrency, retries, timeouts, and canary steps."""

from __future__ import annotations

import itertools

from pydantic import Field

from api.common import Duration, duration_rule, duration_seconds
from api.model import KubeModel, Rule
from api.selectors import LabelSelector

MAX_CONCURRENCY_CEILING = 500
"""The largest ``rollout.maxConcurrency`` (and controller-wide cap) Propagator accepts."""
MAX_RETRY_ATTEMPTS = 20
DEFAULT_RETRY_ATTEMPTS = 3
"""Retries of a retryable failure on one cluster where neither ``rollout.retry.attempts``
nor the controller's PROPAGATOR_RETRY_ATTEMPTS says otherwise (defined here only)."""
DEFAULT_RETRY_BACKOFF_S = 1.0
"""The first wait before a retry, doubling with jitter, by default."""
DEFAULT_RETRY_MAX_BACKOFF_S = 30.0
"""The longest wait between two retries, by default."""
MAX_BACKOFF = "10m"
"""The longest first wait before a retry an application may ask for."""
MAX_MAX_BACKOFF = "1h"
"""The longest wait between two retries an application may ask for."""
MAX_PAUSE = "24h"
"""The longest pause of a canary step."""


class Retry(KubeModel):
    """Retries of retryable failures (timeouts, connection errors, 429, 5xx)."""

    attempts: int | None = Field(default=None, ge=0, le=MAX_RETRY_ATTEMPTS)
    """Retries after the first try; 0 disables retrying (unset: the controller's
    PROPAGATOR_RETRY_ATTEMPTS, default 3)."""
    backoff: Duration | None = None
    """Wait before the first retry; doubles each time, with jitter (unset: the controller's
    PROPAGATOR_RETRY_BACKOFF_S, default 1s)."""
    max_backoff: Duration | None = None
    """Upper bound of the wait between retries (unset: PROPAGATOR_RETRY_MAX_BACKOFF_S,
    default 30s)."""

    rules = (
        duration_rule("backoff", "backoff", MAX_BACKOFF),
        duration_rule("maxBackoff", "max_backoff", MAX_MAX_BACKOFF),
        Rule(
            cel="!has(self.backoff) || !has(self.maxBackoff) || "
            "duration(self.backoff) <= duration(self.maxBackoff)",
            message="backoff must not exceed maxBackoff",
            check=lambda r: (
                r.backoff is None
                or r.max_backoff is None
                or duration_seconds(r.backoff) <= duration_seconds(r.max_backoff)
            ),
        ),
    )


class Rollout(KubeModel):
    """Per-application knobs, bounded by the controller-wide caps."""

    max_concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY_CEILING)
    """Member clusters written at once (1 to 500; never above the controller's cap)."""
    retry: Retry = Field(default_factory=Retry)
    """Retries of retryable failures."""
    timeout_seconds: int | None = Field(default=None, ge=1, le=3600)
    """Time allowed for one cluster's apply, per attempt (unset: the controller's
    PROPAGATOR_CLUSTER_TIMEOUT_S, default 30)."""
    max_failures: int | None = Field(default=None, ge=0)
    """Failed clusters tolerated in one pass; once more have failed, clusters not yet
    started are not tried (unset: never stop early)."""


MAX_PROGRESS_DEADLINE_SECONDS = 86_400
CANARY_ACTION_ANNOTATION = "propagator.io/canary-action"
"""``promote``, ``abort`` or ``retry``, optionally followed by ``/`` and anything (a time,
a nonce): each distinct value is acted on once. promote opens a manual step's gate (the
next step starts) and otherwise skips the remaining steps; abort rolls the canary back;
retry runs a rolled-back or aborted revision's steps again."""
CANARY_ACTIONS = ("promote", "abort", "retry")
TRACK_LABEL = "propagator.io/track"
"""On the pods of an application with a canary: ``stable`` or ``canary``."""


class CanaryStep(KubeModel):
    """One step: the canary copy's share of replicas (and traffic), then a pause."""

    weight: int = Field(ge=0, le=100)
    """Percentage of replicas (so of traffic) on the canary copy, 0 to 100."""
    pause: Duration | None = None
    """How long to hold this step once the canary copy is healthy (unset: go on at once)."""
    manual: bool = False
    """A gate: once the canary copy is healthy (and the pause is over), hold until
    ``promote`` opens it."""

    rules = (duration_rule("pause", "pause", MAX_PAUSE),)


MAX_QUERY_LENGTH = 4096
MAX_FAILURE_LIMIT = 100
MIN_INTERVAL = "5s"
MAX_INTERVAL = "1h"


class MetricCheck(KubeModel):
    """A Prometheus query each canary cluster's result must stay within while a step runs."""

    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    """Names the check in the status and in a rollback's reason (a DNS label)."""
    address: str = Field(min_length=1, max_length=2048, pattern=r"^https?://[^/@\s]+(/[^\s]*)?$")
    """The Prometheus server, e.g. http://prometheus.monitoring:9090 (http or https, no
    credentials in it; the controller only queries addresses its operator allows:
    PROPAGATOR_ANALYSIS_ADDRESSES)."""
    query: str = Field(min_length=1, max_length=MAX_QUERY_LENGTH)
    """PromQL returning one number per cluster; may use {{ cluster.name }}, {{ cluster.labels
    }}, {{ revision }} (the canary's), {{ stableRevision }} and {{ namespace }}."""
    max: float | None = None
    """The result must be at most this."""
    min: float | None = None
    """The result must be at least this."""
    interval: Duration = "30s"
    """How often it is measured on each canary cluster (5s to 1h)."""
    failure_limit: int = Field(default=0, ge=0, le=MAX_FAILURE_LIMIT)
    """Failed measurements (out of bounds, no data, an error) tolerated per cluster and
    step; one more rolls the canary back."""

    rules = (
        duration_rule("interval", "interval", MAX_INTERVAL, MIN_INTERVAL),
        Rule(
            cel="has(self.max) || has(self.min)",
            message="a metric check needs max, min or both",
            check=lambda m: m.max is not None or m.min is not None,
        ),
        Rule(
            cel="!has(self.max) || !has(self.min) || self.min <= self.max",
            message="min must not exceed max",
            check=lambda m: m.max is None or m.min is None or m.min <= m.max,
        ),
    )


class CanaryAnalysis(KubeModel):
    """What makes a canary fail (and roll back by itself)."""

    progress_deadline_seconds: int = Field(default=600, ge=1, le=MAX_PROGRESS_DEADLINE_SECONDS)
    """A step whose canary copy is not healthy on every canary cluster this long after its
    weight was set fails (1 to 86400; default 600)."""
    metrics: list[MetricCheck] = Field(
        default_factory=list,
        max_length=10,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """Checks that must hold on every canary cluster: a step passes only once each has
    been measured within bounds there since the step began."""


class Canary(KubeModel):
    """Roll new versions out as a canary: a stable and a canary copy behind one Service."""

    cluster_selector: LabelSelector | None = None
    """Canary clusters, which go first (default: every placed cluster)."""
    steps: list[CanaryStep] = Field(min_length=1, max_length=20)
    """Steps with strictly increasing weights."""
    analysis: CanaryAnalysis = Field(default_factory=CanaryAnalysis)
    """When a step fails."""

    rules = (
        Rule(
            cel="self.steps.map(s, s.weight).isSorted() && "
            "self.steps.all(s, self.steps.filter(t, t.weight == s.weight).size() == 1)",
            message="step weights must be strictly increasing",
            check=lambda c: all(a.weight < b.weight for a, b in itertools.pairwise(c.steps)),
            field_path=".steps",
        ),
    )
