"""A Pull member's agent as a process (``propagator agent``), and a TCP relay between it
and the hub that can be cut, as a firewall would."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
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


class Relay:
    """Forwards TCP connections from a local port to ``target``; :meth:`cut` closes every
    connection and refuses new ones until :meth:`restore`."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self._stop = threading.Event()
        self.restore()

    @property
    def address(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):  # (wakes the thread blocked in accept)
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self.cut()

    def _accept(self, listener: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        sel = selectors.DefaultSelector()
        sel.register(a, selectors.EVENT_READ, b)
        sel.register(b, selectors.EVENT_READ, a)
        try:
            while True:
                for key, _ in sel.select():
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                    if not data:
                        return
                    key.data.sendall(data)
        except OSError:
            return
        finally:
            sel.close()
            a.close()
            b.close()
