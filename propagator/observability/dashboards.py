"""The Grafana dashboards, as code: fleet, propagation, scheduling, canary and tenants.
``propagator chart`` writes them into ``charts/propagator/dashboards/``, which the chart
ships as ConfigMaps for Grafana's dashboard sidecar. Every query reads a metric of
``observability/metrics.py``; template variables (``$cluster``, ``$namespace``,
``$application``, ``$tenant``) are multi-value with "All" as ``.*``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
WINDOW = "5m"


@dataclass(frozen=True)
class Panel:
    title: str
    targets: tuple[tuple[str, str], ...]
    """(PromQL, legend) per line."""
    unit: str = "short"
    description: str = ""
    pull: bool = False
    """Its series come from Pull members (their agents, their Works): empty on a fleet
    without one."""


@dataclass(frozen=True)
class Variable:
    name: str
    query: str
    """label_values(...) that lists its values."""


@dataclass(frozen=True)
class Dashboard:
    uid: str
    title: str
    variables: tuple[Variable, ...]
    panels: tuple[Panel, ...]


CLUSTER = Variable("cluster", "label_values(propagator_cluster_ready, cluster)")
NAMESPACE = Variable("namespace", "label_values(propagator_canary_weight, namespace)")
APPLICATION = Variable(
    "application", 'label_values(propagator_canary_weight{namespace=~"$namespace"}, application)'
)
TENANT = Variable("tenant", "label_values(propagator_tenant_quota_hard, tenant)")
C = 'cluster=~"$cluster"'
APP = 'namespace=~"$namespace", application=~"$application"'


def _sum(
    metric: str, by: str, selector: str = "", fn: str = "rate", window: str = WINDOW
) -> tuple[str, str]:
    """``sum by (by) (fn(metric{selector}[window]))``, its legend the grouping labels."""
    legend = " ".join(f"{{{{{label.strip()}}}}}" for label in by.split(","))
    series = f"{metric}{{{selector}}}" if selector else metric
    return f"sum by ({by}) ({fn}({series}[{window}]))", legend


def _p99(metric: str, by: str = "") -> tuple[tuple[str, str], ...]:
    group = f"{by}, le" if by else "le"
    legend = f"{{{{{by}}}}} " if by else ""
    return tuple(
        (
            f"histogram_quantile({q}, sum by ({group}) (rate({metric}_bucket[{WINDOW}])))",
            f"{legend}p{int(q * 100)}",
        )
        for q in (0.5, 0.99)
    )


DASHBOARDS = (
    Dashboard(
        "propagator-fleet",
        "Propagator / Fleet",
        (CLUSTER,),
        (
            Panel(
                "Members ready",
                ((f"propagator_cluster_ready{{{C}}}", "{{cluster}}"),),
                description="1 when the member's probes pass, 0 when it is not Ready.",
            ),
            Panel(
                "Probes by result",
                (_sum("propagator_member_probes_total", "cluster, result", C),),
                "ops",
            ),
            Panel(
                "Circuit state (0 closed, 1 half-open, 2 open)",
                ((f"propagator_circuit_state{{{C}}}", "{{cluster}}"),),
            ),
            Panel(
                "Fleet snapshot",
                (
                    ("propagator_fleet_snapshot_clusters", "clusters"),
                    (f"changes(propagator_fleet_snapshot_generation[{WINDOW}])", "rebuilds"),
                ),
            ),
            Panel(
                "Member calls (writes) by operation",
                (_sum("propagator_member_writes_total", "cluster, operation", C),),
                "ops",
            ),
            Panel("Leader", (("max(propagator_leader)", "leading"),)),
            Panel(
                "Replicas: each one's share",
                (
                    ("sum by (instance) (propagator_shard_applications)", "{{instance}} apps"),
                    ("sum by (instance) (propagator_shard_buckets)", "{{instance}} buckets"),
                    (
                        "sum by (instance) (propagator_shard_member_clusters)",
                        "{{instance}} members probed",
                    ),
                ),
                description="What each controller replica handles: applications, buckets of "
                "the work (of 128) and member clusters it probes. One leader holds all; with "
                "shards (PROPAGATOR_SHARDING) the replicas divide them.",
            ),
            Panel(
                "Pull members: heartbeats, Works written, Works by state",
                (
                    (f"sum(rate(propagator_agent_heartbeats_total[{WINDOW}]))", "heartbeats"),
                    _sum("propagator_work_writes_total", "cluster, operation", C),
                    ("sum by (state) (propagator_agent_works)", "Works {{state}}"),
                ),
                description="The agents' heartbeats (scraped from each agent), the Works the "
                "controller writes for Pull members, and the Works the agents hold by "
                "state (applied, pending, failed, refused).",
                pull=True,
            ),
        ),
    ),
    Dashboard(
        "propagator-propagation",
        "Propagator / Propagation",
        (CLUSTER,),
        (
            Panel(
                "Reconciles by result",
                (_sum("propagator_reconciles_total", "result"),),
                "ops",
            ),
            Panel(
                "Duration by operation",
                _p99("propagator_propagation_duration_seconds", "operation"),
                "s",
            ),
            Panel(
                "Application clusters by health",
                (("sum by (health) (propagator_application_clusters)", "{{health}}"),),
                description="Every application's clusters, by its health there as its "
                "objects' interpreter rules judge it.",
            ),
            Panel(
                "Applies by cluster and result",
                (_sum("propagator_applies_total", "cluster, result", C),),
                "ops",
                "Failed and conflicting applies per cluster show as their own lines.",
            ),
            Panel(
                "Retries",
                (_sum("propagator_apply_retries_total", "cluster", C),),
                "ops",
            ),
            Panel(
                "In flight and queued",
                (
                    ("propagator_propagation_operations_in_flight", "in flight"),
                    ("propagator_workqueue_depth", "applications queued"),
                    ("propagator_member_sync_queue_depth", "member syncs queued"),
                ),
            ),
            Panel(
                "Drift healed",
                (_sum("propagator_drift_heals_total", "cluster", C, "increase", "1h"),),
            ),
            Panel(
                "Evictions",
                (_sum("propagator_evictions_total", "cluster, reason", C, "increase", "1h"),),
            ),
            Panel(
                "Rollout: wave and clusters updated",
                (
                    ("propagator_rollout_wave", "{{namespace}}/{{application}} wave"),
                    (
                        "propagator_rollout_clusters_updated",
                        "{{namespace}}/{{application}} clusters updated",
                    ),
                ),
                description="Per application with waves: the wave it rolls out (its number "
                "of waves once complete) and the clusters that took the revision.",
            ),
            Panel(
                "Rollouts halted by reason",
                (_sum("propagator_rollout_halts_total", "reason", "", "increase", "1h"),),
                description="A wave not healthy within its progress deadline, Degraded or "
                "failed clusters beyond its tolerance, or a canary rolled back.",
            ),
        ),
    ),
    Dashboard(
        "propagator-scheduling",
        "Propagator / Scheduling",
        (),
        (
            Panel("Decision latency", _p99("propagator_scheduling_duration_seconds"), "s"),
            Panel(
                "Latency by stage",
                _p99("propagator_scheduling_stage_duration_seconds", "stage"),
                "s",
            ),
            Panel(
                "Decisions by result",
                (_sum("propagator_scheduling_results_total", "result"),),
                "ops",
            ),
            Panel(
                "Full scans (stale snapshot)",
                ((f"rate(propagator_scheduler_full_scans_total[{WINDOW}])", "full scans"),),
                "ops",
            ),
        ),
    ),
    Dashboard(
        "propagator-canary",
        "Propagator / Canary",
        (NAMESPACE, APPLICATION),
        (
            Panel(
                "Canary weight",
                ((f"propagator_canary_weight{{{APP}}}", "{{namespace}}/{{application}}"),),
                "percent",
            ),
            Panel(
                "Phase",
                (
                    (
                        f"propagator_canary_phase{{{APP}}} == 1",
                        "{{namespace}}/{{application}} {{phase}}",
                    ),
                ),
            ),
            Panel(
                "Rollbacks by reason",
                (_sum("propagator_canary_rollbacks_total", "reason", "", "increase", "1h"),),
            ),
        ),
    ),
    Dashboard(
        "propagator-tenants",
        "Propagator / Tenants",
        (TENANT, CLUSTER),
        (
            Panel(
                "Quota used vs hard",
                (
                    (
                        f'propagator_tenant_quota_used{{tenant=~"$tenant", {C}}}',
                        "{{tenant}} {{cluster}} {{resource}} used",
                    ),
                    (
                        f'propagator_tenant_quota_hard{{tenant=~"$tenant", {C}}}',
                        "{{tenant}} {{cluster}} {{resource}} hard",
                    ),
                ),
            ),
            Panel(
                "Quota used, share of hard",
                (
                    (
                        f'propagator_tenant_quota_used{{tenant=~"$tenant", {C}}} '
                        f'/ propagator_tenant_quota_hard{{tenant=~"$tenant", {C}}} > 0',
                        "{{tenant}} {{cluster}} {{resource}}",
                    ),
                ),
                "percentunit",
            ),
            Panel(
                "Rejections by reason",
                (
                    _sum(
                        "propagator_tenant_quota_rejections_total",
                        "tenant, reason",
                        'tenant=~"$tenant"',
                        "increase",
                        "1h",
                    ),
                ),
            ),
        ),
    ),
)


def grafana(d: Dashboard) -> dict[str, Any]:
    """The Grafana dashboard JSON of ``d``, built with Grafana's own dashboards-as-code
    library (``grafana-foundation-sdk``, typed after Grafana's dashboard schema): a
    development dependency, needed by ``propagator chart`` only, which writes the chart's
    files; the controller never imports it."""
    try:
        from grafana_foundation_sdk.builders import dashboard as builders
        from grafana_foundation_sdk.builders import prometheus, timeseries
        from grafana_foundation_sdk.cog.encoder import JSONEncoder
        from grafana_foundation_sdk.models import dashboard as models
    except ImportError as exc:  # the controller's image: no chart to write there
        raise RuntimeError(
            "writing the dashboards needs the development dependencies: "
            "pip install 'propagator[dev]'"
        ) from exc
    source = models.DataSourceRef(type_val=DATASOURCE["type"], uid=DATASOURCE["uid"])
    board = (
        builders.Dashboard(d.title)
        .uid(d.uid)
        .tags(["propagator"])
        .editable()
        .version(1)
        .time("now-6h", "now")
        .refresh("30s")
        .with_variable(
            builders.DatasourceVariable("datasource").type("prometheus").label("Prometheus")
        )
    )
    for v in d.variables:
        board = board.with_variable(
            builders.QueryVariable(v.name)
            .datasource(source)
            .query({"query": v.query, "refId": v.name})
            .refresh(models.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .include_all(True)
            .all_value(".*")
            .multi(True)
            .current(models.VariableOption(text="All", value="$__all"))
        )
    for i, p in enumerate(d.panels):
        panel = (
            timeseries.Panel()
            .id(i + 1)
            .title(p.title)
            .description(p.description)
            .datasource(source)
            .unit(p.unit)
            .grid_pos(models.GridPos(h=8, w=12, x=12 * (i % 2), y=8 * (i // 2)))
        )
        for j, (expr, legend) in enumerate(p.targets):
            panel = panel.with_target(
                prometheus.Dataquery().ref_id(chr(ord("A") + j)).expr(expr).legend_format(legend)
            )
        board = board.with_panel(panel)
    built: dict[str, Any] = json.loads(JSONEncoder(sort_keys=True).encode(board.build()))
    return built
