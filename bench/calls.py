"""The controller's cost per API call: sequential calls over one HTTP/2 connection.

An HTTP/2 server over TLS (tests/kube/h2server.py) runs in a child process; this process makes
N sequential GETs (with a service account's bearer token) and reports its own CPU time
per call (the server's is not counted) and the wall time per call (p50, p99), three ways,
in the same run:

- ``direct``: ``KubeConnection.request`` as the controller calls it (straight through the
  HTTP/2 transport, without httpx's request and response objects), with six watches open
  on the connection as a member has;
- ``httpx``: the same transport through httpx's client (as watches go), six watches open;
- ``httpcore``: httpx's client on httpcore's own HTTP/2, the baseline, without watches
  (httpcore's HTTP/2 cannot carry them: see docs/architecture.md);

and ``direct POST``: the direct way with a body the size of an apply's (a stamped
ConfigMap, ~0.5 KiB), as most of a rollout's calls are; and ``watch event``: this
process's CPU per event of a watch (``KubeConnection.stream``) whose server sends one
every 10 ms, each in a frame of its own, as a member's caches mostly receive them (the
event is tiny: what is measured is the transport's share, not JSON's).

    python -m bench.calls [--quick] [--json] [--calls N]
"""

from __future__ import annotations

import argparse
import contextlib
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

from bench.report import arguments, emit, percentile
from kube.connection import KubeConnection
from kube.kubeconfig import Credentials
from kube.session import ConnectionOptions
from propagator.runtime import eventloop

WATCHES = 6
APPLY_BODY = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {
        "name": "object-1",
        "namespace": "bench-far-0001",
        "labels": {
            "propagator.io/application": "scale.everywhere",
            "propagator.io/member-cluster": "far-0001",
        },
        "annotations": {
            "propagator.io/application": "scale/everywhere",
            "propagator.io/owner-uid": "2f1c3a52-6b1e-4f0e-9d3c-0c5d7e8f9a10",
            "propagator.io/revision": "ab0807dc73392c5d",
        },
    },
    "data": {"index": "1"},
}
"""What a rollout's apply sends (the /echo route answers the body's size)."""
TOKEN = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ." + "x" * 900
"""A bearer token as long as a service account's (a JWT of ~1 KB): sent on every call."""


def _serve(directory: Path) -> None:
    from tests.kube.h2server import H2Server

    async def main() -> None:
        server = H2Server(directory)
        async with anyio.create_task_group() as tg:
            await tg.start(server.serve)
            (directory / "ca.pem").write_bytes(server.ca_pem)
            (directory / "port").write_text(str(server.port))

    anyio.run(main)


async def _watch_events(server: str, ca: bytes, events: int) -> dict[str, Any]:
    """This process's CPU per event of ``/watch`` (one every 10 ms), six idle watches
    beside it on the connection."""
    creds = Credentials(server=server, ca_data=ca, token=TOKEN)
    conn = KubeConnection("bench", creds, ConnectionOptions())
    seen = 0
    cpu0 = 0.0
    async with anyio.create_task_group() as tg:
        for _ in range(WATCHES):
            tg.start_soon(_idle_watch, conn)
        # Closed on leaving: a stream left to the garbage collector keeps receiving.
        async with contextlib.aclosing(conn.stream("/watch", {}, read_timeout_s=60)) as stream:
            async for _ in stream:
                seen += 1
                if seen == 20:  # connected, caches warm
                    cpu0 = time.process_time()
                elif seen == 20 + events:
                    break
        cpu = time.process_time() - cpu0
        tg.cancel_scope.cancel()
    await conn.close()
    return {"way": "watch event", "calls": events, "cpu_us_per_call": cpu / events * 1e6}


async def _idle_watch(conn: KubeConnection) -> None:
    try:
        async for _ in conn.stream("/idle", {}, read_timeout_s=3600):
            pass
    except Exception:  # ended with the run
        pass


async def _measure(way: str, server: str, ca: bytes, calls: int) -> dict[str, Any]:
    creds = Credentials(server=server, ca_data=ca, token=TOKEN)
    conn = KubeConnection("bench", creds, ConnectionOptions())
    baseline = httpx.AsyncClient(
        base_url=server,
        http2=True,
        verify=ssl.create_default_context(cadata=ca.decode()),
        headers={"Authorization": f"Bearer {TOKEN}"},
    )

    async def call() -> None:
        if way == "direct":
            await conn.request("GET", "/ok")
        elif way == "direct POST":
            await conn.request("POST", "/echo", body=APPLY_BODY)
        elif way == "httpx":
            (await (await conn._http()).get("/ok")).raise_for_status()
        else:
            (await baseline.get("/ok")).raise_for_status()

    walls = []
    async with anyio.create_task_group() as tg:
        if way != "httpcore":
            for _ in range(WATCHES):
                tg.start_soon(_idle_watch, conn)
        for _ in range(20):  # connected, caches warm
            await call()
        cpu0 = time.process_time()
        for _ in range(calls):
            t0 = time.perf_counter()
            await call()
            walls.append(time.perf_counter() - t0)
        cpu = time.process_time() - cpu0
        tg.cancel_scope.cancel()
    await conn.close()
    await baseline.aclose()
    return {
        "way": way,
        "calls": calls,
        "cpu_us_per_call": cpu / calls * 1e6,
        "wall_p50_us": percentile(walls, 50) * 1e6,
        "wall_p99_us": percentile(walls, 99) * 1e6,
    }


def main() -> None:
    def more(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--calls", type=int, default=0, help="calls per way")
        parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)

    args = arguments(__doc__, more=more)
    if args.serve:
        _serve(args.serve)
        return
    calls = args.calls or (500 if args.quick else 3000)
    with tempfile.TemporaryDirectory(prefix="bench-calls-") as tmp:
        directory = Path(tmp)
        server = subprocess.Popen([sys.executable, "-m", "bench.calls", "--serve", tmp])
        try:
            while not (directory / "port").exists():
                time.sleep(0.05)
            address = f"https://127.0.0.1:{(directory / 'port').read_text()}"
            ca = (directory / "ca.pem").read_bytes()
            # On the controller's event loop (the server, a child, on asyncio's).
            rows = [
                eventloop.run(_measure, way, address, ca, calls)
                for way in ("httpcore", "httpx", "direct", "direct POST")
            ]
            rows.append(eventloop.run(_watch_events, address, ca, max(calls // 3, 100)))
        finally:
            server.terminate()
            server.wait()
    for row in rows:
        row["cpu_ratio_to_httpcore"] = row["cpu_us_per_call"] / rows[0]["cpu_us_per_call"]
    emit(
        rows,
        [
            ("way", "way"),
            ("calls", "calls"),
            ("cpu_us_per_call", "CPU us/call"),
            ("cpu_ratio_to_httpcore", "CPU ratio to httpcore's GET"),
            ("wall_p50_us", "wall p50 us"),
            ("wall_p99_us", "wall p99 us"),
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
