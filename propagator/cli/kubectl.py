"""``kubectl propagator``: the kubectl plugin (the ``kubectl-propagator`` command on the
PATH) for what users do to their applications on the hub.

``rebalance NAME``: place the application again from scratch, once (it sets the
``propagator.io/rebalance`` annotation to a new value); its replicas move with the
graceful rules of an eviction. ``--wait`` waits until the controller has acted on it and
prints the new placement.

``sync NAME``: heal the drift an application with ``driftPolicy: Report`` only reports,
once, on every cluster (the ``propagator.io/sync`` annotation); ``--wait`` waits until
every cluster was synced.

``canary promote|abort|retry|status NAME``: act on the application's canary (see
``propagator/cli/canary.py``). ``rollout status|pause|resume|promote|undo NAME``: act on
its rollout, wave by wave (``propagator/cli/rollout.py``). ``status NAME``: the
application in one view.
``explain NAME``: the scheduler's decision for it on the live hub, cluster by cluster.
``join NAME`` / ``unjoin NAME``: add a member cluster to the hub, or remove it.

``build_parser`` is long: it declares the plugin's commands and flags, a table rather
than logic.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from pydantic import ValidationError

from api.application import SYNC_ANNOTATION, ApplicationPropagation
from api.common import API_VERSION, DNS_LABEL_PATTERN, DNS_SUBDOMAIN_PATTERN, duration_seconds
from api.failover import REBALANCE_ANNOTATION
from kube.connection import KubeConnection
from kube.errors import ApiError
from kube.hub import context_namespace, hub_connection
from kube.kubeconfig import KubeconfigError
from propagator.cli.annotate import KIND, fresh_value, request
from propagator.cli.canary import read_status, request_action
from propagator.cli.fleet import JoinRequest, add_join_flags, join_member, unjoin_member
from propagator.cli.parser import KubectlParser
from propagator.cli.render import RENDER_FAILURES, add_render_flag, as_yaml, render_one
from propagator.cli.rollout import NotKept, request_rollout, rollout_status
from propagator.cli.schedule import decide, decision_text, interpreters_of, live_objects
from propagator.cli.showstatus import read_status as application_status
from propagator.propagation.placement import FleetNotFound
from propagator.scheduler import PluginError, build_profile
from propagator.settings import Settings, SettingsError, load_settings


def build_parser() -> argparse.ArgumentParser:
    parser = KubectlParser(
        prog="kubectl propagator",
        description="Act on ApplicationPropagations on the hub. Exit code 0 on success, 1 "
        "when the hub refuses or the wait runs out, 2 on bad input.",
    )
    _hub_flags(parser, None)
    # As with kubectl, the hub flags may also follow the command (`canary promote web -n
    # shop`); there they override only when given.
    after = KubectlParser(add_help=False)
    _hub_flags(after, argparse.SUPPRESS)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    rebalance = commands.add_parser(
        "rebalance",
        parents=[after],
        help="place an application again from scratch, once",
        description="Place the ApplicationPropagation NAME again from scratch: the clusters "
        "it runs on lose their precedence, clusters it was evicted from may take it again, "
        "and replicas that move stay where they are until their replacement is Available "
        "(or the failover grace period passes).",
    )
    rebalance.add_argument("name", metavar="NAME", help="the ApplicationPropagation")
    _wait_flags(rebalance, "wait until the controller has placed it again")
    rebalance.set_defaults(run=_rebalance)
    sync = commands.add_parser(
        "sync",
        parents=[after],
        help="heal an application's reported drift, once",
        description="Apply the ApplicationPropagation NAME again on every cluster, healing "
        "what drifted there (an application with driftPolicy: Report only reports drift "
        "until then, or until it changes).",
    )
    sync.add_argument("name", metavar="NAME", help="the ApplicationPropagation")
    _wait_flags(sync, "wait until every cluster was synced")
    sync.set_defaults(run=_sync)
    canary = commands.add_parser(
        "canary",
        parents=[after],
        help="promote, abort or retry an application's canary, or show it",
        description="promote: open a manual step's gate (the next step starts), or skip "
        "the remaining steps; abort: roll the canary back to the stable revision; retry: run "
        "a rolled-back or aborted revision's steps again; status: where the canary stands, "
        "per canary cluster. Each action is a new value of the propagator.io/canary-action "
        "annotation, which the controller acts on once.",
    )
    canary.add_argument(
        "action", choices=("promote", "abort", "retry", "status"), help="what to do"
    )
    canary.add_argument("name", metavar="NAME", help="the ApplicationPropagation")
    _wait_flags(canary, "wait until the controller has acted on it")
    canary.set_defaults(run=_canary)
    rollout = commands.add_parser(
        "rollout",
        parents=[after],
        help="show, pause, resume, promote or undo an application's rollout",
        description="status: where the rollout stands, wave by wave (with --wait: until it "
        "is complete, exit 0, or halted, exit 1); pause: no further wave starts (with "
        "--suspend: spec.suspend, no writes to any member at all); resume: undo a pause or "
        "a suspension, give a halted wave another deadline, or roll out again the spec's "
        "revision an undo set aside; promote: open a manual wave's gate, or accept the "
        "current or halted wave and go on (with --all: every remaining wave at once); undo: "
        "roll the revision before the current one (or --to-revision N) out, wave by wave. "
        "Each action is a new value of the propagator.io/rollout-action annotation, which "
        "the controller acts on once.",
    )
    rollout.add_argument(
        "action", choices=("status", "pause", "resume", "promote", "undo"), help="what to do"
    )
    rollout.add_argument("name", metavar="NAME", help="the ApplicationPropagation")
    rollout.add_argument(
        "--to-revision", type=_revision, default=None, help="undo: the revision to return to"
    )
    rollout.add_argument("--all", action="store_true", help="promote: every remaining wave")
    rollout.add_argument(
        "--suspend", action="store_true", help="pause: set spec.suspend (no writes at all)"
    )
    _wait_flags(rollout, "wait until the controller has acted (status: until settled)")
    rollout.set_defaults(run=_rollout)
    status = commands.add_parser(
        "status",
        parents=[after],
        help="an application in one view",
        description="Show the ApplicationPropagation NAME: its conditions (the quota's among "
        "them), a line per cluster (applied, health, replicas, attempts, last error), its "
        "canary and the clusters it is kept off.",
    )
    status.add_argument("name", metavar="NAME", help="the ApplicationPropagation")
    status.set_defaults(run=_status)
    explain = commands.add_parser(
        "explain",
        parents=[after],
        help="where the scheduler places an application now, and why",
        description="Run the scheduler for the ApplicationPropagation NAME against the hub's "
        "MemberClusters, Fleets and TenantQuotas as they are now: a line per cluster saying "
        "which plugin filtered it out and why, or its scores, and what would change from "
        "where it runs (status.placement). Exit code 0 when it can be placed, 1 when not.",
    )
    explain.add_argument("name", metavar="NAME", help="the ApplicationPropagation")
    explain.add_argument("--json", action="store_true", help="the decision as JSON")
    add_render_flag(explain)
    explain.set_defaults(run=_explain)
    join = commands.add_parser(
        "join",
        parents=[after],
        help="join a member cluster to the hub",
        description="Check the member's kubeconfig and the member itself, then write a Secret "
        "(in the controller's namespace), the MemberCluster and, with --fleet, the fleet "
        "membership. Nothing is written if any check fails.",
    )
    add_join_flags(join, "--member-kubeconfig", "--member-context")
    _controller_flag(join)
    join.set_defaults(run=_join)
    unjoin = commands.add_parser(
        "unjoin",
        parents=[after],
        help="remove a member cluster from the hub",
        description="Remove the MemberCluster NAME, its kubeconfig Secret and its fleet "
        "entries. What applications ran there stays on the member.",
    )
    unjoin.add_argument("name", metavar="NAME", help="the MemberCluster")
    unjoin.add_argument("--dry-run", action="store_true", help="show what would be removed")
    _controller_flag(unjoin)
    unjoin.set_defaults(run=_unjoin)
    return parser


def _controller_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--controller-namespace",
        help="the controller's namespace on the hub, where member kubeconfig Secrets live "
        "(default: $PROPAGATOR_NAMESPACE or propagator-system)",
    )


def _wait_flags(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--wait", action="store_true", help=what)
    parser.add_argument(
        "--timeout",
        default="60s",
        help="how long --wait waits, as a duration such as 30s or 2m (default 60s)",
    )


def _hub_flags(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument(
        "--kubeconfig", type=Path, default=default, help="the hub's kubeconfig (as kubectl)"
    )
    parser.add_argument(
        "--context", default=default, help="the kubeconfig context to use (as kubectl)"
    )
    parser.add_argument(
        "-n",
        "--namespace",
        default=default,
        help="the application's namespace (default: the context's)",
    )


def _placement(app: dict[str, Any]) -> str:
    placed = (app.get("status") or {}).get("placement") or []
    return ", ".join(
        p["cluster"] + (f"={p['replicas']}" if p.get("replicas") is not None else "")
        for p in placed
    )


async def _request_once(
    hub: KubeConnection,
    namespace: str,
    name: str,
    wait_s: float | None,
    ask: tuple[str, str, str],
    done: Callable[[dict[str, Any]], str],
) -> str:
    """Set annotation ``ask[0]`` (``ask[1]``: the request's name) to a new value; with
    ``wait_s``, until the status field ``ask[2]`` shows it, then ``done(app)``."""
    annotation, what, acted = ask
    value = fresh_value()
    return await request(
        hub,
        namespace,
        name,
        annotation,
        value,
        f"applicationpropagation.propagator.io/{name} {what} requested ({value})",
        lambda app: (app.get("status") or {}).get(acted) == value,
        done,
        wait_s,
    )


async def _request_rebalance(
    hub: KubeConnection, namespace: str, name: str, wait_s: float | None
) -> str:
    return await _request_once(
        hub,
        namespace,
        name,
        wait_s,
        (REBALANCE_ANNOTATION, "rebalance", "rebalanced"),
        lambda app: f"placed again: {_placement(app) or 'nowhere'}",
    )


async def _request_sync(
    hub: KubeConnection, namespace: str, name: str, wait_s: float | None
) -> str:
    return await _request_once(
        hub,
        namespace,
        name,
        wait_s,
        (SYNC_ANNOTATION, "sync", "synced"),
        lambda app: f"synced: {(app.get('status') or {}).get('ready') or '0/0'} clusters ready",
    )


def _sync(args: argparse.Namespace) -> int:
    return _on_hub(
        args,
        "sync",
        lambda hub, namespace: _request_sync(hub, namespace, args.name, _wait_s(args)),
    )


def _bad_input(args: argparse.Namespace) -> str | None:
    """What is wrong with the command line, if anything."""
    if not re.fullmatch(DNS_SUBDOMAIN_PATTERN, args.name) or len(args.name) > 253:
        return f"NAME {args.name!r}: not an object name (lower-case DNS subdomain)"
    if args.namespace is not None and (
        not re.fullmatch(DNS_LABEL_PATTERN, args.namespace) or len(args.namespace) > 63
    ):
        return f"--namespace {args.namespace!r}: not a namespace name (lower-case DNS label)"
    if getattr(args, "wait", False):
        try:
            duration_seconds(args.timeout)
        except ValueError as exc:
            return f"--timeout: {exc}"
    return None


def _wait_s(args: argparse.Namespace) -> float | None:
    return duration_seconds(args.timeout) if args.wait else None


def _rebalance(args: argparse.Namespace) -> int:
    return _on_hub(
        args,
        "rebalance",
        lambda hub, namespace: _request_rebalance(hub, namespace, args.name, _wait_s(args)),
    )


def _status(args: argparse.Namespace) -> int:
    return _on_hub(
        args, "status", lambda hub, namespace: application_status(hub, namespace, args.name)
    )


def _explain(args: argparse.Namespace) -> int:
    try:
        settings = load_settings()
        profile = build_profile(settings.scheduler_plugins)
    except (SettingsError, PluginError) as exc:
        print(f"kubectl propagator explain: {exc}", file=sys.stderr)
        return 2
    schedulable = False

    async def act(hub: KubeConnection, namespace: str) -> str:
        nonlocal schedulable
        obj = await hub.get(API_VERSION, KIND, args.name, namespace)
        objects = await live_objects(hub)
        try:
            app = ApplicationPropagation.model_validate(obj)
            decision = decide(app, objects, profile, settings, explain=True)
        except (ValidationError, FleetNotFound) as exc:
            raise _Refused(str(exc)) from exc
        schedulable = decision.schedulable
        if args.render is None:
            return decision_text(decision, app, args.json)
        rules = interpreters_of(objects)
        try:
            rendered = await render_one(app, objects, decision, args.render, settings, hub, rules)
        except RENDER_FAILURES as exc:
            raise _Refused(f"--render {args.render}: {exc}") from exc
        schedulable = True  # the answer is the objects
        return as_yaml(rendered).rstrip("\n")

    code = _on_hub(args, "explain", act)
    return 1 if code == 0 and not schedulable else code


def _hub_settings(args: argparse.Namespace, command: str) -> Settings | None:
    """The controller's settings (PROPAGATOR_*), on the hub kubectl's flags name."""
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"kubectl propagator {command}: {exc}", file=sys.stderr)
        return None
    namespace = args.controller_namespace or settings.namespace
    if not re.fullmatch(DNS_LABEL_PATTERN, namespace) or len(namespace) > 63:
        print(
            f"kubectl propagator {command}: --controller-namespace {namespace!r}: not a "
            "namespace name (lower-case DNS label)",
            file=sys.stderr,
        )
        return None
    return settings.model_copy(
        update={
            "hub_kubeconfig": args.kubeconfig,
            "hub_context": args.context,
            "namespace": namespace,
        }
    )


def _join(args: argparse.Namespace) -> int:
    settings = _hub_settings(args, "join")
    if settings is None:
        return 2
    return join_member(JoinRequest.of(args), settings, "kubectl propagator join")


def _unjoin(args: argparse.Namespace) -> int:
    settings = _hub_settings(args, "unjoin")
    if settings is None:
        return 2
    return unjoin_member(args.name, args.dry_run, settings, "kubectl propagator unjoin")


def _canary(args: argparse.Namespace) -> int:
    if args.action == "status":
        return _on_hub(
            args, "canary status", lambda hub, namespace: read_status(hub, namespace, args.name)
        )
    return _on_hub(
        args,
        f"canary {args.action}",
        lambda hub, namespace: request_action(
            hub, namespace, args.name, args.action, _wait_s(args)
        ),
    )


def _revision(text: str) -> int:
    if not text.isdigit() or not 0 < len(text) < 10 or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text[:20]!r} is not a revision number (1 or more)")
    return int(text)


def _rollout(args: argparse.Namespace) -> int:
    command = f"rollout {args.action}"
    if args.to_revision is not None and args.action != "undo":
        print(f"kubectl propagator {command}: --to-revision is for undo", file=sys.stderr)
        return 2
    if args.action == "status":
        halted = False

        async def show(hub: KubeConnection, namespace: str) -> str:
            nonlocal halted
            text, halted = await rollout_status(hub, namespace, args.name, _wait_s(args))
            return text

        code = _on_hub(args, command, show)
        return 1 if code == 0 and args.wait and halted else code
    action = "promote-all" if args.action == "promote" and args.all else args.action

    async def act(hub: KubeConnection, namespace: str) -> str:
        try:
            return await request_rollout(
                hub, namespace, args.name, action, _wait_s(args), args.to_revision, args.suspend
            )
        except NotKept as exc:
            raise _Refused(str(exc)) from exc

    return _on_hub(args, command, act)


class _Refused(Exception):
    """The hub answered, but what it holds cannot be acted on (said to the user as is)."""


def _on_hub(
    args: argparse.Namespace,
    command: str,
    act: Callable[[KubeConnection, str], Awaitable[str]],
) -> int:
    """Check the input, run ``act`` against the hub and print its result; the exit code
    (2: bad input, 1: the hub refused or a wait ran out)."""
    if problem := _bad_input(args):
        print(f"kubectl propagator {command}: {problem}", file=sys.stderr)
        return 2
    try:
        namespace = args.namespace or context_namespace(args.kubeconfig, args.context)
        hub = hub_connection(args.kubeconfig, args.context)
    except KubeconfigError as exc:
        print(f"kubectl propagator: {exc}", file=sys.stderr)
        return 2

    async def run() -> str:
        try:
            return await act(hub, namespace or "default")
        finally:
            await hub.close()

    try:
        print(anyio.run(run))
    except _Refused as exc:
        print(f"kubectl propagator {command}: {exc}", file=sys.stderr)
        return 1
    except ApiError as exc:
        where = f"{namespace or 'default'}/{args.name}"
        what = "not found" if exc.not_found else str(exc)
        print(
            f"kubectl propagator {command}: applicationpropagation {where}: {what}",
            file=sys.stderr,
        )
        return 1
    except TimeoutError as exc:
        print(f"kubectl propagator {command}: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the plugin; returns the process exit code."""
    args = build_parser().parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
