"""Tools the e2e tests build from pinned Go modules (outside the clone, once): helm,
Prometheus and promtool, Jaeger, the Gateway API CRDs; and stopping what they started."""

from __future__ import annotations

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
