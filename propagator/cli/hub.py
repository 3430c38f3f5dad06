"""The hub connection a command's settings name: their kubeconfig and context (as
kubectl finds it), or the pod's service account when deployed."""

from __future__ import annotations

from kube.connection import KubeConnection
from kube.hub import hub_connection
from propagator.settings import Settings


def connect_hub(settings: Settings) -> KubeConnection:
    """The hub connection ``settings`` name (see :func:`kube.hub.hub_connection`)."""
    return hub_connection(
        settings.hub_kubeconfig,
        settings.hub_context,
        settings.member_connection(),
        settings.service_account_dir,
    )
