"""A chart's objects for one cluster, as ``helm template`` renders them (runs in the
render worker).

An application's chart appears among its objects as one ``ChartRelease`` object (a
*chart release*) that names the chart, its verified archive (added on the hub just before
rendering, never kept in a revision) and its values. The worker expands it per cluster
with that cluster's Kubernetes version and served API versions (``.Capabilities``), so a
chart renders as it would if installed there. The renderer is ``chartrender``
(hack/chartrender: Helm's own packages, pinned, doing what ``helm template`` does), one
process for many clusters: a process start per cluster was nearly all of a render's time.

It runs as a tenant's program does: in an empty directory with an empty environment (no
kubeconfig, no plugins, no registry credentials, no network use: the chart is a local
archive), with its memory, processor time, output and wall time bounded, and killed with
the worker. Each object is annotated with the template it came from, so a refusal can name
it.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import ctypes
import functools
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import yaml

from api.charts import TEMPLATE_ANNOTATION
from propagator.render.manifests import ChartRenderError

HOOK_ANNOTATION = "helm.sh/hook"
MEMORY_BYTES = 512 << 20
"""Memory (data: heap and stacks) one run of the renderer may use. The address space is not
bounded: Go reserves far more of it than it ever uses."""
ERROR_CHARS = 600
"""Characters of Helm's error message kept in a RenderFailed message."""


@dataclass(frozen=True)
class ChartRenderer:
    """How the worker renders charts."""

    binary: str
    """The chart renderer (``chartrender``, Helm's packages: hack/chartrender), a path or
    a name on PATH."""
    max_bytes: int
    """What one render may print."""


@dataclass(frozen=True)
class ClusterApis:
    """What ``.Capabilities`` says of one cluster."""

    kubernetes_version: str | None
    api_versions: tuple[str, ...]
    """``group/version`` and ``group/version/Kind`` the cluster serves."""


_KUBE_VERSION = re.compile(r"v?\d{1,4}\.\d{1,4}\.\d{1,6}")
_API_VERSION = re.compile(
    r"[A-Za-z0-9][A-Za-z0-9.\-]{0,252}(/[A-Za-z0-9][A-Za-z0-9.\-]{0,62}){0,2}"
)
MAX_API_VERSIONS = 4000
"""``--api-versions`` given to Helm at most (a member's discovery is its own to say)."""


def inputs_of(
    release: Mapping[str, Any], values: str, cluster: ClusterApis, renderer: ChartRenderer
) -> Inputs:
    """What one render of ``release`` (materialized, its ``values`` rendered for the
    cluster) reads on ``cluster``; raises ChartRenderError."""
    chart = release.get("chart") or {}
    archive = release.get("archive")
    if not isinstance(archive, str) or not archive:
        raise ChartRenderError(f"chart {chart.get('name')}: its archive was not fetched")
    files = tuple(str(v) for v in release.get("valuesFiles") or ())
    version = cluster.kubernetes_version
    kube = version.split("+")[0].split("-")[0] if version else None
    if kube is not None and not _KUBE_VERSION.fullmatch(kube):
        kube = None  # a version Helm cannot read: its default
    return Inputs(
        archive,
        str(release["metadata"]["name"]),
        str(release.get("namespace") or "default"),
        bool(release.get("includeCRDs")),
        (*files, values),
        kube,
        cluster.api_versions,
        renderer,
    )


def expand(
    release: Mapping[str, Any],
    values: str,
    cluster: ClusterApis,
    renderer: ChartRenderer,
    deadline: float,
) -> list[dict[str, Any]]:
    """The objects ``release`` (a materialized chart release whose ``values`` is already
    rendered for the cluster) renders to on ``cluster``; raises ChartRenderError."""
    inputs = inputs_of(release, values, cluster, renderer)
    # Kept by inputs: clusters of one Kubernetes version and API set with the same values
    # render once (the caller copies before it patches).
    found = _KEPT.get(inputs)
    if found is None:
        [result] = _render_batch([inputs], _left(deadline))
        if isinstance(result, ChartRenderError):
            raise result
        found = _keep(inputs, result)
    else:
        _KEPT.move_to_end(inputs)
    return copy.deepcopy(list(found[0]))


def render_ahead(wanted: Iterable[Inputs], deadline: float, parallel: int) -> None:
    """Render the inputs of ``wanted`` not kept yet and keep them, each chart's in up to
    ``parallel`` runs of the chart renderer at once (one run renders many clusters: a
    process start per cluster was nearly all of a render's time); a render that fails is
    left to :func:`expand` to run again and raise."""
    missing = list(dict.fromkeys(i for i in wanted if i not in _KEPT))
    if len(missing) < 2:
        return
    charts: dict[tuple[str, ChartRenderer], list[Inputs]] = {}
    for inputs in missing:
        charts.setdefault((inputs.archive, inputs.renderer), []).append(inputs)
    batches = [
        group[start::count]
        for group in charts.values()
        for count in [min(parallel, len(group))]
        for start in range(count)
    ]
    with ThreadPoolExecutor(max_workers=min(parallel, len(batches))) as pool:
        running = {pool.submit(_render_batch, b, _left(deadline)): b for b in batches}
        for done in as_completed(running):
            with contextlib.suppress(ChartRenderError):
                for inputs, result in zip(running[done], done.result(), strict=True):
                    if not isinstance(result, ChartRenderError):
                        _keep(inputs, result)


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.1)


def _keep(inputs: Inputs, rendered: _Rendered) -> _Rendered:
    global _kept_bytes
    if inputs not in _KEPT:
        _KEPT[inputs] = rendered
        _kept_bytes += rendered[1]
    while _kept_bytes > KEPT_BYTES and len(_KEPT) > 1:
        _, (_, size) = _KEPT.popitem(last=False)
        _kept_bytes -= size
    return rendered


KEPT_BYTES = 64 << 20
"""Bytes of rendered charts a worker keeps (by their inputs)."""
PARALLEL = max(1, min(4, os.cpu_count() or 1))
"""Renderer runs at once in a render worker."""


@dataclass(frozen=True)
class Inputs:
    """What one render reads (its cache key)."""

    archive: str
    name: str
    namespace: str
    crds: bool
    values: tuple[str, ...]
    kube: str | None
    apis: tuple[str, ...]
    renderer: ChartRenderer


_Rendered = tuple[tuple[dict[str, Any], ...], int]
"""A render's objects, and the bytes of its output."""
_KEPT: OrderedDict[Inputs, _Rendered] = OrderedDict()
_kept_bytes = 0


def _render_batch(batch: Sequence[Inputs], timeout_s: float) -> list[_Rendered | ChartRenderError]:
    """Each of ``batch`` (one chart: the same archive and renderer) rendered by one run of
    the chart renderer: its objects and output bytes, or why not."""
    renderer, archive = batch[0].renderer, batch[0].archive
    with tempfile.TemporaryDirectory(prefix="propagator-chart-") as work:
        chart = os.path.join(work, "chart.tgz")
        with open(chart, "wb") as out:
            out.write(base64.b64decode(archive))
        renders = []
        for number, inputs in enumerate(batch):
            files = []
            for index, text in enumerate(inputs.values):
                path = os.path.join(work, f"values-{number}-{index}.yaml")
                with open(path, "w") as out:
                    out.write(text)
                files.append(path)
            apis = [api for api in inputs.apis if _API_VERSION.fullmatch(api)]
            renders.append(
                {
                    "name": inputs.name,
                    "namespace": inputs.namespace,
                    "includeCRDs": inputs.crds,
                    "kubeVersion": inputs.kube or "",
                    "apiVersions": apis[:MAX_API_VERSIONS],
                    "valueFiles": files,
                }
            )
        request = os.path.join(work, "request.json")
        with open(request, "w") as out:
            json.dump({"chart": chart, "maxBytes": renderer.max_bytes, "renders": renders}, out)
        output = os.path.join(work, "out.jsonl")
        errors = os.path.join(work, "err.txt")
        # Each render is bounded by the renderer itself; the file, as JSON (escapes), too.
        limit = 2 * renderer.max_bytes * len(batch) + (1 << 20)
        code = _run(renderer.binary, work, request, output, errors, limit, timeout_s)
        with open(errors, "rb") as err:
            said = err.read(16 * 1024).decode(errors="replace")
        # Go ignores SIGXFSZ: a write past the bound fails, and it may still exit 0.
        if code == -signal.SIGXFSZ or os.path.getsize(output) >= limit:
            raise ChartRenderError(
                f"rendering the chart printed more than {limit} bytes; it was stopped"
            )
        if code in (-signal.SIGXCPU, -signal.SIGKILL) and not said.strip():
            raise ChartRenderError("rendering the chart used up its processor time; it was stopped")
        if code != 0 and ("out of memory" in said or "cannot allocate memory" in said):
            raise ChartRenderError(
                f"rendering the chart needed more than the {MEMORY_BYTES >> 20} MiB it may "
                "use; it was stopped"
            )
        if code != 0:
            raise ChartRenderError(_helm_error(said, work))
        with open(output, encoding="utf-8", errors="replace") as out:
            answers = out.read().splitlines()
        results: list[_Rendered | ChartRenderError] = []
        for line in answers[: len(batch)]:
            results.append(_answer(line, work))
    while len(results) < len(batch):
        results.append(ChartRenderError("the chart renderer stopped before this render"))
    return results


def _answer(line: str, work: str) -> _Rendered | ChartRenderError:
    try:
        answer = json.loads(line)
        if answer.get("error"):
            return ChartRenderError(_helm_error(str(answer["error"]), work))
        manifest = str(answer.get("manifest") or "")
        return tuple(parse_output(manifest)), len(manifest)
    except ChartRenderError as exc:
        return exc
    except (ValueError, AttributeError) as exc:
        return ChartRenderError(f"the chart renderer answered what does not parse: {exc}")


# Looked up here, not in the child: between fork and exec (with other threads starting
# the renderer too) the child must not load a library.
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def _limits(memory: int, cpu_s: int, file_bytes: int) -> None:
    """In the child before it runs the renderer: its bounds, and death with the worker."""
    resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    # The worker's soft address-space limit does not fit Go, which reserves far more
    # address space than it uses: back to the hard limit (its data is bounded above).
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _run(
    binary: str,
    work: str,
    request: str,
    output: str,
    errors: str,
    max_bytes: int,
    timeout_s: float,
) -> int:
    env = {
        "HOME": work,
        "PATH": "/usr/bin:/bin",
        "KUBECONFIG": os.path.join(work, "no-kubeconfig"),
        "GOMEMLIMIT": str(MEMORY_BYTES * 3 // 4),
        "GOMAXPROCS": "1",
    }
    with open(request, "rb") as ask, open(output, "wb") as out, open(errors, "wb") as err:
        try:
            process = subprocess.Popen(
                [binary],
                cwd=work,
                env=env,
                stdin=ask,
                stdout=out,
                stderr=err,
                preexec_fn=functools.partial(_limits, MEMORY_BYTES, int(timeout_s) + 1, max_bytes),
                start_new_session=True,
            )
        except OSError as exc:
            raise ChartRenderError(
                f"the chart renderer could not be started ({binary}): {exc}"
            ) from exc
        try:
            return process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise ChartRenderError(
                f"rendering the chart took longer than {timeout_s:g}s "
                "(PROPAGATOR_RENDER_TIMEOUT_S); it was stopped"
            ) from None


def _helm_error(said: str, work: str) -> str:
    """Helm's message, without the temporary paths and its advice on flags."""
    lines = [
        line.rstrip()
        for line in said.replace(work + "/", "").splitlines()
        if line.strip() and not line.startswith("Use --debug")
    ]
    text = " ".join(line.strip() for line in lines).removeprefix("Error: ")
    return text[:ERROR_CHARS] + ("…" if len(text) > ERROR_CHARS else "")


_DOCUMENT = re.compile(r"^---[ \t]*$", re.MULTILINE)
_SOURCE = re.compile(r"^# Source: (.+)$", re.MULTILINE)


def parse_output(text: str) -> list[dict[str, Any]]:
    """The objects of ``helm template``'s output, each annotated with its template;
    raises ChartRenderError naming the template of a document that is not an object."""
    objects = []
    for document in _DOCUMENT.split(text):
        found = _SOURCE.search(document)
        source = found.group(1).strip() if found else "?"
        try:
            obj = _load(document)
        except yaml.YAMLError as exc:
            raise ChartRenderError(f"{source}: the rendered YAML does not parse: {exc}") from exc
        if obj is None:
            continue
        if not isinstance(obj, dict):
            raise ChartRenderError(
                f"{source}: renders a {type(obj).__name__}, not a Kubernetes object"
            )
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            raise ChartRenderError(f"{source}: the object has no metadata")
        annotations = meta.get("annotations")
        if annotations is None:
            annotations = meta["annotations"] = {}
        if not isinstance(annotations, dict):
            raise ChartRenderError(f"{source}: metadata.annotations is not a map")
        if HOOK_ANNOTATION in annotations:
            continue  # hooks are not run (docs/charts.md); the status names them
        annotations[TEMPLATE_ANNOTATION] = source
        objects.append(obj)
    return objects


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load(document: str) -> Any:
    """Safe YAML without aliases: a template that prints a billion laughs within the
    output bound would otherwise become an object far larger than its text."""
    for event in yaml.parse(document, Loader=_LOADER):
        if isinstance(event, yaml.AliasEvent):
            raise yaml.YAMLError(
                f"aliases (*name) are not allowed in rendered objects: {event.start_mark}"
            )
    return yaml.load(document, Loader=_LOADER)
