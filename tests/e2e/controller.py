"""Running the real ``propagator`` CLI (and the ``propagator run`` controller) in e2e tests."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from fleet.local import HUB
from tests.e2e.conftest import Fleet
from tests.e2e.waiting import HANG_GUARD_S

# Frequent probes so the tests wait little (docs/reference/settings.md has the defaults); a generous
# timeout so a loaded CI machine does not flap the members.
FAST_PROBES = {
    "PROPAGATOR_PROBE_INTERVAL_S": "1",
    "PROPAGATOR_PROBE_TIMEOUT_S": "3",
    "PROPAGATOR_PROBE_FAILURE_THRESHOLD": "3",
    "PROPAGATOR_PROBE_SUCCESS_THRESHOLD": "2",
    "PROPAGATOR_UNREACHABLE_AFTER_S": "3",
}


def propagator(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "propagator.cli.main", *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class Controller:
    """``propagator run`` against the session hub, as a child process with its own log."""

    def __init__(
        self,
        fleet: Fleet,
        log_dir: Path,
        env: dict[str, str] | None = None,
        hub_args: list[str] | None = None,
    ) -> None:
        """``hub_args``: how it finds the hub (default: ``--hub-kubeconfig`` of the session
        hub; ``[]``: the way it would in a pod, or from $KUBECONFIG)."""
        self.fleet = fleet
        self.log = log_dir / "controller.log"
        self.hub_args = (
            ["--hub-kubeconfig", str(fleet.kubeconfig(HUB))] if hub_args is None else hub_args
        )
        self.metrics_port = free_port()
        self.health_port = free_port()
        self.env = {
            **os.environ,
            **FAST_PROBES,
            "PROPAGATOR_BIND_ADDRESS": "127.0.0.1",
            "PROPAGATOR_METRICS_PORT": str(self.metrics_port),
            "PROPAGATOR_HEALTH_PORT": str(self.health_port),
            **(env or {}),
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "propagator.cli.main",
                    "run",
                    *self.hub_args,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
            )

    def stop(self) -> float:
        """SIGTERM, and the controller must exit 0; returns the seconds it took."""
        assert self.proc is not None
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=HANG_GUARD_S)
        took = time.monotonic() - started
        self.proc = None
        assert code == 0, f"controller exited {code}:\n{self.log_tail()}"
        return took

    def ready(self) -> tuple[int, str]:
        """``/readyz``: (status, body)."""
        return http_get(self.health_port, "/readyz")

    def kill(self) -> None:
        """SIGKILL: no clean-up, no lease release, as when a node dies."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=HANG_GUARD_S)
        self.proc = None

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def scrape(self) -> dict[str, float]:
        """``/metrics`` as {series: value}."""
        status, text = http_get(self.metrics_port, "/metrics")
        assert status == 200
        return {
            line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line and not line.startswith("#")
        }


@contextlib.contextmanager
def running(fleet: Fleet, log_dir: Path, env: dict[str, str] | None = None) -> Iterator[Controller]:
    """A started controller, stopped (and required to exit 0) at the end unless a test
    stopped or killed it itself."""
    controller = Controller(fleet, log_dir, env)
    controller.start()
    try:
        yield controller
    finally:
        if controller.proc is not None:
            controller.stop()


def kubectl_propagator(
    fleet: Fleet, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``kubectl propagator ...`` as a user runs it: kubectl finds the plugin on the PATH."""
    plugin_dir = str(Path(sys.executable).parent)  # where kubectl-propagator is installed
    path = f"{plugin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, **(env or {}), "PATH": path}
    env["KUBECONFIG"] = str(fleet.kubeconfig(HUB))
    return subprocess.run(
        [str(fleet.binaries / "kubectl"), "propagator", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )
