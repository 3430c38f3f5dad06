"""The layered scheduler (pure: no API calls inside a decision)."""

from propagator.scheduler.core import Scheduler
from propagator.scheduler.demand import demand_of, on_clusters
from propagator.scheduler.explain import explain
from propagator.scheduler.pluginregistry import DEFAULT_PLUGINS, PluginError, Profile, build_profile
from propagator.scheduler.types import Decision, Demand

__all__ = [
    "DEFAULT_PLUGINS",
    "Decision",
    "Demand",
    "PluginError",
    "Profile",
    "Scheduler",
    "build_profile",
    "demand_of",
    "explain",
    "on_clusters",
]
