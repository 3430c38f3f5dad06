"""``propagator schedule``: one scheduling decision, explained, for an application file."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import anyio
import yaml
from pydantic import ValidationError

from api.application import ApplicationPropagation
from api.common import API_VERSION
from fleet.snapshot import ClusterInfoCache, build_snapshot
from kube.connection import KubeConnection, call_with_retries
from kube.discovery import UnknownKind
from kube.errors import ApiError
from kube.kubeconfig import KubeconfigError
from propagator.cli.hub import connect_hub
from propagator.cli.render import RENDER_FAILURES, add_render_flag, as_yaml, render_one
from propagator.fleetmanager import memberstatus as fleetstatus
from propagator.interpreter.registry import Interpreters
from propagator.propagation.placement import FleetNotFound, current_placement, place
from propagator.scheduler import (
    Decision,
    PluginError,
    Profile,
    Scheduler,
    build_profile,
    demand_of,
    explain,
)
from propagator.settings import Settings, SettingsError, add_setting_flags, load_settings

_SETTINGS = [
    "hub_kubeconfig",
    "hub_context",
    "scheduler_plugins",
    "chart_sources",
    "chart_ca_file",
    "chart_renderer",
]
T = TypeVar("T")
# A snapshot built here from what was just read is fresh (age 0); the staleness bounds
# matter where one snapshot serves many decisions over time.


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "schedule",
        help="show where the scheduler would place an ApplicationPropagation, and why",
        description="Run one scheduling decision for the ApplicationPropagation in FILE "
        "against the live hub's MemberClusters, Fleets, TenantQuotas and Namespaces, or "
        "against a file of them (e.g. `kubectl get mc,fl,tq,ns -o yaml > fleet.yaml`). Exit "
        "code 0 when it "
        "can be placed, 1 when it cannot, 2 on bad input.",
    )
    parser.add_argument(
        "-f", "--filename", type=Path, required=True, help="YAML with the ApplicationPropagation"
    )
    parser.add_argument(
        "--fleet-file",
        type=Path,
        help="YAML with MemberClusters, Fleets (and TenantQuotas) instead of the live hub",
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="a line per cluster: which plugin filtered it and why, or its scores; and what "
        "changes from the application's status.placement (where it runs now)",
    )
    parser.add_argument("--json", action="store_true", help="the decision as JSON")
    add_render_flag(parser)
    add_setting_flags(parser, _SETTINGS)
    parser.set_defaults(run=_run)


class InputError(ValueError):
    pass


def objects_in(path: Path) -> list[dict[str, Any]]:
    """Every object in a YAML file (several documents and `kind: List` items included),
    each a mapping with a string ``kind`` and a ``metadata.name``; raises InputError naming
    the file and the object otherwise."""
    try:
        docs = list(yaml.safe_load_all(path.read_text()))
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text (is it YAML?)") from None
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from exc
    objects: list[Any] = []
    for doc in docs:
        if doc is None:
            continue
        if (
            isinstance(doc, dict)
            and isinstance(doc.get("kind"), str)
            and doc["kind"].endswith("List")
        ):
            items = doc.get("items")
            objects += items if isinstance(items, list) else [items]
        else:
            objects.append(doc)
    for number, obj in enumerate(objects, start=1):
        if not isinstance(obj, dict):
            raise InputError(f"{path}: object {number} is not a mapping: {obj!r:.40}")
        kind, meta = obj.get("kind"), obj.get("metadata")
        if not isinstance(kind, str):
            raise InputError(f"{path}: object {number}: kind must be a string, got {kind!r}")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            raise InputError(f"{path}: object {number} ({kind}) has no metadata.name")
    return objects


def _application(path: Path) -> ApplicationPropagation:
    found = [o for o in objects_in(path) if o.get("kind") == "ApplicationPropagation"]
    if len(found) != 1:
        raise InputError(f"{path}: expected one ApplicationPropagation, found {len(found)}")
    try:
        return ApplicationPropagation.model_validate(found[0])
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise InputError(f"{path}: {problems}") from exc


async def live_objects(hub: KubeConnection) -> list[dict[str, Any]]:
    """What a decision reads from the hub: MemberClusters, Fleets, TenantQuotas,
    ResourceInterpreters (a custom workload's replicas and requests) and Namespaces (a
    tenant may own the application's namespace by its labels)."""
    objects = []
    for kind in ("MemberCluster", "Fleet", "TenantQuota", "ResourceInterpreter"):
        listing = await call_with_retries(partial(hub.list, API_VERSION, kind))
        objects += [{**o, "kind": kind} for o in listing["items"]]
    listing = await call_with_retries(partial(hub.list, "v1", "Namespace"))
    return objects + [{**o, "kind": "Namespace"} for o in listing["items"]]


def _live(
    args: argparse.Namespace, then: Callable[[KubeConnection, list[dict[str, Any]]], Awaitable[T]]
) -> T:
    """``then(hub, objects)`` with what a decision reads from the live hub."""
    hub = connect_hub(load_settings(args))

    async def read() -> T:
        try:
            return await then(hub, await live_objects(hub))
        finally:
            await hub.close()

    return anyio.run(read)


def _decision_json(decision: Any, current: dict[str, int]) -> str:
    return json.dumps(
        {
            "schedulable": decision.schedulable,
            "layer": decision.layer,
            "summary": decision.summary,
            "placement": [
                {"cluster": p.cluster, "layer": p.layer, "replicas": p.replicas, "score": p.score}
                for p in decision.placed
            ],
            "current": current,
            "fullScan": decision.full_scan,
            "clusters": {
                name: {
                    "filteredBy": v.filtered_by,
                    "reason": v.reason,
                    "detail": v.detail,
                    "score": v.score,
                    "scores": dict(v.scores),
                    "selected": v.selected,
                }
                for name, v in sorted(decision.verdicts.items())
            },
        },
        indent=2,
    )


def decide(
    app: ApplicationPropagation,
    objects: list[dict[str, Any]],
    profile: Profile,
    settings: Settings,
    explain: bool,
) -> Decision:
    """One scheduling decision for ``app`` against ``objects`` (MemberClusters, Fleets,
    TenantQuotas, ResourceInterpreters, Namespaces), as the controller would make it;
    raises FleetNotFound."""
    members = {o["metadata"]["name"]: o for o in objects if o.get("kind") == "MemberCluster"}
    fleets = {
        o["metadata"]["name"]: fleetstatus.fleet_members(o, members)
        for o in objects
        if o.get("kind") == "Fleet"
    }
    snapshot = build_snapshot(ClusterInfoCache().infos(members.values()), fleets, generation=1)
    namespace = app.metadata.get("namespace", "default")
    namespace_labels = next(
        (
            o["metadata"].get("labels") or {}
            for o in objects
            if o.get("kind") == "Namespace" and o["metadata"].get("name") == namespace
        ),
        None,
    )
    kinds = [(s.api_version, s.kind) for s in app.spec.resources.selectors]
    scheduler = Scheduler(
        profile,
        stale_after_s=settings.snapshot_stale_after_s,
        fresh_for_s=settings.snapshot_fresh_for_s,
    )
    return place(
        scheduler,
        snapshot,
        app,
        demand_of(app.spec.resources.manifests, kinds, interpreters=interpreters_of(objects)),
        [o for o in objects if o.get("kind") == "TenantQuota"],
        namespace_labels,
        age_s=0.0,
        explain=explain,
    )


def interpreters_of(objects: list[dict[str, Any]]) -> Interpreters:
    """The rules in force with the ResourceInterpreters among ``objects`` (those that do
    not compile are left out, as the controller leaves them)."""
    rules = Interpreters()
    for obj in objects:
        if obj.get("kind") == "ResourceInterpreter":
            rules.set(obj)
    return rules


def decision_text(decision: Decision, app: ApplicationPropagation, as_json: bool) -> str:
    """The decision as ``--json`` or ``--explain`` prints it."""
    current = current_placement(app)
    return _decision_json(decision, current) if as_json else explain(decision, current)


def _run(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(args)
        profile = build_profile(settings.scheduler_plugins)
        app = _application(args.filename)

        async def decided(
            hub: KubeConnection | None, objects: list[dict[str, Any]]
        ) -> tuple[Decision, list[dict[str, Any]] | None]:
            decision = decide(app, objects, profile, settings, args.explain or args.json)
            if args.render is None:
                return decision, None
            rules = interpreters_of(objects)
            return decision, await render_one(
                app, objects, decision, args.render, settings, hub, rules
            )

        if args.fleet_file:
            fleet = objects_in(args.fleet_file)
            decision, rendered = anyio.run(decided, None, fleet)
        else:
            decision, rendered = _live(args, decided)
    except RENDER_FAILURES as exc:
        print(f"propagator schedule: --render {args.render}: {exc}", file=sys.stderr)
        return 1
    except (
        InputError,
        SettingsError,
        PluginError,
        KubeconfigError,
        ApiError,
        UnknownKind,
        FleetNotFound,
    ) as exc:
        print(f"propagator schedule: {exc}", file=sys.stderr)
        return 2
    if rendered is not None:
        print(as_yaml(rendered), end="")
    elif args.json or args.explain:
        print(decision_text(decision, app, args.json))
    else:
        for p in decision.placed:
            print(f"{p.cluster}\tlayer={p.layer}\treplicas={p.replicas}\tscore={p.score}")
        print(f"{'Scheduled' if decision.schedulable else 'Unschedulable'}: {decision.summary}")
    return 0 if decision.schedulable else 1
