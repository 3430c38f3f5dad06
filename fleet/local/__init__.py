"""Real local Kubernetes control planes for demos and tests: a hub and member clusters.

Each cluster runs etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
(fake nodes whose pods really become Running and Ready), built by ``hack/testbin.sh``.
"""

from fleet.local.cluster import ClusterState, ComponentFailed, NodeShape
from fleet.local.fleet import (
    HUB,
    FleetOptions,
    FleetState,
    LocalFleetError,
    default_state_dir,
    down,
    up,
)
from fleet.local.testbin import TestbinError, testbin_dir

__all__ = [
    "HUB",
    "ClusterState",
    "ComponentFailed",
    "FleetOptions",
    "FleetState",
    "LocalFleetError",
    "NodeShape",
    "TestbinError",
    "default_state_dir",
    "down",
    "testbin_dir",
    "up",
]
