"""A Pull member's agent as a process (``propagator agent``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.e2e.controller import free_port, http_get
from tests.e2e.waiting import HANG_GUARD_S

# Frequent retries so the tests wait little.
AGENT_ENV = {
    "PROPAGATOR_RETRY_ATTEMPTS": "1",
    "PROPAGATOR_RETRY_BACKOFF_S": "0.2",
    "PROPAGATOR_RETRY_MAX_BACKOFF_S": "1",
    "PROPAGATOR_REQUEUE_MAX_DELAY_S": "2",
    "PROPAGATOR_PROBE_TIMEOUT_S": "3",
    "PROPAGATOR_MEMBER_CONNECT_TIMEOUT_S": "2",
    "PROPAGATOR_AGENT_LEASE_DURATION_S": "10",
}


class AgentProcess:
    """``propagator agent`` for one Pull member, with its own log and state directory:
    configured by ``env`` (e.g. what the agent's chart sets, and in-cluster variables)."""

    def __init__(self, work_dir: Path, env: dict[str, str]) -> None:
        self.state_dir = work_dir / "state"
        self.log = work_dir / "agent.log"
        self.metrics_port, self.health_port = free_port(), free_port()
        self.env = {
            **os.environ,
            **AGENT_ENV,
            **env,
            "PROPAGATOR_AGENT_STATE_DIR": str(self.state_dir),
            "PROPAGATOR_BIND_ADDRESS": "127.0.0.1",
            "PROPAGATOR_METRICS_PORT": str(self.metrics_port),
            "PROPAGATOR_HEALTH_PORT": str(self.health_port),
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "propagator.cli.main", "agent"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
            )

    def stop(self) -> None:
        """SIGTERM; the agent must exit 0."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=HANG_GUARD_S)
        self.proc = None
        assert code == 0, f"agent exited {code}:\n{self.log_tail()}"

    def ready(self) -> tuple[int, str]:
        return http_get(self.health_port, "/readyz")

    def metrics(self) -> str:
        status, text = http_get(self.metrics_port, "/metrics")
        assert status == 200
        return text

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]

    @property
    def token(self) -> str:
        """The hub token the agent holds now."""
        return (self.state_dir / "hub-token").read_text().strip()
