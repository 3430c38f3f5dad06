"""``propagator fleet join|unjoin``: register member clusters on the hub."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import anyio

from fleet.connection import KubeConnection, tls_problem
from fleet.kubeconfig import KubeconfigError, load_kubeconfig
from fleet.registration import (
    JoinError,
    JoinPlan,
    UnjoinPlan,
    join,
    plan_join,
    plan_unjoin,
    unjoin,
    verify_member,
)
from propagator.settings import Settings, SettingsError, add_setting_flags, load_settings

_HUB_FLAGS = [
    "hub_kubeconfig",
    "hub_context",
    "namespace",
    "allow_exec_kubeconfigs",
    "member_connect_timeout_s",
    "member_read_timeout_s",
]


def register(commands: Any) -> None:
    parser = commands.add_parser("fleet", help="join member clusters to the hub, or remove them")
    sub = parser.add_subparsers(dest="fleet_command", metavar="ACTION", required=True)

    j = sub.add_parser(
        "join",
        help="store a member's kubeconfig in a Secret and create its MemberCluster",
        description="Check the member's kubeconfig and the member itself, then write a "
        "Secret (in the controller namespace), the MemberCluster and, with --fleet, the "
        "fleet membership. Nothing is written if any check fails.",
    )
    j.add_argument("name", metavar="NAME", help="MemberCluster name")
    j.add_argument("--kubeconfig", type=Path, required=True, help="the member's kubeconfig")
    j.add_argument("--context", help="context of that kubeconfig (default: current)")
    j.add_argument("--fleet", help="add the member to this Fleet (created if missing)")
    j.add_argument("--layer", help="scheduling layer, a DNS label (default: default)")
    j.add_argument("--region", help="region of the member")
    j.add_argument("--zone", help="zone of the member")
    j.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="label of the MemberCluster (repeatable)",
    )
    j.add_argument("--dry-run", action="store_true", help="check everything, write nothing")
    add_setting_flags(j, _HUB_FLAGS)
    j.set_defaults(run=_join)

    u = sub.add_parser("unjoin", help="remove a member: MemberCluster, Secret, fleet entries")
    u.add_argument("name", metavar="NAME", help="MemberCluster name")
    u.add_argument("--dry-run", action="store_true", help="show what would be removed")
    add_setting_flags(u, _HUB_FLAGS[:2])
    u.set_defaults(run=_unjoin)


def _fail(message: str) -> int:
    print(f"propagator fleet: {message}", file=sys.stderr)
    return 1


def _labels(pairs: list[str]) -> dict[str, str]:
    labels = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise JoinError(f"--label {pair!r}: expected KEY=VALUE")
        labels[key] = value
    return labels


def _hub(settings: Settings) -> KubeConnection:
    return settings.hub()


def _print_plan(lines: list[str], dry_run: bool) -> None:
    verb = "Would write" if dry_run else "Wrote"
    print(f"{verb}:")
    for line in lines:
        print(f"  {line}")


def _join(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(args)
        try:
            text = args.kubeconfig.read_text()
        except OSError as exc:
            return _fail(f"--kubeconfig {args.kubeconfig}: {exc.strerror or exc}")
        except UnicodeDecodeError:
            return _fail(f"--kubeconfig {args.kubeconfig}: not UTF-8 text (is it a kubeconfig?)")
        loaded = load_kubeconfig(
            text,
            source=f"--kubeconfig {args.kubeconfig}",
            context=args.context,
            base_dir=args.kubeconfig.resolve().parent,
            allow_exec=settings.allow_exec_kubeconfigs,
        )
        if problem := tls_problem(loaded.credentials):
            return _fail(f"--kubeconfig {args.kubeconfig}: {problem}")
        labels = _labels(args.label)
        plan_args = dict(
            namespace=settings.namespace,
            fleet=args.fleet,
            layer=args.layer,
            region=args.region,
            zone=args.zone,
            labels=labels,
        )
        plan_join(args.name, loaded, "unknown", **plan_args)  # flags first, before any call

        async def run() -> JoinPlan:
            version = await verify_member(args.name, loaded, settings.member_connection())
            plan = plan_join(args.name, loaded, version, **plan_args)
            hub = _hub(settings)
            try:
                await join(hub, plan, dry_run=args.dry_run)
            finally:
                await hub.close()
            return plan

        plan = anyio.run(run)
    except (SettingsError, KubeconfigError, JoinError) as exc:
        return _fail(str(exc))
    _print_plan(plan.describe(), args.dry_run)
    return 0


def _unjoin(args: argparse.Namespace) -> int:

    async def run(hub: KubeConnection) -> UnjoinPlan:
        try:
            plan = await plan_unjoin(hub, args.name)
            await unjoin(hub, plan, dry_run=args.dry_run)
        finally:
            await hub.close()
        return plan

    try:
        plan = anyio.run(run, _hub(load_settings(args)))
    except (SettingsError, KubeconfigError, JoinError) as exc:
        return _fail(str(exc))
    _print_plan(plan.describe(), args.dry_run)
    return 0
