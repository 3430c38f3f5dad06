"""``propagator chart``: write the Helm chart's generated files — ``values.schema.json``
(every value typed and bounded; the controller's settings from the settings model itself,
so a wrong value fails ``helm install`` with the same bounds ``propagator run`` checks) and
the Grafana dashboards (``dashboards/*.json``, from ``observability/dashboards.py``).

``values_schema`` is long: it declares the chart's values, a table rather than logic.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from propagator.agent.settings import AGENT_SETTINGS, AgentSettings
from propagator.observability.dashboards import DASHBOARDS, grafana
from propagator.settings import Settings

CHART_SET = frozenset(
    {
        "hub_kubeconfig",
        "hub_context",
        "service_account_dir",
        "namespace",
        "leader_elect",
        "replica_name",
        "bind_address",
        "metrics_port",
        "health_port",
        "otlp_headers",
    }
)
"""Settings the chart sets itself (in a pod: the in-cluster hub, the release namespace,
leader election on, the probe and metrics ports from their own values, the OTLP headers
from a Secret)."""

_DNS_LABEL = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
_DNS_SUBDOMAIN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_DURATION = "^[0-9]+(ms|s|m|h)$"
_LABELS: dict[str, Any] = {
    "type": "object",
    "additionalProperties": {"type": "string", "maxLength": 63},
}
_ANNOTATIONS: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
_PORT: dict[str, Any] = {"type": "integer", "minimum": 1, "maximum": 65535}


def _strict(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
    }
    if required:
        out["required"] = list(required)
    return out


_IMAGE = _strict(
    {
        "repository": {
            "type": "string",
            "minLength": 1,
            "maxLength": 255,
            "pattern": "^[a-z0-9][a-z0-9./_:-]*$",
        },
        "tag": {"type": "string", "maxLength": 128, "pattern": "^[A-Za-z0-9_.-]*$"},
        "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
    },
    ("repository",),
)


def _setting(schema: dict[str, Any]) -> dict[str, Any]:
    """A setting's JSON schema as values.schema.json holds it (no titles, no formats)."""
    out = {k: v for k, v in schema.items() if k not in ("title", "format", "default")}
    if "anyOf" in out:
        out["anyOf"] = [_setting(s) for s in out["anyOf"]]
    return out


def values_schema() -> dict[str, Any]:
    """The chart's values.schema.json."""
    settings = Settings.model_json_schema()["properties"]
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Propagator Helm values",
        **_strict(
            {
                "image": _IMAGE,
                "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
                "serviceAccount": _strict(
                    {
                        "create": {"type": "boolean"},
                        "name": {"type": "string", "pattern": f"({_DNS_LABEL})|^$"},
                        "annotations": _ANNOTATIONS,
                    }
                ),
                "admissionPolicy": _strict({"create": {"type": "boolean"}}),
                "rbac": _strict(
                    {
                        "create": {"type": "boolean"},
                        "selectableResources": {
                            "type": "array",
                            "maxItems": 50,
                            "items": _strict(
                                {
                                    "apiGroups": {
                                        "type": "array",
                                        "minItems": 1,
                                        "items": {"type": "string", "pattern": "^[a-z0-9.-]*$"},
                                    },
                                    "resources": {
                                        "type": "array",
                                        "minItems": 1,
                                        # Secrets stay in the controller's namespace.
                                        "items": {
                                            "type": "string",
                                            "pattern": "^[a-z0-9.-]+$",
                                            "not": {"enum": ["secrets"]},
                                        },
                                    },
                                },
                                ("apiGroups", "resources"),
                            ),
                        },
                    }
                ),
                "settings": _strict(
                    {
                        name: _setting(schema)
                        for name, schema in settings.items()
                        if name not in CHART_SET
                    }
                ),
                "tracing": _strict(
                    {
                        "headersSecret": _strict(
                            {
                                "name": {"type": "string", "pattern": f"({_DNS_LABEL})|^$"},
                                "key": {"type": "string", "pattern": "^[-._a-zA-Z0-9]*$"},
                            }
                        ),
                        "otelEnv": {
                            "type": "object",
                            "patternProperties": {
                                "^OTEL_[A-Z0-9_]+$": {"type": "string", "maxLength": 4096}
                            },
                            "additionalProperties": False,
                        },
                    }
                ),
                "resources": {"type": "object"},
                "podDisruptionBudget": _strict(
                    {
                        "enabled": {"type": "boolean"},
                        "minAvailable": {
                            "anyOf": [
                                {"type": "integer", "minimum": 0},
                                {"type": "string", "pattern": "^[0-9]{1,3}%$"},
                            ]
                        },
                    }
                ),
                "metrics": _strict({"port": _PORT}, ("port",)),
                "health": _strict({"port": _PORT}, ("port",)),
                "serviceMonitor": _strict(
                    {
                        "enabled": {"type": "boolean"},
                        "interval": {"type": "string", "pattern": _DURATION},
                        "labels": _LABELS,
                    }
                ),
                "prometheusRule": _strict({"enabled": {"type": "boolean"}, "labels": _LABELS}),
                "dashboards": _strict({"enabled": {"type": "boolean"}, "labels": _LABELS}),
                "podAnnotations": _ANNOTATIONS,
                "nodeSelector": _LABELS,
                "tolerations": {"type": "array", "items": {"type": "object"}},
                "affinity": {"type": "object"},
                "priorityClassName": {"type": "string", "maxLength": 253},
            }
        ),
    }


AGENT_CHART_SET = frozenset(
    {
        "agent_cluster",
        "agent_hub_kubeconfig",
        "agent_hub_secret",
        "agent_member_kubeconfig",
        "agent_state_dir",
        "agent_allow_namespaces",
        "agent_allow_kinds",
        "bind_address",
        "metrics_port",
        "health_port",
    }
)
"""Settings the agent's chart sets itself (from ``cluster``, ``hubSecret``, ``allow`` and
the port values)."""


def agent_values_schema() -> dict[str, Any]:
    """The agent chart's values.schema.json."""
    settings = AgentSettings.model_json_schema()["properties"]

    kind = _strict(
        {
            "group": {"type": "string", "maxLength": 253, "pattern": "^([a-z0-9.-]*)$"},
            "kind": {
                "type": "string",
                "minLength": 1,
                "maxLength": 63,
                "pattern": "^[A-Z][A-Za-z0-9]*$",
            },
            "resource": {
                "type": "string",
                "minLength": 1,
                "maxLength": 63,
                "pattern": "^[a-z0-9][a-z0-9.-]*$",
            },
        },
        ("group", "kind", "resource"),
    )
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Propagator agent Helm values",
        **_strict(
            {
                "cluster": {"type": "string", "maxLength": 44, "pattern": f"({_DNS_LABEL})|^$"},
                "hubSecret": _strict(
                    {
                        "name": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": 253,
                            "pattern": _DNS_SUBDOMAIN,
                        }
                    },
                    ("name",),
                ),
                "image": _IMAGE,
                "allow": _strict(
                    {
                        "namespaces": {
                            "type": "array",
                            "maxItems": 64,
                            "uniqueItems": True,
                            "items": {"type": "string", "pattern": _DNS_LABEL},
                        },
                        "kinds": {"type": "array", "maxItems": 200, "items": kind},
                    },
                    ("namespaces", "kinds"),
                ),
                "settings": _strict(
                    {
                        name: _setting(settings[name])
                        for name in AGENT_SETTINGS
                        if name not in AGENT_CHART_SET
                    }
                ),
                "resources": {"type": "object"},
                "metrics": _strict({"port": _PORT}, ("port",)),
                "health": _strict({"port": _PORT}, ("port",)),
                "podAnnotations": _ANNOTATIONS,
                "nodeSelector": _LABELS,
                "tolerations": {"type": "array", "items": {"type": "object"}},
                "affinity": {"type": "object"},
                "priorityClassName": {"type": "string", "maxLength": 253},
            }
        ),
    }


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "chart",
        help="write the Helm chart's generated files",
        description="Write values.schema.json and dashboards/*.json into the chart directory "
        "(how charts/propagator is kept current with the settings and the metrics).",
    )
    parser.add_argument("--output-dir", type=Path, required=True, help="the chart directory")
    parser.add_argument(
        "--agent-output-dir",
        type=Path,
        help="the agent's chart directory (charts/propagator-agent): its values.schema.json",
    )
    parser.set_defaults(run=_run)


def generated() -> dict[str, str]:
    """The chart's generated files by path (relative to the chart), as their text."""
    files = {"values.schema.json": json.dumps(values_schema(), indent=2) + "\n"}
    for dashboard in DASHBOARDS:
        files[f"dashboards/{dashboard.uid}.json"] = json.dumps(grafana(dashboard), indent=2) + "\n"
    return files


def agent_generated() -> dict[str, str]:
    """The agent chart's generated files by path (relative to the chart)."""
    return {"values.schema.json": json.dumps(agent_values_schema(), indent=2) + "\n"}


def _run(args: argparse.Namespace) -> int:
    files = [(args.output_dir, generated())]
    if args.agent_output_dir is not None:
        files.append((args.agent_output_dir, agent_generated()))
    for directory, name, text in ((d, n, t) for d, found in files for n, t in found.items()):
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
    return 0
