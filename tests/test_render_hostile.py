"""Templates as a hostile tenant writes them: every failure is a RenderError naming the
cluster, the manifest and the line; nothing runs past the deadline or the memory bound;
whole-value expressions keep their type; published sandbox escapes stay blocked."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.application import Override
from propagator.propagation.render import ApplicationRef, RenderError, render_for_cluster
from propagator.propagation.renderworker import RenderTarget, render_bounded

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
