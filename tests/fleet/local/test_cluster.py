"""fleet.local.cluster's reading of an API server's own metrics (no cluster needed)."""

from __future__ import annotations

from fleet.local.cluster import counted

METRICS = """\
# HELP apiserver_watch_events_total [BETA] Number of events sent in watch clients
# TYPE apiserver_watch_events_total counter
apiserver_watch_events_total{group="",resource="configmaps",version="v1"} 12
apiserver_watch_events_total{group="",resource="pods",version="v1"} 5
apiserver_watch_events_total{group="apps",resource="deployments",version="v1"} 3
apiserver_request_total{code="201",resource="configmaps",subresource="",verb="POST"} 4
apiserver_request_total{code="201",resource="pods",subresource="configmaps",verb="POST"} 7
apiserver_terminated_watchers_total{group="",resource="configmaps",version="v1"} 2.0
process_start_time_seconds 1.7e+09
"""


def test_a_counter_is_summed_over_every_series_without_labels_asked() -> None:
    assert counted(METRICS, "apiserver_watch_events_total") == 20
    assert counted(METRICS, "process_start_time_seconds") == 1.7e9


def test_only_the_series_with_every_label_asked_count() -> None:
    assert counted(METRICS, "apiserver_watch_events_total", {"resource": "configmaps"}) == 12
    asked = {"verb": "POST", "resource": "configmaps", "code": "201"}
    assert counted(METRICS, "apiserver_request_total", asked) == 4


def test_a_label_matches_whole_not_inside_another_labels_name() -> None:
    # subresource="configmaps" holds resource="configmaps" as text: not a match.
    assert counted(METRICS, "apiserver_request_total", {"resource": "configmaps"}) == 4


def test_a_counter_with_no_series_or_a_longer_name_counts_nothing() -> None:
    assert counted(METRICS, "apiserver_watch_events") == 0
    assert counted(METRICS, "apiserver_watch_events_total", {"resource": "secrets"}) == 0
    assert counted(METRICS, "process_start_time_seconds", {"job": "x"}) == 0
