"""Metrics, health endpoints, traces, logs and Events of the controller, and its Grafana
dashboards as code."""
