"""The hub watches of the kinds applications select (``spec.resources.selectors``): one
per kind, started when an application first selects it, so an edit of a selected object
plans again the applications that pick it."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio.abc

from api.selectors import selects, stored_selector
from kube.connection import KubeConnection
from kube.informer import Informer
from propagator.propagation.dependencies import BROUGHT_KINDS

KindKey = tuple[str, str]


def brings(app: Mapping[str, Any]) -> bool:
    """Whether ``app`` brings its workloads' dependencies along."""
    deps = (app.get("spec") or {}).get("dependencies")
    return isinstance(deps, Mapping) and deps.get("propagate", True) is not False


def _kinds(app: Mapping[str, Any]) -> list[KindKey]:
    """The hub kinds whose objects ``app`` reads."""
    selectors = ((app.get("spec") or {}).get("resources") or {}).get("selectors") or []
    kinds = [(str(sel.get("apiVersion")), str(sel.get("kind"))) for sel in selectors]
    return kinds + list(BROUGHT_KINDS) if brings(app) else kinds


def picks(app: Mapping[str, Any], kind: KindKey, meta: Mapping[str, Any]) -> bool:
    """Whether ``app`` selects the hub object of ``kind`` with metadata ``meta``."""
    api_version, name = kind
    if app["metadata"].get("namespace") != meta.get("namespace"):
        return False
    if kind in BROUGHT_KINDS and brings(app):
        return True  # (any of them: which ones its workloads use is decided when planned)
    for sel in ((app.get("spec") or {}).get("resources") or {}).get("selectors") or []:
        if sel.get("apiVersion") != api_version or sel.get("kind") != name:
            continue
        if sel.get("name") == meta.get("name"):
            return True
        labels = sel.get("labelSelector")
        if labels is not None and selects(stored_selector(labels), meta.get("labels") or {}):
            return True
    return False


class SelectedWatches:
    """The watches, by kind; ``changed(kind, metadata)``: a selected kind's object changed
    (listed items carry no apiVersion/kind: the watch's kind says it)."""

    def __init__(
        self, hub: KubeConnection, changed: Callable[[KindKey, Mapping[str, Any]], None]
    ) -> None:
        self.hub = hub
        self.changed = changed
        self.informers: dict[KindKey, Informer] = {}
        self._task_group: anyio.abc.TaskGroup | None = None

    def start(self, task_group: anyio.abc.TaskGroup, apps: Sequence[Mapping[str, Any]]) -> None:
        """Watch, in ``task_group``, the kinds ``apps`` select, and later those others
        select."""
        self._task_group = task_group
        self.watch(apps)

    def watch(self, apps: Sequence[Mapping[str, Any]]) -> None:
        """One hub watch per kind ``apps`` select (none before :meth:`start`)."""
        if self._task_group is None:
            return  # start() watches them once the applications are listed
        for app in apps:
            for kind in _kinds(app):
                if kind not in self.informers:
                    informer = Informer(self.hub, *kind, functools.partial(self._on_event, kind))
                    self.informers[kind] = informer
                    self._task_group.start_soon(informer.run)

    def stop(self) -> None:
        for informer in self.informers.values():
            informer.stop()

    def _on_event(self, kind: KindKey, _event: str, old: Any, new: Any) -> None:
        self.changed(kind, (new or old).get("metadata") or {})
