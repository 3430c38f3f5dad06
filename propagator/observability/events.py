"""Kubernetes Events on the objects the controller acts for (``kubectl describe`` shows
them), redacted like everything else that leaves the process."""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping
from typing import Any

from api.common import API_VERSION
from kube.connection import KubeConnection
from kube.errors import ApiError
from kube.redact import capped
from propagator.conditions import now_iso

log = logging.getLogger(__name__)


async def record_event(
    hub: KubeConnection, obj: Mapping[str, Any], type_: str, reason: str, message: str
) -> None:
    """Write a ``type_`` (Normal or Warning) Event about ``obj``; a failure is logged,
    never raised (an Event is a courtesy, not part of the work)."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    now = now_iso()
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta.get('name')}.", "namespace": namespace},
        "involvedObject": {
            "apiVersion": API_VERSION,
            "kind": obj.get("kind") or "ApplicationPropagation",
            "name": meta.get("name"),
            "namespace": namespace,
            "uid": meta.get("uid"),
        },
        "type": type_,
        "reason": reason,
        "message": capped(message),
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "source": {"component": "propagator"},
        "reportingComponent": "propagator",
        "reportingInstance": socket.gethostname(),
    }
    try:
        await hub.request("POST", f"/api/v1/namespaces/{namespace}/events", body=body)
    except ApiError as exc:
        log.warning("event %s on %s/%s not written: %s", reason, namespace, meta.get("name"), exc)
