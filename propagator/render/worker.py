"""Rendering off the event loop, in a worker process with a hard deadline and bounded
memory and output.

A template is a tenant's program: nested loops run for minutes, a huge string exhausts
memory, and a thread could be neither stopped nor kept from holding the interpreter. So
an application's manifests are rendered for all its clusters in one call to a worker
process (``anyio.to_process``, kept between calls, at a lower CPU priority): past
``timeout_s`` the worker is killed and a fresh one serves the next call; it may not grow by
more than ``MEMORY_HEADROOM``; and what it returns may not exceed ``max_bytes`` as JSON.
Each limit ends in a RenderError
that names it, as every template failure does.

Manifests that hold no template, rendered with no override, are copied in the controller
instead: a copy cannot loop, its size is known before it is made (it is checked against
``max_bytes`` first), and on a busy machine the worker's round trip, at its lower
priority, was a large part of a plan's time (``bench.scale``; docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_process

from api.application import Override
from api.charts import is_chart_release
from propagator.render.helm import (
    PARALLEL,
    ChartRenderer,
    ClusterApis,
    Inputs,
    expand,
    inputs_of,
    render_ahead,
)
from propagator.render.manifests import (
    ApplicationRef,
    Charts,
    RenderError,
    is_template,
    render_for_cluster,
)

MEMORY_HEADROOM = 512 << 20
"""Bytes of address space a render worker may add to what it has once started."""

WORKERS = 2
"""Render workers at once (each a process)."""
_WORKERS = anyio.CapacityLimiter(WORKERS)


@dataclass(frozen=True)
class RenderTarget:
    """What rendering reads of one target cluster (plain data: it crosses to the worker)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    layer: str = ""
    region: str | None = None
    zone: str | None = None
    provider: str | None = None
    replicas: int | None = None
    """Divided replicas assigned there (None: the manifests' own)."""
    replica_fields: tuple[tuple[str, str, str], ...] = ()
    """(apiVersion, kind, JSON pointer) where ``replicas`` is written in objects of each
    divisible kind (their interpreter rules' ``replicas.field``)."""
    kubernetes_version: str | None = None
    """The cluster's Kubernetes version (a chart's ``.Capabilities.KubeVersion``)."""
    api_versions: tuple[str, ...] = ()
    """What the cluster serves, ``group/version`` and ``group/version/Kind`` (a chart's
    ``.Capabilities.APIVersions``); given only when the application has a chart."""


_confined = False
NICENESS = 10
"""A render worker yields the CPU to the controller and everything else on the machine: a
template that loops until its deadline slows nobody else's work."""


def _confine(controller: int) -> None:
    """Lower this worker's CPU priority, cap its address space and tie its life to the
    ``controller`` process's, once (it is kept between calls)."""
    global _confined
    if _confined:
        return
    _confined = True
    _die_with(controller)
    os.nice(NICENESS)
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[0])
    limit = pages * resource.getpagesize() + MEMORY_HEADROOM
    # The soft limit only: the chart renderer it starts sets its own (a hard limit, once lowered,
    # could not be raised again without privileges). Nothing a template runs can call
    # setrlimit.
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


PR_SET_PDEATHSIG = 1


def _die_with(controller: int) -> None:
    """Have the kernel kill this worker when the controller that started it dies: a
    controller killed mid-render (SIGKILL, OOM) must not leave a tenant's endless template
    spinning on its own (an idle worker ends anyway, at end of input). Linux only."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    # Compared with the controller's pid, not with 1: in a pod the controller is PID 1.
    if os.getppid() != controller:  # it died before that took hold
        os._exit(1)


def render_targets(
    manifests: Sequence[Mapping[str, Any]],
    overrides: Sequence[Override],
    targets: Sequence[RenderTarget],
    app: ApplicationRef,
    max_bytes: int,
    controller: int,
    renderer: ChartRenderer | None = None,
    timeout_s: float = 60.0,
) -> dict[str, list[dict[str, Any]]]:
    """The objects for each target (runs in the worker, which ``controller``, a pid,
    started; charts by ``renderer`` within ``timeout_s``); raises RenderError."""
    _confine(controller)
    deadline = time.monotonic() + timeout_s
    if renderer is not None and any(is_chart_release(m) for m in manifests):
        _charts_ahead(manifests, overrides, targets, app, renderer, deadline)
    try:
        rendered = {
            t.name: render_for_cluster(
                manifests,
                overrides,
                t,
                app,
                t.replicas,
                t.replica_fields,
                None if renderer is None else _charts(t, renderer, deadline),
            )
            for t in targets
        }
        size = len(json.dumps(rendered, separators=(",", ":")))
    except MemoryError as exc:
        raise RenderError(
            f"rendering needs more than the {MEMORY_HEADROOM >> 20} MiB a render may use"
        ) from exc
    if size > max_bytes:
        raise RenderError(
            f"the rendered objects take {size} bytes for {len(targets)} cluster(s); at most "
            f"{max_bytes} are allowed"
        )
    return rendered


def _charts_ahead(
    manifests: Sequence[Mapping[str, Any]],
    overrides: Sequence[Override],
    targets: Sequence[RenderTarget],
    app: ApplicationRef,
    renderer: ChartRenderer,
    deadline: float,
) -> None:
    """Run the chart renders every target needs, several at once, before rendering each
    target: a first pass through the same rendering notes what each chart is rendered with
    there (a failure is raised again, with its message, by the pass that follows)."""
    wanted: list[Inputs] = []
    for t in targets:
        apis = ClusterApis(t.kubernetes_version, t.api_versions)

        def note(release: Mapping[str, Any], values: str, apis: ClusterApis = apis) -> list[Any]:
            wanted.append(inputs_of(release, values, apis, renderer))
            return []

        with contextlib.suppress(RenderError):
            render_for_cluster(
                manifests, overrides, t, app, t.replicas, t.replica_fields, Charts(note)
            )
    render_ahead(wanted, deadline, PARALLEL)


def _charts(target: RenderTarget, renderer: ChartRenderer, deadline: float) -> Charts:
    apis = ClusterApis(target.kubernetes_version, target.api_versions)
    return Charts(lambda release, values: expand(release, values, apis, renderer, deadline))


PLAIN_DEPTH = 64
"""Manifests nested deeper than this are not copied in the controller (the worker's
failure, if any, is the one to report)."""
REPLICAS_BYTES = 32
"""What setting ``spec.replicas`` may add to one rendered object, as JSON."""


def _plain(manifests: Sequence[Mapping[str, Any]]) -> bool:
    """No string anywhere in ``manifests`` is a template, and they nest at most
    ``PLAIN_DEPTH`` levels (walked without recursion: a manifest is the tenant's)."""
    stack: list[tuple[Any, int]] = [(m, 1) for m in manifests]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if is_template(value):
                return False
        elif isinstance(value, dict | list):
            if depth > PLAIN_DEPTH:
                return False
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)
    return True


def _copied_here(
    manifests: Sequence[Mapping[str, Any]],
    overrides: Sequence[Override],
    targets: Sequence[RenderTarget],
    app: ApplicationRef,
    max_bytes: int,
) -> dict[str, list[dict[str, Any]]] | None:
    """The render done in this process when it is a copy within ``max_bytes`` (see the
    module's docstring), else None."""
    if overrides or any(is_chart_release(m) for m in manifests) or not _plain(manifests):
        return None
    size = len(json.dumps(list(manifests), separators=(",", ":")))
    most = sum(size + REPLICAS_BYTES * len(manifests) + len(t.name) + 8 for t in targets)
    if most > max_bytes:
        return None  # the worker measures it exactly, and says so if it is too large
    return {
        t.name: render_for_cluster(manifests, (), t, app, t.replicas, t.replica_fields)
        for t in targets
    }


async def render_bounded(
    manifests: Sequence[Mapping[str, Any]],
    overrides: Sequence[Override],
    targets: Sequence[RenderTarget],
    app: ApplicationRef,
    *,
    timeout_s: float,
    max_bytes: int,
    renderer: ChartRenderer | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Render in a worker process within ``timeout_s`` (or here, when it is a copy;
    charts by ``renderer``); raises RenderError, never another exception for anything a
    template or a chart does."""
    if (here := _copied_here(manifests, overrides, targets, app, max_bytes)) is not None:
        return here
    return await _in_worker(manifests, overrides, targets, app, timeout_s, max_bytes, renderer)


async def _in_worker(
    manifests: Sequence[Mapping[str, Any]],
    overrides: Sequence[Override],
    targets: Sequence[RenderTarget],
    app: ApplicationRef,
    timeout_s: float,
    max_bytes: int,
    renderer: ChartRenderer | None = None,
) -> dict[str, list[dict[str, Any]]]:
    try:
        with anyio.fail_after(timeout_s):
            result: dict[str, list[dict[str, Any]]] = await anyio.to_process.run_sync(
                render_targets,
                list(manifests),
                list(overrides),
                list(targets),
                app,
                max_bytes,
                os.getpid(),
                renderer,
                timeout_s,
                cancellable=True,
                limiter=_WORKERS,
            )
            return result
    except TimeoutError as exc:
        raise RenderError(
            f"rendering for {len(targets)} cluster(s) took longer than {timeout_s:g}s "
            "(PROPAGATOR_RENDER_TIMEOUT_S); it was stopped"
        ) from exc
    except RenderError:
        raise
    except Exception as exc:  # the worker died (killed for memory, crashed): say so
        raise RenderError(f"the render worker failed: {type(exc).__name__}: {exc}") from exc


async def warm_up() -> None:
    """Start the render workers now (a worker's first start imports the renderer, about a
    second here), so that the first applications do not wait for it."""

    async def one() -> None:
        with contextlib.suppress(RenderError):  # a worker that cannot start: said on first use
            await _in_worker([], [], [], ApplicationRef("", ""), timeout_s=60, max_bytes=64)

    async with anyio.create_task_group() as tg:
        for _ in range(WORKERS):
            tg.start_soon(one)
