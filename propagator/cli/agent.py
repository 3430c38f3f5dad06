"""``propagator agent``: a Pull member's agent, run in (or beside) the member."""

from __future__ import annotations

import argparse
import base64
import logging
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import anyio

from kube.connection import KubeConnection
from kube.errors import ApiError
from kube.hub import hub_connection
from kube.kubeconfig import MAX_KUBECONFIG_BYTES, Credentials, KubeconfigError, load_kubeconfig
from propagator.agent.agent import Agent
from propagator.agent.heartbeat import Heartbeat
from propagator.agent.identity import HubIdentity, IdentityError
from propagator.agent.settings import AGENT_SETTINGS, AgentSettings
from propagator.observability import logs
from propagator.observability.metrics import Metrics
from propagator.observability.server import endpoints
from propagator.runtime import eventloop
from propagator.settings import SettingsError, add_setting_flags, load_settings

log = logging.getLogger("propagator.agent")
PROG = "propagator agent"


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "agent",
        help="run a Pull member's agent: take its work from the hub, apply it, report back",
        description="Run the agent of a Pull member (joined with `propagator fleet join "
        "NAME --mode Pull`). It reads only its cluster's Works on the hub, writes them to "
        "the member with the member's own credentials (refusing what the member does not "
        "allow), and reports their status, the member's capacity and a heartbeat.",
    )
    add_setting_flags(parser, AGENT_SETTINGS, AgentSettings)
    parser.set_defaults(run=_run)


def _from_file(path: Path) -> Credentials:
    source = f"--agent-hub-kubeconfig {path}"
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_KUBECONFIG_BYTES + 1)
    except OSError as exc:
        raise KubeconfigError(f"{source}: {exc.strerror or exc}") from exc
    if len(raw) > MAX_KUBECONFIG_BYTES:
        raise KubeconfigError(f"{source}: larger than a kubeconfig may be")
    return load_kubeconfig(raw.decode(errors="replace"), source=source).credentials


async def _identity(settings: AgentSettings, local: KubeConnection) -> HubIdentity:
    """The agent's hub identity, from its kubeconfig file or its member Secret (where each
    new token is kept too)."""
    state, ttl = settings.agent_state_dir, settings.agent_token_ttl_s
    if settings.agent_hub_kubeconfig is not None:
        creds = _from_file(settings.agent_hub_kubeconfig)
        return HubIdentity(settings.agent_cluster, creds, state, ttl)
    where = settings.hub_secret()
    assert where is not None
    namespace, name = where
    source = f"Secret {namespace}/{name} (--agent-hub-secret) of the member"
    try:
        secret = await local.get("v1", "Secret", name, namespace)
    except ApiError as exc:
        raise IdentityError(f"{source}: {exc}") from exc
    data = secret.get("data") or {}
    try:
        text = base64.b64decode(data.get("kubeconfig") or "", validate=True).decode()
        kept = base64.b64decode(data.get("token") or "", validate=True).decode() or None
    except ValueError as exc:
        raise IdentityError(f"{source}: its data is not base64 text") from exc
    if not text:
        raise IdentityError(f"{source}: has no key kubeconfig (the join's agent kubeconfig)")
    creds = load_kubeconfig(text, source=source).credentials

    async def persist(token: str) -> None:
        patch = {"data": {"token": base64.b64encode(token.encode()).decode()}}
        await local.merge_patch("v1", "Secret", name, patch, namespace=namespace)

    return HubIdentity(settings.agent_cluster, creds, state, ttl, kept, persist)


async def run_agent(settings: AgentSettings) -> None:
    """Run the agent, with its metrics and health servers, until SIGTERM or SIGINT."""
    cluster = settings.agent_cluster
    options = settings.member_connection()
    local = hub_connection(
        settings.agent_member_kubeconfig,
        None,
        options,
        settings.service_account_dir,
        name=cluster,
    )
    identity = await _identity(settings, local)
    hub = identity.connection(options)
    metrics = Metrics()
    allowlist = settings.allowlist()
    agent = Agent(cluster, hub, local, settings, allowlist, metrics)
    heartbeat = Heartbeat(
        cluster,
        hub,
        agent.monitor,
        metrics,
        identity=f"{socket.gethostname()}_{os.getpid()}",
        duration_s=settings.agent_lease_duration_s,
        probe_timeout_s=settings.probe_timeout_s,
    )
    servers = endpoints(
        settings.bind_address,
        settings.metrics_port,
        settings.health_port,
        metrics.registry,
        lambda: None,
        agent.ready,
    )
    log.info(
        "agent of %s: hub %s, member %s; allowed namespaces: %s; kinds: %s",
        cluster,
        hub.server,
        local.server,
        ", ".join(sorted(allowlist.namespaces)) or "any",
        ", ".join(sorted(allowlist.kinds)) or "any",
    )
    try:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_stop_on_signal, signals, tg.cancel_scope)
                tg.start_soon(identity.keep, hub)
                await tg.start(agent.run)
                tg.start_soon(heartbeat.run)
    finally:
        with anyio.move_on_after(5, shield=True):
            await hub.close()
            await local.close()
        for server in servers:
            server.shutdown()


async def _stop_on_signal(signals: Any, scope: anyio.CancelScope) -> None:
    async for signum in signals:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        scope.cancel()
        return


def _run(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(args, AgentSettings)
    except SettingsError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    assert isinstance(settings, AgentSettings)
    if not settings.agent_cluster:
        print(f"{PROG}: PROPAGATOR_AGENT_CLUSTER / --agent-cluster is required", file=sys.stderr)
        return 2
    if settings.agent_hub_kubeconfig is None and not settings.agent_hub_secret:
        print(
            f"{PROG}: PROPAGATOR_AGENT_HUB_KUBECONFIG / --agent-hub-kubeconfig (or "
            "PROPAGATOR_AGENT_HUB_SECRET / --agent-hub-secret) is required: the kubeconfig "
            "`propagator fleet join NAME --mode Pull` wrote",
            file=sys.stderr,
        )
        return 2
    logs.configure(settings.log_format, settings.log_level)
    try:
        eventloop.run(run_agent, settings, event_loop=settings.event_loop)
    except (KubeconfigError, IdentityError, OSError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    return 0
