"""Templates as a hostile tenant writes them: every failure is a RenderError naming the
cluster, the manifest and the line; nothing runs past the deadline or the memory bound;
whole-value expressions keep their type; published sandbox escapes stay blocked."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.application import Override
from propagator.render.manifests import ApplicationRef, RenderError, render_for_cluster
from propagator.render.worker import (
    NICENESS,
    WORKERS,
    RenderTarget,
    render_bounded,
    warm_up,
)

APP = ApplicationRef("web", "shop")
EDGE = RenderTarget("edge-1", {"tier": "edge"}, "edge", "eu-west")


def config(**data: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data}


def render(manifest: dict[str, Any], values: dict[str, Any] | None = None) -> dict[str, Any]:
    overrides = (
        [Override.model_validate({"clusterNames": ["edge-1"], "values": values})] if values else []
    )
    return render_for_cluster([manifest], overrides, EDGE, APP)[0]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("NO", "NO"),  # YAML 1.1 would make these False, 15, 45000 and NaN
        ("017", "017"),
        ("12:30:00", "12:30:00"),
        (".nan", ".nan"),
        (3, 3),
        (2.5, 2.5),
        (True, True),
        (["a", 1], ["a", 1]),
        ({"k": "v"}, {"k": "v"}),
    ],
)
def test_a_whole_value_expression_keeps_the_type_it_has(value: Any, expected: Any) -> None:
    assert render(config(v="{{ values.v }}"), {"v": value})["data"]["v"] == expected


def test_a_number_json_cannot_hold_is_an_error() -> None:
    with pytest.raises(RenderError, match=r"cluster edge-1: manifest 1 \(ConfigMap c\), line"):
        render(config(v="{{ values.v | float * 1e308 * 10 }}"), {"v": "1"})


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("{{ 1 / 0 }}", "ZeroDivisionError"),
        ("{{ range(10**9) | list }}", "Range too big"),
        ("{{ 'a' * 10**9 }}", "makes more than"),
        ("{{ 10 ** (10 ** 9) }}", "too large"),  # Jinja's ** groups to the left
        ("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "RecursionError"),
        ("{{ values.missing }}", "UndefinedError"),
        ("{{ ''.__class__.__mro__ }}", "unsafe|__class__"),
        # published escapes (jinja2 < 3.1.5/3.1.6): str.format through |attr
        ("{{ '{0.__class__.__base__}' | attr('format')(1) }}", "SecurityError"),
        ("{% set f = '{0.__class__.__base__}'.format %}{{ f(1) }}", "SecurityError"),
    ],
)
def test_every_template_failure_is_a_render_error(template: str, why: str) -> None:
    with pytest.raises(RenderError, match=why):
        render(config(v=template))


def _patched(value: Any) -> Override:
    return Override.model_validate(
        {
            "clusterNames": ["edge-1"],
            "patches": [{"op": "add", "path": "/data/w", "value": value}],
        }
    )


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("{{ range(10**9) | list }}", "Range too big"),
        ("{{ 'a' * 10**9 }}", "makes more than"),
        ("{{ ''.__class__.__mro__ }}", "unsafe|__class__"),
        ("{{ '{0.__class__.__base__}' | attr('format')(1) }}", "SecurityError"),
    ],
)
def test_a_patch_value_is_as_sandboxed_as_a_manifest(template: str, why: str) -> None:
    with pytest.raises(RenderError, match=rf"cluster edge-1: override 1, patch 1 .*{why}"):
        render_for_cluster([config(v="1")], [_patched({"nested": [template]})], EDGE, APP)


def test_a_patch_value_past_the_deadline_is_stopped() -> None:
    loop = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    with pytest.raises(RenderError, match=r"took longer than 1s"):
        anyio.run(
            lambda: render_bounded(
                [config(v="1")],
                [_patched(loop)],
                [EDGE],
                APP,
                timeout_s=1.0,
                max_bytes=1 << 20,
            )
        )


def _bounded(manifest: dict[str, Any], timeout_s: float = 5.0, max_bytes: int = 1 << 20) -> Any:
    return anyio.run(
        lambda: render_bounded(
            [manifest], [], [EDGE], APP, timeout_s=timeout_s, max_bytes=max_bytes
        )
    )


def test_a_render_past_the_deadline_is_stopped() -> None:
    nested = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}done"
    started = time.monotonic()
    with pytest.raises(RenderError, match=r"took longer than 1s"):
        _bounded(config(v=nested), timeout_s=1.0)
    # the next render gets a fresh worker
    assert _bounded(config(v="{{ cluster.name }}"))["edge-1"][0]["data"]["v"] == "edge-1"
    assert time.monotonic() - started < 60  # a hang guard, not a performance check


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command (state first); None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) and fields[1] == str(pid):
            out.append(int(entry.name))
    return out


def test_a_render_worker_dies_with_the_controller() -> None:
    # A controller killed mid-render must not leave the tenant's template running.
    script = textwrap.dedent(
        """
        import anyio
        from propagator.render.manifests import ApplicationRef
        from propagator.render.worker import NICENESS, RenderTarget, render_bounded
        loop = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
        manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                    "data": {"v": loop}}
        anyio.run(lambda: render_bounded([manifest], [], [RenderTarget("e")],
                                         ApplicationRef("w", "s"), timeout_s=600,
                                         max_bytes=1 << 20))
        """
    )
    controller = subprocess.Popen([sys.executable, "-c", script])
    workers: list[int] = []
    try:
        for _ in range(600):  # until a worker runs the template (it lowered its priority)
            workers = [
                w for w in _children(controller.pid) if (f := _stat(w)) and f[16] == str(NICENESS)
            ]
            if workers or controller.poll() is not None:
                break
            time.sleep(0.1)
        assert workers, "no render worker started"
    finally:
        controller.send_signal(signal.SIGKILL)
        controller.wait()
    for _ in range(300):
        if all((f := _stat(w)) is None or f[0] == "Z" for w in workers):
            break
        time.sleep(0.1)
    left = {w: _stat(w) for w in workers}
    for worker, fields in left.items():
        if fields is not None and fields[0] != "Z":
            os.kill(worker, signal.SIGKILL)  # do not leave it spinning either way
    assert all(f is None or f[0] == "Z" for f in left.values()), left


def test_a_worker_lives_while_the_process_that_started_it_does_whatever_its_pid() -> None:
    # In a pod the controller is PID 1: the check is against its pid, not against 1.
    script = (
        "import os, sys; from propagator.render.worker import _die_with; "
        "_die_with(os.getppid() + int(sys.argv[1])); print('alive')"
    )
    kept = subprocess.run([sys.executable, "-c", script, "0"], capture_output=True, text=True)
    assert (kept.returncode, kept.stdout.strip()) == (0, "alive")
    orphan = subprocess.run([sys.executable, "-c", script, "1"], capture_output=True, text=True)
    assert (orphan.returncode, orphan.stdout) == (1, "")


def test_memory_and_output_are_bounded() -> None:
    with pytest.raises(RenderError, match=r"MiB a render may use|MemoryError"):
        _bounded(config(v="{{ 'x' | center(10**9) }}"))
    with pytest.raises(RenderError, match=r"at most 2048 are allowed"):
        _bounded(config(v="{{ 'x' * 5000 }}"), max_bytes=2048)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_any_template_text_renders_or_is_a_render_error(source: str) -> None:
    with contextlib.suppress(RenderError):  # anything else fails the test
        render(config(v=source))


class _NoWorker:
    """Stands in for the worker pool: records that a render went there."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        raise RuntimeError("went to a worker")


def _nested(depth: int) -> dict[str, Any]:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value  # type: ignore[no-any-return]


def test_manifests_without_templates_or_overrides_are_copied_without_a_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worker = _NoWorker()
    monkeypatch.setattr(anyio.to_process, "run_sync", worker)
    deployment: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "template": {"metadata": {"labels": {"app": "web"}}}},
    }
    fields = (("apps/v1", "Deployment", "/spec/replicas"),)
    targets = [
        RenderTarget("edge-1", replicas=3, replica_fields=fields),
        RenderTarget("edge-2", replicas=0, replica_fields=fields),
    ]
    rendered: dict[str, list[dict[str, Any]]] = anyio.run(
        lambda: render_bounded(
            [config(v="{ not a template }"), deployment],
            [],
            targets,
            APP,
            timeout_s=5,
            max_bytes=1 << 20,
        )
    )
    assert worker.calls == 0
    assert rendered["edge-1"][0]["data"] == {"v": "{ not a template }"}
    assert [r[1]["spec"]["replicas"] for r in rendered.values()] == [3, 0]
    assert deployment["spec"]["replicas"] == 1  # the manifest itself is left as it was
    # What a copy lacks to be applied is the same error as from a worker.
    with pytest.raises(RenderError, match=r"cluster edge-1: manifest 1 .*metadata.name"):
        anyio.run(
            lambda: render_bounded(
                [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}],
                [],
                [EDGE],
                APP,
                timeout_s=5,
                max_bytes=1 << 20,
            )
        )
    assert worker.calls == 0


@pytest.mark.parametrize(
    ("manifest", "overrides", "max_bytes"),
    [
        (config(v="{{ cluster.name }}"), [], 1 << 20),  # a template
        (
            config(v="x"),
            [Override.model_validate({"clusterNames": ["e"], "values": {"a": 1}})],
            1 << 20,
        ),
        (config(v=_nested(100)), [], 1 << 20),  # nested past PLAIN_DEPTH
        (config(v="x" * 3000), [], 4096),  # two copies may not fit in max_bytes
    ],
)
def test_templates_overrides_deep_or_large_manifests_go_to_a_worker(
    monkeypatch: pytest.MonkeyPatch,
    manifest: dict[str, Any],
    overrides: list[Override],
    max_bytes: int,
) -> None:
    worker = _NoWorker()
    monkeypatch.setattr(anyio.to_process, "run_sync", worker)
    with pytest.raises(RenderError, match="went to a worker"):
        anyio.run(
            lambda: render_bounded(
                [manifest],
                overrides,
                [RenderTarget("e"), RenderTarget("f")],
                APP,
                timeout_s=5,
                max_bytes=max_bytes,
            )
        )
    assert worker.calls == 1


def test_a_large_copy_is_refused_by_the_worker_with_its_size() -> None:
    with pytest.raises(RenderError, match=r"take \d+ bytes for 2 cluster\(s\); at most 4096"):
        anyio.run(
            lambda: render_bounded(
                [config(v="x" * 3000)],
                [],
                [RenderTarget("e"), RenderTarget("f")],
                APP,
                timeout_s=5,
                max_bytes=4096,
            )
        )


def test_warm_up_starts_every_render_worker_though_its_render_is_a_copy() -> None:
    # Its empty render would be copied in this process; the workers must start anyway.
    async def started() -> list[int]:
        await warm_up()
        return [w for w in _children(os.getpid()) if (f := _stat(w)) and f[16] == str(NICENESS)]

    assert len(anyio.run(started)) == WORKERS
