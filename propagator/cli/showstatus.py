"""``kubectl propagator status NAME``: an application in one view — its conditions, a line
per cluster (applied, health, replicas, and an error or why it is not healthy), the drift
it only reports, the status fields its objects' interpreter rules reflect, its canary, the
clusters it is kept off and the objects it keeps on delete."""

from __future__ import annotations

from typing import Any

from api.common import API_VERSION
from kube.connection import KubeConnection
from propagator.cli.annotate import KIND
from propagator.cli.canary import headline
from propagator.cli.rollout import headline as rollout_headline
from propagator.cli.text import table

MAX_ERROR = 120
"""Characters of a cluster's last error (or health message) shown on its line (the status
holds it whole)."""


def status_text(app: dict[str, Any]) -> str:
    """What ``kubectl propagator status`` prints for ``app``."""
    meta, spec = app["metadata"], app.get("spec") or {}
    status = app.get("status") or {}
    lines = [
        f"applicationpropagation.propagator.io/{meta['name']} in {meta.get('namespace')}: "
        f"fleet {spec.get('fleet')}, {status.get('ready') or 'nothing'} ready"
    ]
    for c in status.get("conditions") or []:
        lines.append(f"  {c.get('type')}={c.get('status')} {c.get('reason')}: {c.get('message')}")
    placed = {p.get("cluster"): p for p in status.get("placement") or []}
    rows: list[tuple[str, ...]] = [
        ("CLUSTER", "APPLIED", "HEALTH", "REPLICAS", "ATTEMPTS", "MESSAGE")
    ]
    for c in status.get("clusters") or []:
        replicas = (placed.get(c.get("name")) or {}).get("replicas")
        unhealthy = c.get("health") != "Healthy" and c.get("healthMessage")
        error = str(c.get("lastError") or unhealthy or "-")
        if c.get("evicting"):
            error = f"evicting ({c['evicting'].get('reason')}): {c['evicting'].get('message')}"
        rows.append(
            (
                str(c.get("name")),
                "yes" if c.get("applied") else "no",
                str(c.get("health", "Unknown")),
                "-" if replicas is None else str(replicas),
                str(c.get("attempts", 0)),
                error if len(error) <= MAX_ERROR else error[:MAX_ERROR] + "…",
            )
        )
    if len(rows) > 1:
        lines += table(rows)
    for c in status.get("clusters") or []:
        if drift := c.get("drift"):
            names = ", ".join(drift.get("names") or [])
            lines.append(
                f"drift on {c.get('name')} since {drift.get('since')}: "
                f"{drift.get('objects')} object(s) left as changed there: {names}"
            )
    for o in status.get("objects") or []:
        where = f"{o['namespace']}/" if o.get("namespace") else ""
        fields = ", ".join(f"{k}={v}" for k, v in (o.get("fields") or {}).items())
        lines.append(f"{o['kind']} {where}{o['name']}: {fields} ({o.get('clusters')} clusters)")
    if spec.get("canary") is not None:
        lines.append(f"canary: {headline(app)}")
    if (app.get("status") or {}).get("rollout"):
        lines.append(f"rollout: {rollout_headline(app)}")
    for evicted in status.get("evicted") or []:
        cluster, reason, since = evicted.get("cluster"), evicted.get("reason"), evicted.get("since")
        lines.append(f"kept off {cluster}: {reason} since {since}")
    if kept := status.get("keptOnDelete"):
        lines.append(f"kept on delete: {', '.join(kept)}")
    return "\n".join(lines)


async def read_status(hub: KubeConnection, namespace: str, name: str) -> str:
    return status_text(await hub.get(API_VERSION, KIND, name, namespace=namespace))
