"""A chart's objects for one cluster, by ``helm template`` (runs in the render worker).

An application's chart appears among its objects as one ``ChartRelease`` object (a
*chart release*) that names the chart, its verified archive (added on the hub just before
rendering, never kept in a revision) and its values. The worker expands it per cluster by
running the pinned ``helm template`` with that cluster's Kubernetes version and served API
versions (``.Capabilities``), so a chart renders as it would if installed there.

Helm runs as a tenant's program does: in an empty directory with an empty environment (no
kubeconfig, no plugins, no registry credentials, no network use: the chart is a local
archive), with its address space, processor time, file sizes and wall time bounded, and
killed with the worker. Each object is annotated with the template it came from, so a
refusal can name it.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import ctypes
import functools
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import yaml

from api.charts import TEMPLATE_ANNOTATION
from propagator.render.manifests import ChartRenderError

HOOK_ANNOTATION = "helm.sh/hook"
MEMORY_BYTES = 512 << 20
"""Memory (data: heap and stacks) ``helm template`` may use. The address space is not
bounded: Go reserves far more of it than it ever uses."""
ERROR_CHARS = 600
"""Characters of Helm's error message kept in a RenderFailed message."""


@dataclass(frozen=True)
class HelmRun:
    """How the worker runs Helm."""

    binary: str
    """The helm program (a path, or a name looked up on PATH)."""
    max_bytes: int
    """What Helm may print (its output file is capped there by the kernel)."""


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
    release: Mapping[str, Any], values: str, cluster: ClusterApis, helm: HelmRun
) -> Inputs:
    """What one helm run of ``release`` (materialized, its ``values`` rendered for the
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
        helm,
    )


def expand(
    release: Mapping[str, Any],
    values: str,
    cluster: ClusterApis,
    helm: HelmRun,
    deadline: float,
) -> list[dict[str, Any]]:
    """The objects ``release`` (a materialized chart release whose ``values`` is already
    rendered for the cluster) renders to on ``cluster``; raises ChartRenderError."""
    inputs = inputs_of(release, values, cluster, helm)
    # Kept by inputs: clusters of one Kubernetes version and API set with the same values
    # render once (the caller copies before it patches).
    found = _KEPT.get(inputs)
    if found is None:
        found = _keep(inputs, _rendered(inputs, _left(deadline)))
    else:
        _KEPT.move_to_end(inputs)
    return copy.deepcopy(list(found[0]))


def render_ahead(wanted: Iterable[Inputs], deadline: float, parallel: int) -> None:
    """Run the helm renders of ``wanted`` not kept yet, ``parallel`` at a time, and keep
    them (a render that fails is left to :func:`expand` to run again and raise): a
    hundred clusters, each with values of its own, are a hundred helm runs."""
    missing = list(dict.fromkeys(i for i in wanted if i not in _KEPT))
    if len(missing) < 2:
        return
    with ThreadPoolExecutor(max_workers=min(parallel, len(missing))) as pool:
        running = {pool.submit(_rendered, i, _left(deadline)): i for i in missing}
        for done in as_completed(running):
            with contextlib.suppress(ChartRenderError):
                _keep(running[done], done.result())


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
"""Bytes of helm output a worker keeps rendered (by their inputs)."""
PARALLEL = max(1, min(4, os.cpu_count() or 1))
"""Helm runs at once in a render worker."""


@dataclass(frozen=True)
class Inputs:
    """What one helm run reads (its cache key)."""

    archive: str
    name: str
    namespace: str
    crds: bool
    values: tuple[str, ...]
    kube: str | None
    apis: tuple[str, ...]
    helm: HelmRun


_Rendered = tuple[tuple[dict[str, Any], ...], int]
"""A helm run's objects, and the bytes of its output."""
_KEPT: OrderedDict[Inputs, _Rendered] = OrderedDict()
_kept_bytes = 0


def _rendered(inputs: Inputs, timeout_s: float) -> _Rendered:
    name, namespace, crds, values = inputs.name, inputs.namespace, inputs.crds, inputs.values
    kube, apis, helm, archive = inputs.kube, inputs.apis, inputs.helm, inputs.archive
    with tempfile.TemporaryDirectory(prefix="propagator-helm-") as work:
        chart = os.path.join(work, "chart.tgz")
        with open(chart, "wb") as out:
            out.write(base64.b64decode(archive))
        # Every value joined to its flag: a value read from a member can never be a flag.
        command = [helm.binary, "template", name, chart, f"--namespace={namespace}"]
        if crds:
            command.append("--include-crds")
        if kube:
            command.append(f"--kube-version={kube}")
        command += [f"--api-versions={api}" for api in apis if _API_VERSION.fullmatch(api)][
            :MAX_API_VERSIONS
        ]
        for index, text in enumerate(values):
            path = os.path.join(work, f"values-{index}.yaml")
            with open(path, "w") as out:
                out.write(text)
            command.append(f"--values={path}")
        output = os.path.join(work, "out.yaml")
        errors = os.path.join(work, "err.txt")
        code = _run(command, work, output, errors, helm.max_bytes, timeout_s)
        with open(errors, "rb") as err:
            said = err.read(16 * 1024).decode(errors="replace")
        # Go ignores SIGXFSZ: a write past the bound fails, and helm may still exit 0.
        if code == -signal.SIGXFSZ or os.path.getsize(output) >= helm.max_bytes:
            raise ChartRenderError(
                f"helm template printed more than {helm.max_bytes} bytes "
                "(PROPAGATOR_RENDER_MAX_BYTES); it was stopped"
            )
        if code in (-signal.SIGXCPU, -signal.SIGKILL) and not said.strip():
            raise ChartRenderError("helm template used up its processor time; it was stopped")
        if code != 0 and ("out of memory" in said or "cannot allocate memory" in said):
            raise ChartRenderError(
                f"helm template needed more than the {MEMORY_BYTES >> 20} MiB it may use; "
                "it was stopped"
            )
        if code != 0:
            raise ChartRenderError(_helm_error(said, work))
        with open(output, encoding="utf-8", errors="replace") as out:
            text = out.read()
    return tuple(parse_output(text)), len(text)


# Looked up here, not in the child: between fork and exec (with other threads starting
# helm too) the child must not load a library.
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def _limits(memory: int, cpu_s: int, file_bytes: int) -> None:
    """In the child before it runs helm: its bounds, and death with the worker."""
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
    command: list[str], work: str, output: str, errors: str, max_bytes: int, timeout_s: float
) -> int:
    env = {
        "HOME": work,
        "PATH": "/usr/bin:/bin",
        "HELM_CACHE_HOME": os.path.join(work, "cache"),
        "HELM_CONFIG_HOME": os.path.join(work, "config"),
        "HELM_DATA_HOME": os.path.join(work, "data"),
        "HELM_PLUGINS": os.path.join(work, "plugins"),
        "KUBECONFIG": os.path.join(work, "no-kubeconfig"),
        "GOMEMLIMIT": str(MEMORY_BYTES * 3 // 4),
        "GOMAXPROCS": "1",
    }
    with open(output, "wb") as out, open(errors, "wb") as err:
        try:
            process = subprocess.Popen(
                command,
                cwd=work,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                preexec_fn=functools.partial(_limits, MEMORY_BYTES, int(timeout_s) + 1, max_bytes),
                start_new_session=True,
            )
        except OSError as exc:
            raise ChartRenderError(f"helm could not be started ({command[0]}): {exc}") from exc
        try:
            return process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise ChartRenderError(
                f"helm template took longer than {timeout_s:g}s "
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
