"""``propagator run``: the hub controller."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import secrets
import signal
import socket
import sys
from typing import Any

import anyio

from fleet.snapshotstore import SnapshotStore
from kube.kubeconfig import KubeconfigError
from propagator.cli.hub import connect_hub
from propagator.fleetmanager import FleetManager
from propagator.observability import logs
from propagator.observability.liveness import Liveness
from propagator.observability.metrics import Metrics
from propagator.observability.server import endpoints
from propagator.observability.tracing import configure_tracing, shutdown_tracing
from propagator.propagation.controller import PropagationController
from propagator.runtime import collector, eventloop
from propagator.runtime.leader import LeaderElector, LeadershipLost, LeaseConfig
from propagator.runtime.ownership import Ownership
from propagator.runtime.shardplan import BUCKETS
from propagator.runtime.shards import ShardRuntime, ShardsLost, replica_lease
from propagator.scheduler import PluginError, Profile, build_profile
from propagator.settings import Settings, SettingsError, add_setting_flags, load_settings

log = logging.getLogger("propagator")
LEASE_NAME = "propagator-controller"
SHUTDOWN_GRACE_S = 10.0
"""On SIGTERM, reconciles in flight get this long to finish and write their status."""


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "run",
        help="run the hub controller: fleet manager and propagation controller",
        description="Run the Propagator controller against the hub. Settings come from "
        "PROPAGATOR_* environment variables; flags override them.",
    )
    add_setting_flags(parser)
    parser.set_defaults(run=_run)


async def run_controller(settings: Settings, profile: Profile) -> None:
    """Run the controller, with its metrics and health servers, until SIGTERM or SIGINT."""
    hub = connect_hub(settings)
    metrics = Metrics()
    store = SnapshotStore()
    shards: ShardRuntime | None = None
    ownership = Ownership()
    if settings.sharding:
        ownership = Ownership(everything=False, deadline_s=settings.leader_renew_deadline_s)
    manager = FleetManager(hub, settings, store, metrics, ownership)
    controller = PropagationController(hub, settings, store, manager, profile, metrics, ownership)
    liveness = Liveness(hub, settings.liveness_stall_s, settings.hub_lost_after_s)
    elector = None
    holder = _lease_holder(settings)
    if settings.sharding:
        name = settings.replica()
        shards = ShardRuntime(
            hub,
            name,
            replica_lease(settings.namespace, name, holder),
            ownership,
            lambda: manager.ready() and controller.not_ready() is None,
        )
        _share_metrics(metrics, shards)
    elif settings.leader_elect:
        elector = LeaderElector(
            hub,
            dataclasses.replace(holder, namespace=settings.namespace, name=LEASE_NAME),
        )
    if shards is None:

        def leads() -> bool:
            return elector is None or elector.is_leader

        metrics.leader.set_function(lambda: 1.0 if leads() else 0.0)
        metrics.shard_buckets.set_function(lambda: float(BUCKETS) if leads() else 0.0)

    def not_ready() -> str | None:
        """A standby is ready once it follows the Lease; the leader once it has listed and
        its render workers have started."""
        if elector is not None and not elector.is_leader:
            return None if elector.observing() else "the hub's Lease has not been read yet"
        if not manager.ready():
            return "the fleet manager's hub watches have not listed yet"
        return controller.not_ready()

    servers = endpoints(
        settings.bind_address,
        settings.metrics_port,
        settings.health_port,
        metrics.registry,
        liveness.problem,
        not_ready,
    )
    try:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_stop_on_signal, signals, tg.cancel_scope, controller)
                tg.start_soon(liveness.run)
                # Frozen garbage cycles freed, between rollouts rather than in one.
                tg.start_soon(collector.thaw_periodically, collector.THAW_EVERY_S, controller.busy)
                if elector is not None:
                    log.info("waiting to lead (lease %s/%s)", settings.namespace, LEASE_NAME)
                    await elector.acquire()
                    tg.start_soon(elector.keep)
                await tg.start(manager.run)
                await tg.start(controller.run)
                if shards is not None:
                    # Nothing is this replica's until the shard table says so.
                    tg.start_soon(shards.run)
                    log.info("shard replica %s (%s) started", shards.name, holder.identity)
                log.info("controller started against %s", hub.server)
    finally:
        with anyio.move_on_after(SHUTDOWN_GRACE_S, shield=True):
            if elector is not None:
                await elector.release()  # the next candidate takes over at once
            if shards is not None and shards.running and shards.ownership.confirmed():
                # A clean stop: the others take over at once. (One that lost the hub
                # stops at once: the others wait its Lease out.)
                await shards.leave(SHUTDOWN_GRACE_S / 2)
            await hub.close()
        for server in servers:
            server.shutdown()


def _lease_holder(settings: Settings) -> LeaseConfig:
    """This process as a Lease holder: its identity, and the leader_* timings (the
    leader's Lease and the shards' alike); namespace and name are the Lease's to set."""
    return LeaseConfig(
        namespace="",
        name="",
        identity=f"{socket.gethostname()}_{os.getpid()}_{secrets.token_hex(3)}",
        lease_duration_s=settings.leader_lease_duration_s,
        renew_deadline_s=settings.leader_renew_deadline_s,
        retry_period_s=settings.leader_retry_period_s,
    )


def _share_metrics(metrics: Metrics, shards: ShardRuntime) -> None:
    """This replica's share, as the Fleet dashboard shows it per replica."""
    ownership = shards.ownership
    metrics.leader.set_function(lambda: 1.0 if ownership.share() else 0.0)
    metrics.shard_buckets.set_function(lambda: float(ownership.share()))
    metrics.shard_designated.set_function(lambda: float(shards.designated))
    metrics.shard_replicas.set_function(lambda: float(len(shards.replicas)))


async def _stop_on_signal(
    signals: Any, scope: anyio.CancelScope, controller: PropagationController
) -> None:
    async for signum in signals:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        await controller.drain(SHUTDOWN_GRACE_S)
        scope.cancel()
        return


def _run(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(args)
        if settings.sharding:
            settings.replica()  # a host name that cannot name a replica stops here
    except SettingsError as exc:
        print(f"propagator run: {exc}", file=sys.stderr)
        return 2
    try:
        eventloop.check(settings.event_loop)
    except eventloop.EventLoopUnavailable as exc:
        print(f"propagator run: PROPAGATOR_EVENT_LOOP / --event-loop: {exc}", file=sys.stderr)
        return 2
    try:
        # Plugins are checked at start: an unknown or repeated name stops the controller.
        profile = build_profile(settings.scheduler_plugins)
    except PluginError as exc:
        print(f"propagator run: {exc}", file=sys.stderr)
        return 2
    logs.configure(settings.log_format, settings.log_level)
    configure_tracing(
        settings.trace_exporter,
        settings.otlp_target() if settings.trace_exporter == "otlp" else None,
    )
    log.info("scheduler plugins: %s", ", ".join(profile.names))
    collector.install()
    try:
        eventloop.run(run_controller, settings, profile, event_loop=settings.event_loop)
    except (KubeconfigError, OSError) as exc:
        print(f"propagator run: {exc}", file=sys.stderr)
        return 2
    except BaseExceptionGroup as group:
        lost = group.subgroup((LeadershipLost, ShardsLost))
        if lost is None:
            raise
        print(f"propagator run: {lost.exceptions[0]}; stopping", file=sys.stderr)
        return 1
    finally:
        shutdown_tracing()
    return 0
