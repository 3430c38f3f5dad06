"""Scheduler plugins: the protocols (:mod:`.protocol`) and the built-in filters and
scores, one module each. Another package adds plugins through the entry point group
``propagator.scheduler.plugins`` (docs/scheduling.md shows one, tested in the suite)."""

from propagator.scheduler.plugins.apienablement import ApiEnablementFilter
from propagator.scheduler.plugins.balancedallocation import BalancedAllocation
from propagator.scheduler.plugins.capacity import Capacity
from propagator.scheduler.plugins.clusteraffinity import ClusterAffinity
from propagator.scheduler.plugins.common import selector_key, taint_name
from propagator.scheduler.plugins.layerorder import LayerOrder
from propagator.scheduler.plugins.leastallocated import LeastAllocated
from propagator.scheduler.plugins.preference import Preference
from propagator.scheduler.plugins.protocol import (
    ColumnarFilter,
    ColumnarScore,
    Failed,
    FilterPlugin,
    FilterResult,
    Memoized,
    Rejection,
    ScorePlugin,
    Unschedulable,
)
from propagator.scheduler.plugins.replicaroom import columnar_capacity, replicas_capacity
from propagator.scheduler.plugins.taintpreference import TaintPreference
from propagator.scheduler.plugins.tainttoleration import TaintToleration
from propagator.scheduler.plugins.tenantquota import TenantQuotaFilter

__all__ = [
    "ApiEnablementFilter",
    "BalancedAllocation",
    "Capacity",
    "ClusterAffinity",
    "ColumnarFilter",
    "ColumnarScore",
    "Failed",
    "FilterPlugin",
    "FilterResult",
    "LayerOrder",
    "LeastAllocated",
    "Memoized",
    "Preference",
    "Rejection",
    "ScorePlugin",
    "TaintPreference",
    "TaintToleration",
    "TenantQuotaFilter",
    "Unschedulable",
    "columnar_capacity",
    "replicas_capacity",
    "selector_key",
    "taint_name",
]
