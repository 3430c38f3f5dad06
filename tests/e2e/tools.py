"""Tools the e2e tests build from pinned Go modules (outside the clone, once): helm,
Prometheus and promtool, the Gateway API CRDs."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def built(script: str) -> Path:
    """The directory ``hack/<script>`` prints last (building on first use)."""
    result = subprocess.run(
        ["bash", str(ROOT / "hack" / script)], stdout=subprocess.PIPE, text=True, check=True
    )
    return Path(result.stdout.strip().splitlines()[-1])
