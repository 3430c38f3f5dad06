"""How an application rolls out: concurrency, retries, timeouts, and canary steps."""

from __future__ import annotations

import itertools
import re
from typing import Annotated

from pydantic import AfterValidator, Field, StrictInt, StrictStr

from api.common import Duration, ObjectName, duration_rule, duration_seconds
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


MAX_WAVES = 20
"""Wave groups an application may define (``size`` makes as many waves as the placed
clusters need, at most one per cluster)."""
MAX_GROUP_CLUSTERS = 100
"""Clusters one wave group may name (more are picked by a selector)."""
MAX_WAVE_CLUSTERS = 1000
"""The largest number of clusters a wave size or tolerance may give."""
MAX_WAVE_TIME = "24h"
"""The longest progress deadline or minimum healthy time of a wave."""
MIN_PROGRESS_DEADLINE = "10s"
DEFAULT_HISTORY = 10
MAX_HISTORY = 50
ROLLOUT_ACTION_ANNOTATION = "propagator.io/rollout-action"
"""``pause``, ``resume``, ``promote``, ``promote-all`` or ``undo`` (``undo:N`` for
revision N), optionally followed by ``/`` and anything (a time, a nonce): each distinct
value is acted on once (``kubectl propagator rollout``)."""
ROLLOUT_ACTIONS = ("pause", "resume", "promote", "promote-all", "undo")
_PERCENT = re.compile(r"^(100|[1-9]?[0-9])%$")


def _check_count(value: int | str) -> int | str:
    if isinstance(value, int):
        if not 0 <= value <= MAX_WAVE_CLUSTERS:
            raise ValueError(f"{value} is not between 0 and {MAX_WAVE_CLUSTERS}")
        return value
    if not _PERCENT.match(value):
        shown = value if len(value) <= 20 else value[:20] + "…"
        raise ValueError(f"{shown!r} is neither a number of clusters nor a percentage 0% to 100%")
    return value


ClusterCount = Annotated[
    StrictInt | StrictStr,
    AfterValidator(_check_count),
    Field(
        json_schema_extra={
            "x-kubernetes-int-or-string": True,
            "maxLength": 4,
            "x-kubernetes-validations": [
                {
                    "rule": f"type(self) == int ? self >= 0 && self <= {MAX_WAVE_CLUSTERS} : "
                    "self.matches('^(100|[1-9]?[0-9])%$')",
                    "message": f"must be a number of clusters (0 to {MAX_WAVE_CLUSTERS}) or a "
                    "percentage such as 25%",
                }
            ],
        }
    ),
]
"""A number of clusters (``2``) or a percentage of them (``25%``)."""


def count_of(value: int | str, total: int, *, at_least_one: bool = False) -> int:
    """How many of ``total`` clusters ``value`` (a number or a percentage) means: a
    percentage rounds down (up, and at least 1, with ``at_least_one``: a wave size)."""
    if isinstance(value, int):
        number = value
    else:
        percent = int(value[:-1])
        number = (total * percent + 99) // 100 if at_least_one else total * percent // 100
    return max(number, 1) if at_least_one else number


class WaveGroup(KubeModel):
    """One wave: the clusters it names and those its selector picks (a cluster in two
    groups goes with the first)."""

    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    """Names the wave in the status, Events and metrics (a DNS label)."""
    clusters: list[ObjectName] = Field(default_factory=list, max_length=MAX_GROUP_CLUSTERS)
    """MemberCluster names."""
    cluster_selector: LabelSelector | None = None
    """Clusters whose labels match."""
    manual: bool = False
    """A gate: the wave waits for ``kubectl propagator rollout promote`` before it starts."""

    rules = (
        Rule(
            cel="(has(self.clusters) && size(self.clusters) > 0) || has(self.clusterSelector)",
            message="a wave group names clusters, a clusterSelector or both",
            check=lambda g: bool(g.clusters) or g.cluster_selector is not None,
        ),
    )


class Waves(KubeModel):
    """Roll each new revision out wave by wave: a wave starts once the one before has been
    healthy (by the health rules of every kind it holds) for ``minHealthyTime``; a wave
    not healthy within ``progressDeadline`` halts the rollout, and the clusters of later
    waves keep the revision they run."""

    groups: list[WaveGroup] = Field(
        default_factory=list,
        max_length=MAX_WAVES,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """Waves in order, by cluster names or labels; placed clusters no group picks form a
    last wave of their own."""
    size: ClusterCount | None = None
    """Instead of groups: clusters per wave, a number or a percentage of the placed
    clusters (rounded up), in the order of their names."""
    min_healthy_time: Duration = "30s"
    """How long a wave's clusters stay healthy before the next wave starts (0s to 24h)."""
    progress_deadline: Duration = "10m"
    """How long a wave may take to become healthy before the rollout halts (10s to 24h)."""
    max_unhealthy: ClusterCount = 0
    """Clusters of a wave (a number or a percentage, rounded down) that may stay unhealthy
    or failed while the wave still passes."""

    rules = (
        Rule(
            cel="(has(self.groups) && size(self.groups) > 0) != has(self.size)",
            message="give either groups or size",
            check=lambda w: bool(w.groups) != (w.size is not None),
        ),
        Rule(
            cel="!has(self.groups) || self.groups.all(g, !has(g.clusters) || "
            "self.groups.all(h, g.name == h.name || !has(h.clusters) || "
            "g.clusters.all(c, !(c in h.clusters))))",
            message="a cluster is named in two wave groups; name each in one",
            check=lambda w: all(
                not (set(g.clusters) & set(h.clusters))
                for g, h in itertools.combinations(w.groups, 2)
            ),
            field_path=".groups",
        ),
        Rule(
            cel="!has(self.size) || (type(self.size) == int ? self.size >= 1 : self.size != '0%')",
            message="size must be at least 1 cluster or 1%",
            check=lambda w: w.size not in (0, "0%"),
            field_path=".size",
        ),
        duration_rule("minHealthyTime", "min_healthy_time", MAX_WAVE_TIME),
        duration_rule(
            "progressDeadline", "progress_deadline", MAX_WAVE_TIME, MIN_PROGRESS_DEADLINE
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
    waves: Waves | None = None
    """Roll new revisions out wave by wave, each gated on health (unset: every cluster at
    once)."""
    revision_history_limit: int = Field(default=DEFAULT_HISTORY, ge=1, le=MAX_HISTORY)
    """Revisions kept on the hub for undo (1 to 50)."""


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
