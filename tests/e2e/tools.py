"""Tools the e2e tests build from pinned Go modules (outside the clone, once): helm,
Prometheus and promtool, Jaeger, the Gateway API CRDs; and stopping what they started."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from tests.e2e.waiting import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]


def built(script: str) -> Path:
    """The directory ``hack/<script>`` prints last (building on first use)."""
    result = subprocess.run(
        ["bash", str(ROOT / "hack" / script)], stdout=subprocess.PIPE, text=True, check=True
    )
    return Path(result.stdout.strip().splitlines()[-1])


def terminate(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM, and SIGKILL if it has not exited within the hang guard."""
    proc.terminate()
    try:
        proc.wait(HANG_GUARD_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def remote_ports(pid: int) -> list[int]:
    """The remote port of each established TCP connection of process ``pid`` (one entry per
    connection), from its fd table and /proc/net/tcp{,6}."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes and fields[3] == "01":  # ESTABLISHED
                ports.append(int(fields[2].rsplit(":", 1)[1], 16))
    return ports
