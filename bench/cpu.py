"""CPU seconds used by each part of a benchmark's machine: members, hub, the process under
test and the latency proxies (all on the same cores)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio

from bench import latency_proxy
from fleet import local
from fleet.local import cluster as local_cluster


def cpu_by_part(state: local.FleetState, own: Callable[[], float]) -> dict[str, float]:
    """CPU seconds used so far, by part: the members' processes (API servers, etcd,
    controller managers, schedulers, kwok), the hub's, ``own`` (the bare loop's process or
    the controller) and the latency proxies'."""
    return {
        "members": sum(local_cluster.cpu_seconds(m) for m in state.members),
        "hub": local_cluster.cpu_seconds(state.hub),
        "own": own(),
        "proxies": latency_proxy.host_cpu_seconds(),
    }


def cpu_row(
    before: dict[str, float], after: dict[str, float], wall_s: float, **keys: Any
) -> dict[str, Any]:
    """A row of what each part used between ``before`` and ``after`` (``<part>_cpu_s``),
    their total and the cores they kept busy over ``wall_s``, after ``keys``."""
    used = {f"{part}_cpu_s": after[part] - before[part] for part in before}
    total = sum(used.values())
    return {**keys, "wall_s": wall_s, **used, "total_cpu_s": total, "cores_busy": total / wall_s}


async def quiet(
    cpu_seconds: Callable[[], float], below_cores: float = 0.3, limit_s: float = 20.0
) -> bool:
    """Wait until the processes ``cpu_seconds`` counts use less than ``below_cores`` over
    half a second, at most ``limit_s``; returns whether they did."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit_s:
        before = cpu_seconds()
        await anyio.sleep(0.5)
        if cpu_seconds() - before < below_cores * 0.5:
            return True
    return False


async def members_quiet(state: local.FleetState) -> bool:
    """Wait until the members' processes are at rest (:func:`quiet`): what a run of writes
    left them to do, such as a namespace's service account and root CA, is done."""
    return await quiet(lambda: sum(local_cluster.cpu_seconds(m) for m in state.members))


CPU_COLUMNS = [
    ("wall_s", "wall s"),
    ("members_cpu_s", "members"),
    ("hub_cpu_s", "hub"),
    ("own_cpu_s", "own"),
    ("proxies_cpu_s", "proxies"),
    ("total_cpu_s", "total"),
    ("cores_busy", "cores busy"),
]
