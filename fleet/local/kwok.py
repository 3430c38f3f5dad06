"""kwok configuration for local clusters: fake nodes and the stages that move their pods.

kwok ships no default behaviour; it does what its Stage objects say. These stages make a
node Ready, keep it heartbeating, run every pod bound to a fake node straight to Running and
Ready (or Running and never Ready, for a pod annotated ``kwok.propagator.io/unready:
"true"``: an application that does not become healthy, to try failover with), complete
the pods of Jobs, and finish deletions.
"""

from __future__ import annotations

from typing import Any

import yaml

NODE_ANNOTATION = "kwok.x-k8s.io/node"
UNREADY_ANNOTATION = "kwok.propagator.io/unready"
"""A pod annotated with it ("true") runs and never becomes Ready."""

_NODE_CONDITIONS = """\
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ or $root.metadata.creationTimestamp $now | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
      {{ end }}
"""

_NODE_STATUS = (
    """\
      {{ $now := Now }}
      {{ $root := . }}
"""
    + _NODE_CONDITIONS
    + """\
      addresses:
      - address: {{ NodeIP | Quote }}
        type: InternalIP
      - address: {{ NodeName | Quote }}
        type: Hostname
      allocatable:
      {{ YAML .status.allocatable 1 }}
      capacity:
      {{ YAML .status.capacity 1 }}
      nodeInfo:
        architecture: amd64
        kubeletVersion: fake
        operatingSystem: linux
      phase: Running
"""
)


def _pod_running(ready: bool) -> str:
    """A Running pod's status, Ready or never Ready (its containers started, not ready)."""
    flag = "true" if ready else "false"
    return f"""\
      {{{{ $now := Now }}}}
      {{{{ $m := .metadata }}}}
      conditions:
      {{{{ range list "PodScheduled" "Initialized" }}}}
      - lastProbeTime: null
        lastTransitionTime: {{{{ $now | Quote }}}}
        status: "True"
        type: {{{{ . }}}}
      {{{{ end }}}}
      {{{{ range list "ContainersReady" "Ready" }}}}
      - lastProbeTime: null
        lastTransitionTime: {{{{ $now | Quote }}}}
        status: "{flag.title()}"
        type: {{{{ . }}}}
      {{{{ end }}}}
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: {flag}
        restartCount: 0
        started: true
        state:
          running:
            startedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      hostIP: {{{{ NodeIPWith .spec.nodeName | Quote }}}}
      podIP: {{{{ PodIPWith .spec.nodeName false $m.uid $m.name $m.namespace | Quote }}}}
      phase: Running
      startTime: {{{{ $now | Quote }}}}
"""


_POD_SUCCEEDED = """\
      {{ $now := Now }}
      conditions:
      - lastProbeTime: null
        lastTransitionTime: {{ $now | Quote }}
        reason: PodCompleted
        status: "False"
        type: Ready
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: 0
            finishedAt: {{ $now | Quote }}
            reason: Completed
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: Succeeded
"""


def _stage(
    name: str, kind: str, match: list[dict[str, Any]], nxt: dict[str, Any], delay_ms: int = 0
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceRef": {"apiGroup": "v1", "kind": kind},
        "selector": {"matchExpressions": match},
        "next": nxt,
    }
    if delay_ms:
        spec["delay"] = {"durationMilliseconds": delay_ms, "jitterDurationMilliseconds": delay_ms}
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": spec,
    }


def _exists(key: str) -> dict[str, Any]:
    return {"key": key, "operator": "Exists"}


def _absent(key: str) -> dict[str, Any]:
    return {"key": key, "operator": "DoesNotExist"}


def _is(key: str, *values: str, negate: bool = False) -> dict[str, Any]:
    return {"key": key, "operator": "NotIn" if negate else "In", "values": list(values)}


_READY = '.status.conditions.[] | select( .type == "Ready" ) | .status'
_UNREADY = f'.metadata.annotations["{UNREADY_ANNOTATION}"]'


def stages() -> list[dict[str, Any]]:
    """The Stage objects every local cluster's kwok runs with."""
    return [
        _stage(
            "node-ready",
            "Node",
            [_is(_READY, "True", negate=True)],
            {"statusTemplate": _NODE_STATUS},
        ),
        # Leases carry the heartbeat; this only refreshes the conditions' timestamps.
        _stage(
            "node-heartbeat",
            "Node",
            [_is(_READY, "True")],
            {"statusTemplate": _NODE_STATUS},
            delay_ms=300_000,
        ),
        _stage(
            "pod-running",
            "Pod",
            [
                _absent(".metadata.deletionTimestamp"),
                _is(".status.phase", "Pending"),
                _exists(".spec.nodeName"),
                _is(_UNREADY, "true", negate=True),
            ],
            {"statusTemplate": _pod_running(True)},
        ),
        _stage(
            "pod-running-unready",
            "Pod",
            [
                _absent(".metadata.deletionTimestamp"),
                _is(".status.phase", "Pending"),
                _exists(".spec.nodeName"),
                _is(_UNREADY, "true"),
            ],
            {"statusTemplate": _pod_running(False)},
        ),
        _stage(
            "pod-complete",
            "Pod",
            [
                _absent(".metadata.deletionTimestamp"),
                _is(".status.phase", "Running"),
                _is(".metadata.ownerReferences.[].kind", "Job"),
            ],
            {"statusTemplate": _POD_SUCCEEDED},
            delay_ms=1_000,
        ),
        _stage(
            "pod-delete",
            "Pod",
            [_exists(".metadata.deletionTimestamp")],
            {"finalizers": {"empty": True}, "delete": True},
        ),
    ]


def config_yaml() -> str:
    """The ``--config`` file for kwok: every stage, one YAML document each."""
    return yaml.safe_dump_all(stages(), sort_keys=False)


def fake_node(
    name: str, *, cpu: str, memory: str, pods: int, region: str, zone: str
) -> dict[str, Any]:
    """A Node object that kwok will manage, with the given capacity and topology labels."""
    capacity = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {NODE_ANNOTATION: "fake"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                "topology.kubernetes.io/region": region,
                "topology.kubernetes.io/zone": zone,
            },
        },
        "status": {"allocatable": capacity, "capacity": capacity},
    }
