"""Many Pull members' agents in one process, for ``bench.scale --pull``: each one the real
agent (``propagator.agent``: its Works watch on the hub, the member sync, its reports and
heartbeat) with its own hub identity (its ServiceAccount's token, its own connection to
the hub through its own latency proxy) and its own connection to its member, limited to
its own namespace there.

    python -m bench.pullagents SPEC.json     (prints "started" once every agent runs)

SPEC: a JSON list of {cluster, server, ca, token, member_kubeconfig, namespace, state_dir}.
"""

from __future__ import annotations

import base64
import json
import signal
import sys
from pathlib import Path
from typing import Any

import anyio

from kube.hub import hub_connection
from kube.kubeconfig import Credentials
from propagator.agent.agent import Agent
from propagator.agent.allowlist import Allowlist
from propagator.agent.heartbeat import Heartbeat
from propagator.agent.identity import HubIdentity
from propagator.agent.settings import AgentSettings
from propagator.observability.metrics import Metrics
from propagator.runtime import eventloop


async def _run(spec: list[dict[str, Any]]) -> None:
    settings = AgentSettings(metrics_port=0, health_port=0)
    options = settings.member_connection()
    metrics = Metrics()  # one registry for the process: the agents' counts summed
    async with anyio.create_task_group() as tg:
        for entry in spec:
            creds = Credentials(
                server=entry["server"],
                ca_data=base64.b64decode(entry["ca"]),
                token=entry["token"],
            )
            identity = HubIdentity(
                entry["cluster"], creds, Path(entry["state_dir"]), settings.agent_token_ttl_s
            )
            hub = identity.connection(options)
            local = hub_connection(Path(entry["member_kubeconfig"]), None, options)
            agent = Agent(
                entry["cluster"],
                hub,
                local,
                settings,
                Allowlist(namespaces=frozenset({entry["namespace"]})),
                metrics,
            )
            beat = Heartbeat(
                entry["cluster"],
                hub,
                agent.monitor,
                metrics,
                identity=entry["cluster"],
                duration_s=settings.agent_lease_duration_s,
                probe_timeout_s=settings.probe_timeout_s,
            )
            await tg.start(agent.run)
            tg.start_soon(beat.run)
        print("started", flush=True)
        with anyio.open_signal_receiver(signal.SIGTERM) as signals:
            async for _ in signals:
                tg.cancel_scope.cancel()
                return


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    eventloop.run(_run, spec)


if __name__ == "__main__":
    main()
