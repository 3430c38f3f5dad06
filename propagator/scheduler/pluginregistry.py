"""Finding plugins (entry point group ``propagator.scheduler.plugins``) and building the
profile that settings ask for: which plugins run, in what order, with what weights."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from propagator.scheduler.plugins import FilterPlugin, ScorePlugin

GROUP = "propagator.scheduler.plugins"
SETTING = "PROPAGATOR_SCHEDULER_PLUGINS"
DEFAULT_PLUGINS = (
    "TaintToleration,ClusterAffinity,ApiEnablement,Capacity,TenantQuota,"
    "LeastAllocated=1,BalancedAllocation=1,Preference=2,LayerOrder=1,TaintPreference=3"
)
MAX_WEIGHT = 100


class PluginError(ValueError):
    """A plugin list that cannot be used (unknown, duplicate, bad weight)."""


@dataclass(frozen=True)
class Profile:
    """Filters in order, scores with weights."""

    filters: tuple[FilterPlugin, ...]
    scores: tuple[tuple[ScorePlugin, int], ...]

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.filters] + [f"{s.name}={w}" for s, w in self.scores]


def discover() -> dict[str, Callable[[], Any]]:
    """Plugin factories by name, from every installed distribution's entry points."""
    found: dict[str, Callable[[], Any]] = {}
    for ep in entry_points(group=GROUP):
        if ep.name in found:
            raise PluginError(f"two installed packages register scheduler plugin {ep.name!r}")
        found[ep.name] = ep.load
    return found


def build_profile(spec: str, factories: Mapping[str, Callable[[], Any]] | None = None) -> Profile:
    """Parse ``Name[=weight],...``: a plugin with a filter runs as a filter in list order; one
    with a score is weighted (default 1). Unknown or repeated names are errors."""
    factories = discover() if factories is None else factories
    filters: list[FilterPlugin] = []
    scores: list[tuple[ScorePlugin, int]] = []
    seen: set[str] = set()
    for raw in spec.split(","):
        entry = raw.strip()
        if not entry:
            continue
        name, _, weight_text = entry.partition("=")
        name = name.strip()
        if name in seen:
            raise PluginError(f"{SETTING}: scheduler plugin {name!r} is listed twice")
        seen.add(name)
        if name not in factories:
            known = ", ".join(sorted(factories))
            raise PluginError(f"{SETTING}: unknown scheduler plugin {name!r} (known: {known})")
        plugin = factories[name]()
        if isinstance(plugin, type):
            plugin = plugin()  # the entry point names the class
        is_filter, is_score = hasattr(plugin, "filter"), hasattr(plugin, "score")
        if not (is_filter or is_score):
            raise PluginError(f"{SETTING}: {name!r} has neither filter() nor score()")
        weight = 1
        if weight_text:
            if not is_score:
                raise PluginError(f"{SETTING}: {name!r} is a filter; only scores take =weight")
            try:
                weight = int(weight_text)
            except ValueError:
                weight = 0
            if not 1 <= weight <= MAX_WEIGHT:
                raise PluginError(
                    f"{SETTING}: weight of {name!r} is {weight_text!r}; "
                    f"it must be an integer from 1 to {MAX_WEIGHT}"
                )
        if is_filter:
            filters.append(plugin)
        if is_score:
            scores.append((plugin, weight))
    return Profile(tuple(filters), tuple(scores))
