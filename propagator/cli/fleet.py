"""``propagator fleet join|unjoin``: register member clusters on the hub."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from fleet.pulljoin import agent_kubeconfig, plan_member_unjoin, plan_pull_join, pull_join
from fleet.registration import (
    JoinError,
    JoinPlan,
    UnjoinPlan,
    join,
    plan_join,
    unjoin,
    verify_member,
)
from kube.connection import KubeConnection
from kube.credentials import tls_problem
from kube.kubeconfig import KubeconfigError, load_kubeconfig
from propagator.cli.hub import connect_hub
from propagator.settings import Settings, SettingsError, add_setting_flags, load_settings

PROG = "propagator fleet"
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
        help="join a member: its kubeconfig in a Secret (Push), or its agent's identity (Pull)",
        description="Push (the default): check the member's kubeconfig and the member "
        "itself, then write a Secret (in the controller namespace), the MemberCluster and, "
        "with --fleet, the fleet membership. Pull: write the member's hub namespace, its "
        "agent's least-privilege identity and its MemberCluster, and a kubeconfig with a "
        "short-lived bootstrap token for its agent. Nothing is written if any check fails.",
    )
    add_join_flags(j, "--kubeconfig", "--context")
    add_setting_flags(j, _HUB_FLAGS)
    j.set_defaults(run=_join)

    u = sub.add_parser("unjoin", help="remove a member: MemberCluster, Secret, fleet entries")
    u.add_argument("name", metavar="NAME", help="MemberCluster name")
    u.add_argument("--dry-run", action="store_true", help="show what would be removed")
    add_setting_flags(u, _HUB_FLAGS[:2])
    u.set_defaults(run=_unjoin)


def add_join_flags(parser: argparse.ArgumentParser, kubeconfig: str, context: str) -> None:
    """``join``'s arguments; the member's kubeconfig and context under the flag names
    given (the kubectl plugin's own --kubeconfig names the hub)."""
    parser.add_argument("name", metavar="NAME", help="MemberCluster name")
    parser.add_argument(
        kubeconfig,
        dest="member_kubeconfig",
        type=Path,
        help="the member's kubeconfig (Push; required then)",
    )
    parser.add_argument(
        context, dest="member_context", help="context of that kubeconfig (default: current)"
    )
    parser.add_argument("--fleet", help="add the member to this Fleet (created if missing)")
    parser.add_argument("--layer", help="scheduling layer, a DNS label (default: default)")
    parser.add_argument("--region", help="region of the member")
    parser.add_argument("--zone", help="zone of the member")
    parser.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="label of the MemberCluster (repeatable)",
    )
    parser.add_argument(
        "--member-namespace",
        dest="namespaces",
        action="append",
        default=[],
        metavar="NAMESPACE",
        help="use the member only in this namespace, which must exist (repeatable; "
        "default: the whole cluster)",
    )
    parser.add_argument(
        "--mode",
        choices=("Push", "Pull"),
        default="Push",
        help="Push: the hub writes to the member with its kubeconfig; Pull: an agent in the "
        "member takes its work from the hub (default: Push)",
    )
    parser.add_argument(
        "--agent-kubeconfig",
        type=Path,
        metavar="FILE",
        help="Pull: where to write the agent's hub kubeconfig, readable by you only "
        "(default: NAME-hub.kubeconfig)",
    )
    parser.add_argument(
        "--hub-server",
        metavar="URL",
        help="Pull: the hub's address as the agent reaches it (default: the one you use)",
    )
    parser.add_argument(
        "--bootstrap-ttl",
        type=int,
        default=3600,
        metavar="SECONDS",
        help="Pull: lifetime of the agent's bootstrap token (600 to 86400; default 3600)",
    )
    parser.add_argument("--dry-run", action="store_true", help="check everything, write nothing")
    parser.set_defaults(kubeconfig_flag=kubeconfig)


@dataclass(frozen=True)
class JoinRequest:
    """What ``join`` was asked to do (the command-line flags of either CLI)."""

    name: str
    kubeconfig: Path | None
    context: str | None = None
    fleet: str | None = None
    layer: str | None = None
    region: str | None = None
    zone: str | None = None
    labels: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    dry_run: bool = False
    kubeconfig_flag: str = "--kubeconfig"
    """The flag that named the member's kubeconfig, for the messages."""
    mode: str = "Push"
    agent_kubeconfig: Path | None = None
    hub_server: str | None = None
    bootstrap_ttl_s: int = 3600

    @classmethod
    def of(cls, args: argparse.Namespace) -> JoinRequest:
        """From the arguments of ``add_join_flags``."""
        return cls(
            args.name,
            args.member_kubeconfig,
            args.member_context,
            args.fleet,
            args.layer,
            args.region,
            args.zone,
            tuple(args.label),
            tuple(args.namespaces),
            args.dry_run,
            args.kubeconfig_flag,
            args.mode,
            args.agent_kubeconfig,
            args.hub_server,
            args.bootstrap_ttl,
        )


def _fail(prog: str, message: str) -> int:
    print(f"{prog}: {message}", file=sys.stderr)
    return 1


def _labels(pairs: tuple[str, ...]) -> dict[str, str]:
    labels = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise JoinError(f"--label {pair!r}: expected KEY=VALUE")
        labels[key] = value
    return labels


def _print_plan(lines: list[str], dry_run: bool) -> None:
    verb = "Would write" if dry_run else "Wrote"
    print(f"{verb}:")
    for line in lines:
        print(f"  {line}")


def join_member(request: JoinRequest, settings: Settings, prog: str) -> int:
    """Check the member and its kubeconfig, then write its Secret, MemberCluster and
    fleet entry on the hub ``settings`` name (nothing when a check fails); prints the
    plan. Returns the exit code."""
    if request.mode == "Pull":
        return _join_pull(request, settings, prog)
    path, flag = request.kubeconfig, request.kubeconfig_flag
    if path is None:
        return _fail(prog, f"{flag} is required for a Push member (or use --mode Pull)")
    try:
        try:
            text = path.read_text()
        except OSError as exc:
            return _fail(prog, f"{flag} {path}: {exc.strerror or exc}")
        except UnicodeDecodeError:
            return _fail(prog, f"{flag} {path}: not UTF-8 text (is it a kubeconfig?)")
        loaded = load_kubeconfig(
            text,
            source=f"{flag} {path}",
            context=request.context,
            base_dir=path.resolve().parent,
            allow_exec=settings.allow_exec_kubeconfigs,
        )
        if problem := tls_problem(loaded.credentials):
            return _fail(prog, f"{flag} {path}: {problem}")
        planned = partial(
            plan_join,
            namespace=settings.namespace,
            fleet=request.fleet,
            layer=request.layer,
            region=request.region,
            zone=request.zone,
            labels=_labels(request.labels),
            namespaces=request.namespaces,
        )
        planned(request.name, loaded, "unknown")  # flags first, before any call

        async def run() -> JoinPlan:
            version = await verify_member(
                request.name, loaded, settings.member_connection(), request.namespaces
            )
            plan = planned(request.name, loaded, version)
            hub = connect_hub(settings)
            try:
                await join(hub, plan, dry_run=request.dry_run)
            finally:
                await hub.close()
            return plan

        plan = anyio.run(run)
    except (KubeconfigError, JoinError) as exc:
        return _fail(prog, str(exc))
    _print_plan(plan.describe(), request.dry_run)
    return 0


def _join_pull(request: JoinRequest, settings: Settings, prog: str) -> int:
    """Join a Pull member (see :mod:`fleet.pulljoin`); writes the agent's kubeconfig."""
    if request.kubeconfig is not None:
        return _fail(
            prog,
            f"{request.kubeconfig_flag}: a Pull member's kubeconfig stays in the member "
            "(its agent uses it); the hub holds none",
        )
    out = request.agent_kubeconfig or Path(f"{request.name}-hub.kubeconfig")
    if request.hub_server is not None and not request.hub_server.startswith("https://"):
        return _fail(prog, f"--hub-server {request.hub_server!r}: expected https://HOST[:PORT]")
    try:
        plan = plan_pull_join(
            request.name,
            fleet=request.fleet,
            layer=request.layer,
            region=request.region,
            zone=request.zone,
            labels=_labels(request.labels),
            namespaces=request.namespaces,
            bootstrap_ttl_s=request.bootstrap_ttl_s,
        )

        async def run() -> str:
            hub = connect_hub(settings)
            try:
                token = await pull_join(hub, plan, dry_run=request.dry_run)
            finally:
                await hub.close()
            if not token:
                return ""
            return agent_kubeconfig(
                request.name, request.hub_server or hub.server, hub.ca_data, token
            )

        config = anyio.run(run)
    except (KubeconfigError, JoinError) as exc:
        return _fail(prog, str(exc))
    _print_plan(plan.describe(), request.dry_run)
    if config:
        try:
            fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as file:
                file.write(config)
        except OSError as exc:
            return _fail(prog, f"--agent-kubeconfig {out}: {exc.strerror or exc}")
        print(
            f"The agent's hub kubeconfig (bootstrap token valid {request.bootstrap_ttl_s} s): "
            f"{out}\nRun the agent in the member with it, e.g.:\n"
            f"  propagator agent --agent-cluster {request.name} --agent-hub-kubeconfig {out} "
            "--agent-member-kubeconfig MEMBER_KUBECONFIG --agent-state-dir DIR"
        )
    return 0


def unjoin_member(name: str, dry_run: bool, settings: Settings, prog: str) -> int:
    """Remove the member's MemberCluster, Secret and fleet entries from the hub
    ``settings`` name; prints what goes. Returns the exit code."""

    async def run(hub: KubeConnection) -> UnjoinPlan:
        try:
            plan = await plan_member_unjoin(hub, name)
            await unjoin(hub, plan, dry_run=dry_run)
        finally:
            await hub.close()
        return plan

    try:
        plan = anyio.run(run, connect_hub(settings))
    except (KubeconfigError, JoinError) as exc:
        return _fail(prog, str(exc))
    _print_plan(plan.describe(), dry_run)
    return 0


def _join(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(args)
    except SettingsError as exc:
        return _fail(PROG, str(exc))
    return join_member(JoinRequest.of(args), settings, PROG)


def _unjoin(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(args)
    except SettingsError as exc:
        return _fail(PROG, str(exc))
    return unjoin_member(args.name, args.dry_run, settings, PROG)
