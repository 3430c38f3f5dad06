"""A hostile member's API server (tests/kube/h2hostile.py, raw frames over TLS in a process of
its own) against the real client, inside a running event loop beside a well-behaved
member: each attack class ends in a retryable error (or, for a watch, a quiet end that
the informer follows with a new watch), the process's memory and CPU stay bounded, and
the well-behaved member's watch never pauses for long."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from kube.connection import KubeConnection
from kube.errors import ApiError
from kube.kubeconfig import Credentials
from kube.session import ConnectionOptions
from propagator.runtime import eventloop
from tests.kube.h2hostile import BEHAVIOURS
from tests.kube.h2server import H2Server
from tests.root import ROOT

CALL_S = 2.0
"""A call's time (headers and body) against the hostile server."""
QUIET_S = 1.0
"""A watch's time between two events against it."""
MAX_PAUSE_S = 0.1
"""The longest the well-behaved member's watch may go without an event (it sends one
every 10 ms)."""
MAX_RSS_GROWTH = 200 << 20
MAX_CPU_S = 1.5
"""CPU this process may spend in one case: the attacks, undefended, kept a core busy for
the whole of a call's time or longer (a CONTINUATION flood, a table-size queue, HPACK)."""


@dataclass(frozen=True)
class Case:
    behaviour: str
    watch: bool
    says: str | None
    """What the retryable error says (a regular expression); None: a watch that ends
    quietly, with no event."""


CASES = [
    Case("ping_flood", False, "ENHANCE_YOUR_CALM"),
    Case("settings_flood", False, "ENHANCE_YOUR_CALM"),
    Case("empty_data_flood", False, "ENHANCE_YOUR_CALM"),
    Case("empty_headers_flood", False, "more than 8 CONTINUATIONs"),
    Case("continuation_flood", False, "more than 8 CONTINUATIONs"),
    # (the stream's reset, or the flood of resets after it if it came in the same read)
    Case("rapid_reset", False, "REFUSED_STREAM|ENHANCE_YOUR_CALM"),
    Case("priority_flood", False, "ENHANCE_YOUR_CALM"),
    Case("window_update_flood", False, "ENHANCE_YOUR_CALM"),
    Case("unknown_frame_flood", False, "ENHANCE_YOUR_CALM"),
    Case("dynamic_table", False, "COMPRESSION_ERROR"),
    Case("huffman_names", False, "Huffman-coded"),
    Case("upper_case_encoding", False, "not a lower-case token"),
    Case("pseudo_header_misplaced", False, ":status after a regular header"),
    Case("trickle_call", False, "timeout"),
    Case("trickle_watch", True, None),
    Case("tiny_frames", True, "ENHANCE_YOUR_CALM"),
    Case("empty_frames_trickled", True, None),
]


def test_every_behaviour_of_the_hostile_server_has_a_case() -> None:
    assert {case.behaviour for case in CASES} == set(BEHAVIOURS)


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@contextlib.contextmanager
def _hostile(tmp_path: Path, behaviour: str) -> Iterator[tuple[int, bytes, Path]]:
    """The hostile server in a process of its own: (port, CA, its report's path)."""
    directory = tmp_path / "hostile"
    directory.mkdir()
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.kube.h2hostile", str(directory), behaviour],
        cwd=ROOT,
    )
    try:
        for _ in range(300):
            if (directory / "port").exists() and (directory / "ca.pem").exists():
                break
            if server.poll() is not None:
                raise AssertionError(f"the hostile server exited ({server.returncode})")
            time.sleep(0.05)
        yield (
            int((directory / "port").read_text()),
            (directory / "ca.pem").read_bytes(),
            (directory / "report.json"),
        )
    finally:
        server.kill()
        server.wait()


@pytest.mark.parametrize("case", CASES, ids=[c.behaviour for c in CASES])
def test_a_hostile_member_costs_the_hub_that_member_only(tmp_path: Path, case: Case) -> None:
    good = H2Server(tmp_path / "good")
    gaps: list[float] = []
    outcome: dict[str, object] = {}
    with _hostile(tmp_path, case.behaviour) as (port, ca, report):

        async def follow_good(conn: KubeConnection, stop: anyio.Event) -> None:
            last = None
            async for _ in conn.stream("/watch", {}, read_timeout_s=10):
                now = time.monotonic()
                if last is not None:
                    gaps.append(now - last)
                last = now
                if stop.is_set():
                    return

        async def attack(conn: KubeConnection) -> None:
            if not case.watch:
                try:
                    await conn.request("GET", "/api/v1/namespaces", timeout_s=CALL_S)
                except ApiError as exc:
                    outcome["error"] = exc
                return
            events = []
            try:
                async for event in conn.stream("/api/v1/pods", {"watch": "1"}, QUIET_S):
                    events.append(event)
            except ApiError as exc:
                outcome["error"] = exc
            outcome["events"] = events
            # Its headers were an answer; the bytes trickled after them (every 50 ms to
            # the end) are not.
            outcome["answered_before_end_s"] = time.monotonic() - (conn.answered_at or 0)

        async def main() -> None:
            async with anyio.create_task_group() as tg:
                await tg.start(good.serve)
                good_conn = KubeConnection(
                    "good",
                    Credentials(f"https://127.0.0.1:{good.port}", ca_data=good.ca_pem, token="t"),
                    ConnectionOptions(),
                )
                bad_conn = KubeConnection(
                    "hostile",
                    Credentials(f"https://127.0.0.1:{port}", ca_data=ca, token="t"),
                    ConnectionOptions(),
                )
                stop = anyio.Event()
                tg.start_soon(follow_good, good_conn, stop)
                await anyio.sleep(0.3)  # the good watch under way
                with anyio.fail_after(60):  # a hang fails the test instead of the run
                    rss, cpu = _rss(), time.process_time()
                    await attack(bad_conn)
                    outcome["cpu"] = time.process_time() - cpu
                    outcome["rss"] = _rss() - rss
                stop.set()
                await anyio.sleep(0.1)
                await bad_conn.close()
                await good_conn.close()
                tg.cancel_scope.cancel()

        eventloop.run(main)
        with contextlib.suppress(OSError):
            print(case.behaviour, "server report:", report.read_text())
    error = outcome.get("error")
    print(case.behaviour, outcome, f"longest pause {max(gaps):.3f}s over {len(gaps)} events")
    if case.says is None:
        assert error is None
        assert outcome["events"] == []
        assert outcome["answered_before_end_s"] > QUIET_S / 2  # type: ignore[operator]
    else:
        assert isinstance(error, ApiError)
        assert re.search(case.says, str(error))
        assert error.retryable
    assert outcome["rss"] < MAX_RSS_GROWTH  # type: ignore[operator]
    assert outcome["cpu"] < MAX_CPU_S  # type: ignore[operator]
    assert len(gaps) > 10
    assert max(gaps) < MAX_PAUSE_S
